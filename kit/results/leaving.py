"""Leaving MXNet: per model, saving release and exit (ONNX Runtime, OpenVINO, PyTorch), whether its graph exports
to ONNX, whether the exit's runtime runs it, the verdict against the saving release's outputs, and what blocks it
(the operator) or mends it (a remedy).

Rows come from the exits' records (``direction == "onnx"``); the same rows feed summary.md, summary.ipynb,
``report --issue`` and ``report --json``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pandas is imported where a table is made: the CLI writing reports does without it
    import pandas as pd

from kit.common.capabilities import EXIT_APIS, EXIT_RUNTIMES
from kit.common.versions import sort_key
from kit.results.markdown import md_text

#: how each exit is shown
EXIT_TITLES = {"onnx": "ONNX Runtime", "openvino": "OpenVINO", "torch": "PyTorch"}
COLUMNS = [
    "model",
    "saved with",
    "exit",
    "exported by",
    "exports",
    "runs",
    "verdict",
    "max abs",
    "blocked by",
    "remedy",
    "opset",
    "onnx",
    "runtime",
    "file",
]

#: what names the operator an export or a run fails on, most specific first
_BLOCKERS = (
    r"op type (\S+?)(?: yet)?\.?$",
    r"for operator (\w+)",
    r"exporter's convert_(\w+)",
    r"Op \((\w+)\)",
    r"running (\w+) node",
    r"operation_type='(\w+)'",
)


def records_of(records: list[dict]) -> list[dict]:
    return [r for r in records if r.get("api") in EXIT_APIS]


def blocker(rec: dict) -> str | None:
    """The operator a failing exit cell names (``_image_resize``, ``ReduceMean``, ``LSTM``), else None."""
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


def runtime_version(rec: dict) -> str | None:
    """The runtime an exit cell ran in, with its version (``onnxruntime 1.32.0``, ``torch 2.15.0``)."""
    info = rec.get("onnx") or {}
    runtime = info.get("runtime") or {}
    name = runtime.get("name") or EXIT_RUNTIMES.get(rec.get("api"))
    version = (runtime.get("versions") or {}).get(name) or (info.get("onnxruntime") or {}).get("onnxruntime")
    return f"{name} {version}" if version else None


def row(rec: dict) -> dict:
    """One exit cell as a row of :data:`COLUMNS`."""
    info = rec.get("onnx") or {}
    verdict = rec["verdict"]
    exported = "-" if verdict == "unsupported" else ("no" if verdict in ("load-error", "corrupt") else "yes")
    runs = "-" if exported != "yes" else ("no" if verdict == "infer-error" else "yes")
    return {
        "model": rec["model"],
        "saved with": rec["saved_with"],
        "exit": EXIT_TITLES.get(rec["api"], rec["api"]),
        "exported by": f"{rec['loaded_with']} ({rec.get('source_api') or '?'})",
        "exports": exported,
        "runs": runs,
        "verdict": verdict,
        "max abs": (rec.get("summary") or {}).get("max_abs"),
        "blocked by": blocker(rec) if verdict in ("load-error", "infer-error") else None,
        "remedy": _remedy(rec),
        "opset": info.get("opset"),
        "onnx": info.get("onnx"),
        "runtime": runtime_version(rec),
        "file": info.get("artifact") or info.get("file"),
    }


def rows(records: list[dict]) -> list[dict]:
    out = [row(r) for r in records_of(records)]
    order = list(EXIT_TITLES.values())
    return sorted(out, key=lambda r: (r["model"], sort_key(r["saved with"]), r["exported by"], order.index(r["exit"])))


def table(records: list[dict]) -> pd.DataFrame:
    import pandas as pd

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
    onnx = sorted({r["onnx"] for r in found if r["onnx"]}, key=str)
    runtimes = sorted({r["runtime"] for r in found if r["runtime"]}, key=str)
    if onnx or runtimes:
        out += [
            "",
            f"Exported with onnx {', '.join(onnx) or '?'}, run in {', '.join(runtimes) or '?'}; the files (.onnx, "
            "OpenVINO's .xml/.bin, TorchScript's .pt) are in the run's onnx/ folder.",
        ]
    return out
