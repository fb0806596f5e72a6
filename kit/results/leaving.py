"""Leaving MXNet: per model and saving release, whether its graph exports to ONNX, whether ONNX Runtime runs
it, the verdict against the saving release's outputs, and what blocks it (the operator) or mends it (a remedy).

Rows come from the ``onnx`` records (``direction == "onnx"``); the same rows feed summary.md, summary.ipynb,
``report --issue`` and ``report --json``.
"""

from __future__ import annotations

import re

import pandas as pd

from kit.common.capabilities import ONNX_API
from kit.common.versions import sort_key
from kit.results.markdown import md_text

COLUMNS = [
    "model",
    "saved with",
    "exported by",
    "exports",
    "runs",
    "verdict",
    "max abs",
    "blocked by",
    "remedy",
    "opset",
    "onnx",
    "onnxruntime",
    "file",
]

#: what names the operator an export or a run fails on, most specific first
_BLOCKERS = (
    r"op type (\S+?)(?: yet)?\.?$",
    r"for operator (\w+)",
    r"exporter's convert_(\w+)",
    r"Op \((\w+)\)",
    r"running (\w+) node",
)


def records_of(records: list[dict]) -> list[dict]:
    return [r for r in records if r.get("api") == ONNX_API]


def blocker(rec: dict) -> str | None:
    """The operator a failing ONNX cell names (``_image_resize``, ``ReduceMean``), else None."""
    text = rec.get("error") or ""
    for pattern in _BLOCKERS:
        m = re.search(pattern, text, re.MULTILINE)
        if m:
            return m.group(1)
    return None


def _remedy(rec: dict) -> str:
    remedy = rec.get("remedy") or {}
    if remedy.get("fixed"):
        max_abs = (remedy.get("summary") or {}).get("max_abs")
        return f"{remedy['name']}: {remedy['verdict']}" + (f" (max abs {max_abs:.2g})" if max_abs is not None else "")
    if remedy:
        return "none: " + (remedy.get("why_none") or "no remedy applies")
    return ""


def row(rec: dict) -> dict:
    """One ONNX cell as a row of :data:`COLUMNS`."""
    info = rec.get("onnx") or {}
    verdict = rec["verdict"]
    exported = "-" if verdict == "unsupported" else ("no" if verdict in ("load-error", "corrupt") else "yes")
    runs = "-" if exported != "yes" else ("no" if verdict == "infer-error" else "yes")
    runtime = info.get("onnxruntime") or {}
    return {
        "model": rec["model"],
        "saved with": rec["saved_with"],
        "exported by": f"{rec['loaded_with']} ({rec.get('source_api') or '?'})",
        "exports": exported,
        "runs": runs,
        "verdict": verdict,
        "max abs": (rec.get("summary") or {}).get("max_abs"),
        "blocked by": blocker(rec) if verdict in ("load-error", "infer-error") else None,
        "remedy": _remedy(rec),
        "opset": info.get("opset"),
        "onnx": info.get("onnx"),
        "onnxruntime": runtime.get("onnxruntime"),
        "file": info.get("file"),
    }


def rows(records: list[dict]) -> list[dict]:
    out = [row(r) for r in records_of(records)]
    return sorted(out, key=lambda r: (r["model"], sort_key(r["saved with"]), r["exported by"]))


def table(records: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows(records), columns=COLUMNS)


def _fmt(value) -> str:
    if value is None:
        return "-"
    return f"{value:.2g}" if isinstance(value, float) else md_text(value)


def markdown(records: list[dict]) -> list[str]:
    """The section's Markdown table (no rows: an empty list)."""
    found = rows(records)
    if not found:
        return []
    shown = [c for c in COLUMNS if c != "file"]
    out = ["| " + " | ".join(shown) + " |", "|" + "---|" * len(shown)]
    out += ["| " + " | ".join(_fmt(r[c]) for c in shown) + " |" for r in found]
    versions = sorted({(r["onnx"], r["onnxruntime"]) for r in found if r["onnx"] or r["onnxruntime"]}, key=str)
    if versions:
        out += [
            "",
            "Exported with onnx " + ", ".join(f"{o} (ONNX Runtime {t})" for o, t in versions) + "; the "
            ".onnx files are in the run's onnx/ folder.",
        ]
    return out
