"""Runtimes: per runtime (a release with what changes under it), does it import and under which remedy, does it
reproduce its release, its cells' verdicts and largest error; and where a runtime's cell and its release's
cell for the same artifact disagree (does ``1.7.0.post2+native`` reproduce what 1.6.0 saved where
``1.7.0.post2`` does not?), both, with their numbers.

Rows come from ``run.json``'s ``runtimes`` (the environment-level verdicts) and the records whose saving or
loading side is a runtime; the same rows feed summary.md, summary.ipynb, ``report --issue`` and
``report --json``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pandas is imported where a table is made: the CLI writing reports does without it
    import pandas as pd

from kit.common.verdicts import SEVERITY
from kit.common.versions import is_runtime, release_of, sort_key
from kit.results.markdown import md_code, md_fence, md_text

COLUMNS = [
    "runtime",
    "changes",
    "imports",
    "remedies",
    "reproduces its release",
    "python",
    "numpy",
    "MKLDNN",
    "cells",
    "verdicts",
    "forward cells",
    "max abs",
    "error",
]


def _max_abs(rec: dict):
    return (rec.get("summary") or {}).get("max_abs")


def _reproduces(entry: dict) -> str:
    verified = entry.get("verified") or {}
    if verified.get("ok") is None:
        return "-"
    if verified["ok"]:
        return f"yes ({verified['operators']} operators, max abs {verified['max_abs']:.2g})"
    parts = [f"{op} {d:.2g}" for op, d in (verified.get("differ") or {}).items()]
    parts += [f"{op}: {e}" for op, e in (verified.get("fails") or {}).items()]
    return "no: " + "; ".join(parts)


def rows(manifest: dict, records: list[dict]) -> list[dict]:
    """One row per runtime the run named."""
    out = []
    for entry in manifest.get("runtimes") or []:
        name = entry["name"]
        both = [r for r in records if name in (r["saved_with"], r["loaded_with"])]
        mine = [r for r in both if r["direction"] != "forward"]  # forward cells are reported apart, as elsewhere
        verdicts = {}
        for r in mine:
            verdicts[r["verdict"]] = verdicts.get(r["verdict"], 0) + 1
        errors = [_max_abs(r) for r in mine if _max_abs(r) is not None]
        features = entry.get("mxnet_features")
        failing = entry.get("verdict") not in ("imports", "imports under remedy", None)
        out.append(
            {
                "runtime": name,
                "changes": entry.get("changes"),
                "imports": entry.get("verdict") or "-",
                "remedies": ", ".join(r["name"] for r in entry.get("remedies") or []) or "-",
                "reproduces its release": _reproduces(entry),
                "python": entry.get("python"),
                "numpy": entry.get("numpy"),
                "MKLDNN": None if features is None else ("on" if "MKLDNN" in features else "off"),
                "cells": len(mine),
                "forward cells": len(both) - len(mine),
                "verdicts": ", ".join(f"{v} {verdicts[v]}" for v in SEVERITY if v in verdicts) or "-",
                "max abs": max(errors) if errors else None,
                "error": (entry.get("last_headline") or entry.get("headline")) if failing else entry.get("headline"),
            }
        )
    return sorted(out, key=lambda r: sort_key(r["runtime"]))


def table(manifest: dict, records: list[dict]) -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame(rows(manifest, records), columns=COLUMNS)


def disagreements(records: list[dict]) -> list[dict]:
    """The artifacts a runtime and its release both loaded with different verdicts, grouped by (runtime, saving
    release, the two verdicts): ``{"runtime", "release", "saved_with", "runtime_verdict", "release_verdict",
    "cells", "models", "runtime_max_abs", "release_max_abs", "better"}``; ``better`` when the runtime's verdict
    is the less severe (``1.7.0.post2+native`` identical on 1.6.0's artifacts where ``1.7.0.post2`` is close:
    the build, not the release, moved those numbers)."""
    canonical = {
        (r["saved_with"], r["model"], r["api"], r.get("archived"), r["loaded_with"]): r
        for r in records
        if not is_runtime(r["loaded_with"])
    }
    groups: dict = {}
    for r in records:
        if not is_runtime(r["loaded_with"]):
            continue
        release = release_of(r["loaded_with"])
        other = canonical.get((r["saved_with"], r["model"], r["api"], r.get("archived"), release))
        if other is None or other["verdict"] == r["verdict"]:
            continue
        key = (r["loaded_with"], release, r["saved_with"], r["verdict"], other["verdict"])
        group = groups.setdefault(
            key,
            {
                "runtime": key[0],
                "release": release,
                "saved_with": key[2],
                "runtime_verdict": key[3],
                "release_verdict": key[4],
                "cells": [],
                "models": [],
                "runtime_max_abs": None,
                "release_max_abs": None,
                "better": SEVERITY.index(key[3]) < SEVERITY.index(key[4]),
            },
        )
        group["cells"].append(f"{r['model']}/{r['api']}/{r['saved_with']}")
        if r["model"] not in group["models"]:
            group["models"].append(r["model"])
        for side, rec in (("runtime_max_abs", r), ("release_max_abs", other)):
            value = _max_abs(rec)
            if value is not None:
                group[side] = value if group[side] is None else max(group[side], value)
    return sorted(groups.values(), key=lambda g: (sort_key(g["runtime"]), sort_key(g["saved_with"]), not g["better"]))


def _num(value) -> str:
    return "-" if value is None else f"{value:.2g}"


def _changes(manifest: dict | None, runtime: str) -> str:
    """What a runtime changes, with its MKLDNN build feature where its probe read it: ``mxnet-native, MKLDNN off``."""
    entry = next((e for e in (manifest or {}).get("runtimes") or [] if e["name"] == runtime), {})
    text = entry.get("changes") or runtime
    features = entry.get("mxnet_features")
    return text if features is None else f"{text}, MKLDNN {'on' if 'MKLDNN' in features else 'off'}"


def disagreement_lines(records: list[dict], manifest: dict | None = None) -> list[str]:
    """One line per group of artifacts on which a runtime and its release disagree, with both verdicts and the
    largest errors; where the runtime is the closer one, that what it changes explains the difference."""
    out = []
    for g in disagreements(records):
        why = (
            f": what this runtime changes ({md_text(_changes(manifest, g['runtime']))}), not the release, "
            "moves these outputs"
            if g["better"]
            else ""
        )
        out.append(
            f"- {md_code(g['runtime'])} on what {md_text(g['saved_with'])} saved: **{md_text(g['runtime_verdict'])}** "
            f"(max abs {_num(g['runtime_max_abs'])}) where {md_text(g['release'])} gives "
            f"**{md_text(g['release_verdict'])}** (max abs {_num(g['release_max_abs'])}); {len(g['cells'])} cells "
            f"({md_text(', '.join(g['models']))}){why}"
        )
    return out


def _fmt(value) -> str:
    if value is None:
        return "-"
    return f"{value:.2g}" if isinstance(value, float) else md_text(value)


def headline(manifest: dict, records: list[dict] = ()) -> str | None:
    """The runtime line a run's headline shows: ``runtimes: 1.9.1+py3.12+numpy1.26.4 imports under remedy
    numpy-names, distutils (reproduces 1.9.1); 1.6.0+mkl imports``, then where a runtime is closer to what a
    release saved than its own release is; None without runtimes."""
    entries = manifest.get("runtimes") or []
    if not entries:
        return None
    parts = []
    for e in entries:
        remedies = ", ".join(r["name"] for r in e.get("remedies") or [])
        text = f"{e['name']} {e.get('verdict') or 'not built here'}"
        if remedies and e.get("verdict") != "imports":
            text += f" {remedies}"
        if (e.get("verified") or {}).get("ok"):
            text += f" (reproduces {e['release']})"
        parts.append(text)
    line = "runtimes: " + "; ".join(parts)
    closer: dict = {}  # one sentence per (runtime, its verdict, its release's verdict), over the saving releases
    for g in disagreements(records):
        if g["better"]:
            closer.setdefault((g["runtime"], g["release"], g["runtime_verdict"], g["release_verdict"]), []).append(g)
    if closer:
        line += ". " + "; ".join(
            f"{runtime} ({_changes(manifest, runtime)}) gives {mine} where {release} gives {theirs} on what "
            f"{', '.join(g['saved_with'] for g in groups)} saved ({sum(len(g['cells']) for g in groups)} cells, "
            f"{release}'s max abs up to {_num(max((g['release_max_abs'] or 0.0) for g in groups))})"
            for (runtime, release, mine, theirs), groups in closer.items()
        )
    return line


def markdown(manifest: dict, records: list[dict]) -> list[str]:
    """The section's Markdown: the table, the remedies with the lines to paste, the disagreements."""
    found = rows(manifest, records)
    if not found:
        return []
    out = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    out += ["| " + " | ".join(_fmt(r[c]) for c in COLUMNS) + " |" for r in found]
    for entry in manifest.get("runtimes") or []:
        for remedy in entry.get("remedies") or []:
            out += [
                "",
                f"**{md_code(entry['name'])}, remedy {md_text(remedy['name'])}**: {md_text(remedy['changes'])}.",
                "",
                *md_fence("\n".join(remedy["paste"]), "python"),
            ]
        if entry.get("verdict") == "does not import":
            error = entry.get("last_error") or entry.get("error") or ""
            out += ["", f"{md_code(entry['name'])} does not import:", "", *md_fence(error, "")]
    lines = disagreement_lines(records, manifest)
    if lines:
        out += ["", "Where a runtime and its release load the same artifact differently:", ""] + lines
    return out
