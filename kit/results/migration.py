"""Migrating to MXNet 2.0: what happened to every 1.x artifact loaded in a 2.0 release, and by which path.

Rows are (1.x API, saving release), or (model, API, saving release) in the detail;
one column per 2.0 release; a cell gives the verdicts and the load path the record
names. Cells whose API the saving release lacks are left out: a 1.0 release never
saved with ``save_parameters``, so there is nothing to migrate.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pandas is imported where a table is made: the CLI writing reports does without it
    import pandas as pd

from kit.common.capabilities import APIS, has_feature
from kit.common.verdicts import SEVERITY
from kit.common.versions import sort_key
from kit.results.markdown import md_text


def is_2x(release: str) -> bool:
    try:
        return has_feature(release, "gluon2")[0]
    except ValueError:  # a custom name: not a release string
        return False


def _migrating(records: list[dict]) -> list[dict]:
    """Records of a 1.x artifact the saving release actually wrote, loaded in a 2.0 release."""
    return [
        r
        for r in records
        if is_2x(r["loaded_with"])
        and not is_2x(r["saved_with"])
        and not (r["verdict"] == "unsupported" and (r.get("reason") or "").startswith("saving release"))
    ]


def _api_order(api: str):
    return (APIS.index(api) if api in APIS else len(APIS), api)


def cell_text(recs: list[dict]) -> str:
    """``close 5, load-error 1 (lstm) via SymbolBlock.imports``: verdicts worst first, failing models named."""
    counts = Counter(r["verdict"] for r in recs)
    parts = []
    for verdict in reversed(SEVERITY):  # worst first
        if verdict not in counts:
            continue
        text = f"{verdict} {counts[verdict]}"
        if verdict not in ("identical", "close", "unsupported"):
            text += " (" + ", ".join(sorted(r["model"] for r in recs if r["verdict"] == verdict)) + ")"
        parts.append(text)
    paths = sorted({r.get("load_path") for r in recs if r.get("load_path")})
    text = ", ".join(parts)
    if paths:
        text += " via " + " / ".join(paths)
    elif counts.get("unsupported") == len(recs):
        text += ": " + (recs[0].get("reason") or "").replace("loading release: ", "")
    return text + remedied_text(recs)


def remedied_text(recs: list[dict]) -> str:
    """``; remedied: lstm by rnn_flat_params (identical)``: the cells a verified remedy fixed, by remedy."""
    by: dict = {}
    for r in recs:
        remedy = r.get("remedy") or {}
        if remedy.get("fixed"):
            entry = by.setdefault(remedy["name"], {"models": set(), "verdicts": Counter()})
            entry["models"].add(r["model"])
            entry["verdicts"][remedy["verdict"]] += 1
    parts = []
    for name, e in sorted(by.items()):
        verdicts = ", ".join(f"{v} {e['verdicts'][v]}" for v in SEVERITY if v in e["verdicts"])
        parts.append(f"{', '.join(sorted(e['models']))} by {name} ({verdicts})")
    return f"; remedied: {'; '.join(parts)}" if parts else ""


def table(records: list[dict], detail: bool = False) -> pd.DataFrame:
    """The migration table: index (api, saved_with) or (model, api, saved_with), a column per 2.0 release."""
    import pandas as pd

    recs = _migrating(records)
    if not recs:
        return pd.DataFrame()
    keys = ("model", "api", "saved_with") if detail else ("api", "saved_with")
    targets = sorted({r["loaded_with"] for r in recs}, key=sort_key)
    groups: dict = {}
    for r in recs:
        groups.setdefault(tuple(r[k] for k in keys), {}).setdefault(r["loaded_with"], []).append(r)

    def order(key):
        parts = dict(zip(keys, key))
        return (parts.get("model", ""), _api_order(parts["api"]), sort_key(parts["saved_with"]))

    rows = []
    for key in sorted(groups, key=order):
        row = dict(zip(keys, key))
        for target in targets:
            cell = groups[key].get(target)
            row[f"in {target}"] = cell_text(cell) if cell else ""
        if detail:
            naive = [a for cell in groups[key].values() for r in cell for a in r.get("load_attempts") or []]
            row["naive path"] = f"{naive[0]['path']}: {naive[0].get('headline') or naive[0]['error']}" if naive else ""
        rows.append(row)
    return pd.DataFrame(rows).set_index(list(keys))


def markdown(records: list[dict]) -> list[str]:
    """The summary table as Markdown lines (empty when no 1.x artifact was loaded in 2.0)."""
    if not _migrating(records):
        return []  # without importing pandas: a third of a second of every run's reports
    df = table(records)
    cols = list(df.columns)
    lines = ["| API | saved with | " + " | ".join(cols) + " |", "|---|---|" + "---|" * len(cols)]
    for (api, saved), row in df.iterrows():
        cells = [md_text(api), md_text(saved)] + [md_text(row[c]) for c in cols]
        lines.append("| " + " | ".join(cells) + " |")
    return lines
