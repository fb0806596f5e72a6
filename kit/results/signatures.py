"""Incompatibility signatures: a failing cell reduced to the fact it shows, and the cells grouped by it.

A load error's signature is its message with what varies from cell to cell taken out (time stamps,
source lines, node names, paths, addresses, the wrapper a load path puts around it) and what names
the incompatibility kept (the operator, argument, parameter or attribute). A numeric regression's
signature is the model whose outputs moved (and whether the loading release's model code built
another architecture). Groups are keyed by (direction, signature); a group's id is a hash of the
signature alone, so it is the same in every run and in both directions.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

from kit.common.record_schema import cell_id
from kit.common.verdicts import CLOSE, DRIFT, FAILING, MISMATCH, SEVERITY
from kit.common.versions import sort_key

ERROR, NUMERIC = "error", "numeric"
DIRECTIONS = ("backward", "same", "unknown", "onnx", "runtime", "forward")  # the order groups are shown in
MAX_LENGTH = 200

#: messages MXNet words the same way in every release: reduced to the phrase that names the incompatibility
_KNOWN = [
    (re.compile(r"Cannot find argument '([^']+)'"), "Cannot find argument '{0}'"),
    (re.compile(r"Operator (\S+?):? is not registered"), "Operator {0} is not registered"),
    (re.compile(r"Invalid NDArray file format"), "Invalid NDArray file format"),
    (re.compile(r"Parameter '([^']+)' is missing"), "Parameter '{0}' is missing in the file"),
    (re.compile(r"Parameter '([^']+)' loaded from file .* is not present in"), "Parameter '{0}' is not in the model"),
    (re.compile(r"sha256 mismatch or missing: (.*?)(?: \(nothing was loaded\))?$"), "sha256 mismatch or missing: {0}"),
]
#: what wraps a message and differs by load path or release: taken out first
_WRAPPERS = [
    (re.compile(r"^case '[^']*': "), ""),  # the reference case that failed first
    (re.compile(r"\[\d\d:\d\d:\d\d\] "), ""),  # MXNet's log time stamp
    (re.compile(r"\S+\.(?:cc|cpp|cu|h|py):\d+:? "), ""),  # source file and line
    (re.compile(r"MXPredCreate failed \([^)]*\): "), ""),  # the C predict API's wrapper names the loading release
    (re.compile(r"(?:\b[A-Z]\w*(?:Error|Exception): )+"), ""),  # exception class names, repeated by wrappers
]
#: what else varies between cells showing one fact, for messages not in _KNOWN
_VARYING = [
    (re.compile(r"Check failed: [^:]*?(?::|(?= [A-Z]))\s*"), ""),  # the C++ condition; its text stays
    (re.compile(r"Error in operator \S+:"), "Error in operator <node>:"),
    (re.compile(r"Op \S+ of type"), "Op of type"),
    (re.compile(r"\bnode_\d+\b"), "<node>"),
    (re.compile(r"0x[0-9a-fA-F]+"), "<address>"),
    (re.compile(r"(?<![\w.])'?(?:file: )?(?:/[^\s/',]+)+/?'?"), "<path>"),  # not "5/7"
    (re.compile(r",? ?Possible Arguments:.*"), ""),  # the operator's whole argument list
]


def normalize(message: str) -> str:
    """An error message as a signature: its first line, without what varies from cell to cell."""
    lines = [line.strip() for line in (message or "").splitlines() if line.strip()]
    text = lines[0] if lines else ""
    for pattern, replacement in _WRAPPERS:
        text = pattern.sub(replacement, text)
    for pattern, template in _KNOWN:
        found = pattern.search(text)
        if found:
            return template.format(*found.groups())
    for pattern, replacement in _VARYING:
        text = pattern.sub(replacement, text)
    text = re.sub(r"\s+", " ", text).strip(" :,")
    return (text or "no error message")[:MAX_LENGTH]


def has_signature(rec: dict) -> bool:
    """Whether a record shows an incompatibility: a failing verdict in any direction, or a same-release
    reload that is not identical."""
    return rec["verdict"] in FAILING or (rec["direction"] == "same" and rec["verdict"] == CLOSE)


def signature(rec: dict) -> tuple[str, str] | None:
    """``(kind, signature)`` of a record, or None when it shows no incompatibility."""
    if not has_signature(rec):
        return None
    if rec["verdict"] in (DRIFT, MISMATCH, CLOSE):
        if rec.get("model_code_change"):
            return NUMERIC, f"model code changed: {rec['model']} rebuilt as another architecture"
        return NUMERIC, f"outputs of {rec['model']} moved past tolerance"
    return ERROR, normalize(rec.get("reason") or rec.get("error") or "")


def signature_id(kind: str, text: str) -> str:
    return "S-" + hashlib.sha1(f"{kind}:{text}".encode()).hexdigest()[:8]


@dataclass
class Group:
    """The cells of one run that show one signature in one direction."""

    id: str
    direction: str
    kind: str
    signature: str
    example: str  # one cell's reason, verbatim (the first cell in release order)
    cells: list[str] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    apis: list[str] = field(default_factory=list)
    saved_with: list[str] = field(default_factory=list)
    loaded_with: list[str] = field(default_factory=list)
    verdicts: dict = field(default_factory=dict)
    failing: int = 0  # cells that fail the run (backward or same, not allowed)
    allowed: int = 0
    first_jump: dict | None = None  # numeric groups: where the error first jumps
    remedy: dict = field(default_factory=dict)  # what the remedies tried on its cells did (see remedy_of)

    @property
    def first_saved(self) -> str:
        """The first release that saved an artifact showing it: where, by release order, it starts."""
        return self.saved_with[0]

    def as_dict(self) -> dict:
        return dict(self.__dict__, first_saved=self.first_saved)


def _order(rec: dict):
    return sort_key(rec["saved_with"]), sort_key(rec["loaded_with"]), rec["model"], rec["api"]


def _max_abs(rec: dict):
    return (rec.get("summary") or {}).get("max_abs")


def _first_jump(members: list[dict], records: list[dict]) -> dict:
    """The earliest loading release (then saving release) where a model's error is past tolerance, with
    its max abs error and the same artifact's error in the release that loaded it just before."""
    first = min(members, key=lambda r: (sort_key(r["loaded_with"]), sort_key(r["saved_with"])))
    earlier = [
        r
        for r in records
        if (r["model"], r["api"], r["saved_with"]) == (first["model"], first["api"], first["saved_with"])
        and sort_key(r["loaded_with"]) < sort_key(first["loaded_with"])
        and _max_abs(r) is not None
    ]
    before = max(earlier, key=lambda r: sort_key(r["loaded_with"]), default=None)
    return {
        "saved_with": first["saved_with"],
        "loaded_with": first["loaded_with"],
        "api": first["api"],
        "max_abs": _max_abs(first),
        "before_loaded_with": before["loaded_with"] if before else None,
        "before_max_abs": _max_abs(before) if before else None,
    }


def _example(members: list[dict]) -> str:
    """One member's reason, verbatim: the first in release order, through the Python API where one is."""
    rec = next((r for r in members if r["api"] != "c_predict"), members[0])
    return (rec.get("reason") or rec.get("error") or "").strip()


def group_records(
    records: list[dict], failing_ids: set | frozenset = frozenset(), allowed_ids: set | frozenset = frozenset()
) -> list[Group]:
    """Every record that shows an incompatibility, grouped by (direction, signature).

    ``failing_ids`` / ``allowed_ids``: the cells that fail the run / that an allow-list excuses, counted
    per group. Groups come backward
    first, forward last, the largest first within a direction.
    """
    buckets: dict[tuple, list[dict]] = {}
    for rec in sorted(records, key=_order):
        sig = signature(rec)
        if sig is not None:
            buckets.setdefault((rec["direction"],) + sig, []).append(rec)
    groups = []
    for (direction, kind, text), members in buckets.items():
        seen = {r["verdict"] for r in members}
        group = Group(
            id=signature_id(kind, text),
            direction=direction,
            kind=kind,
            signature=text,
            example=_example(members),
            cells=[cell_id(r) for r in members],
            models=sorted({r["model"] for r in members}),
            apis=sorted({r["api"] for r in members}),
            saved_with=sorted({r["saved_with"] for r in members}, key=sort_key),
            loaded_with=sorted({r["loaded_with"] for r in members}, key=sort_key),
            verdicts={v: sum(r["verdict"] == v for r in members) for v in SEVERITY if v in seen},
        )
        group.failing = sum(c in failing_ids for c in group.cells)
        group.allowed = sum(c in allowed_ids for c in group.cells)
        if kind == NUMERIC:
            group.first_jump = _first_jump(members, records)
        group.remedy = remedy_of(members)
        groups.append(group)
    rank = {d: i for i, d in enumerate(DIRECTIONS)}
    groups.sort(key=lambda g: (rank.get(g.direction, len(rank)), -len(g.cells), g.signature))
    return groups


VERIFIED, PARTIAL, NONE = "verified", "partial", "none"


def remedy_of(members: list[dict]) -> dict:
    """What the remedies did for a group's cells: ``status`` (verified: every cell fixed; partial; none),
    ``fixed`` of ``cells``, ``by`` (per remedy: its cells, their verdicts, the worst max abs, the user's
    code), ``why_none`` (why the cells left have no remedy, the most common reason) and ``tried``."""
    by: dict[str, dict] = {}
    why: dict[str, int] = {}
    tried = 0
    for rec in members:
        remedy = rec.get("remedy") or {}
        tried += bool(remedy.get("tried"))
        if remedy.get("fixed"):
            entry = by.setdefault(
                remedy["name"],
                {"name": remedy["name"], "title": remedy.get("title"), "cells": 0, "verdicts": {}, "max_abs": 0.0},
            )
            entry["cells"] += 1
            entry["verdicts"][remedy["verdict"]] = entry["verdicts"].get(remedy["verdict"], 0) + 1
            entry["max_abs"] = max(entry["max_abs"], (remedy.get("summary") or {}).get("max_abs") or 0.0)
            entry.setdefault("user_code", remedy.get("user_code"))
            entry.setdefault("example_cell", cell_id(rec))
            also = entry.setdefault("alternatives", [])
            also += [a for a in remedy.get("alternatives") or [] if a not in also]
        else:
            reason = remedy.get("why_none") or _untried(rec)
            why[reason] = why.get(reason, 0) + 1
    fixed = sum(e["cells"] for e in by.values())
    status = VERIFIED if fixed == len(members) else PARTIAL if fixed else NONE
    return {
        "status": status,
        "fixed": fixed,
        "cells": len(members),
        "tried": tried,
        "by": sorted(by.values(), key=lambda e: -e["cells"]),
        "why_none": max(why, key=lambda k: why[k]) if why else None,
    }


def _untried(rec: dict) -> str:
    """Why a failing record has no remedy attempt."""
    if "remedy" not in rec:
        return "no remedy was tried (a record written before remedies existed)"
    if rec["verdict"] in (DRIFT, MISMATCH, CLOSE):
        return "the outputs moved; no remedy changes numbers (mxcompat investigate finds the layer where it starts)"
    return "no remedy applies to this failure"


def remedy_text(group: Group) -> str:
    """``fixed by legacy_shape_semantics: identical in 8 of 8 cells`` or ``no known remedy: ...``."""
    r = group.remedy or {}
    if not r:
        return ""
    if not r.get("by"):
        return f"no known remedy: {r.get('why_none') or 'none applies'}"
    parts = []
    for entry in r["by"]:
        verdicts = " and ".join(f"{v} in {entry['verdicts'][v]}" for v in SEVERITY if v in entry["verdicts"])
        also = f" (also verified: {', '.join(entry['alternatives'])})" if entry.get("alternatives") else ""
        parts.append(f"{entry['name']}{also}: {verdicts}")
    text = f"fixed by {'; '.join(parts)} of {r['cells']} cells"
    if r["status"] == PARTIAL:
        text += f"; {r['cells'] - r['fixed']} left: {r.get('why_none')}"
    return text


def by_cell(groups: list[Group]) -> dict[str, Group]:
    """The group of each cell that has one."""
    return {c: g for g in groups for c in g.cells}


def span(releases: list[str]) -> str:
    """``1.5.1`` or ``1.5.1..1.9.1 (4)``: a sorted list of releases in a few characters."""
    if len(releases) == 1:
        return releases[0]
    return f"{releases[0]}..{releases[-1]} ({len(releases)})"


def where(group: Group) -> str:
    """What a group touches, in one line: its models, APIs and releases."""
    return (
        f"{', '.join(group.models)} via {', '.join(group.apis)}; saved with {span(group.saved_with)}, "
        f"loaded with {span(group.loaded_with)}"
    )


def jump_text(group: Group) -> str:
    """Where a numeric group's error first jumps: ``1.2.1 -> 1.3.1 (save_parameters): max abs 5.1, 0 in 1.2.1``."""
    j = group.first_jump
    if not j:
        return ""
    text = f"{j['saved_with']} -> {j['loaded_with']} ({j['api']})"
    if j["max_abs"] is not None:
        text += f": max abs {j['max_abs']:.3g}"
        if j["before_loaded_with"] is not None and j["before_max_abs"] is not None:
            text += f", {j['before_max_abs']:.3g} in {j['before_loaded_with']}"
    return text


def line(group: Group) -> str:
    """A group in one terminal line."""
    cells = f"{len(group.cells)} cell{'s' if len(group.cells) != 1 else ''}"
    if len(group.cells) == 1:
        cells += f" ({group.cells[0]})"
    jump = f"; first jumps at {jump_text(group)}" if group.first_jump else ""
    remedy = f"; {remedy_text(group)}" if group.remedy else ""
    return f"[{group.id}] {group.direction}: {group.signature}: {cells}: {where(group)}{jump}{remedy}"


def counts(groups: list[Group]) -> dict[str, dict]:
    """``{direction: {"signatures": n, "cells": n, "remedied": n, "partly": n}}``: ``remedied``, the signatures
    whose every cell a remedy fixed; ``partly``, those where it fixed some."""
    out: dict[str, dict] = {}
    for g in groups:
        entry = out.setdefault(g.direction, {"signatures": 0, "cells": 0, "remedied": 0, "partly": 0})
        entry["signatures"] += 1
        entry["cells"] += len(g.cells)
        entry["remedied"] += (g.remedy or {}).get("status") == VERIFIED
        entry["partly"] += (g.remedy or {}).get("status") == PARTIAL
    return out
