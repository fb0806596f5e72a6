"""What summary.ipynb shows, in the order a maintainer reads it: the headline (exit code, distinct
incompatibilities), verdict heatmaps, error distributions, the incompatibilities grouped by signature,
the per-cell tables (collapsible), the environments.

Runs on the host kernel (pandas and matplotlib). Figures are returned, so the
notebook displays them whatever matplotlib backend the environment sets.
"""

from __future__ import annotations

import html
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg", force=False)
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.colors import ListedColormap  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from kit.common.capabilities import APIS, EXIT_APIS, ONNX_DIRECTION  # noqa: E402
from kit.common.palette import VERDICT_COLOURS, text_colour  # noqa: E402
from kit.common.record_schema import cell_id  # noqa: E402
from kit.common.verdicts import PASSING, SEVERITY, UNSUPPORTED  # noqa: E402
from kit.common.versions import sort_key  # noqa: E402
from kit.results import leaving, migration, reports, runtime_report, signatures  # noqa: E402
from kit.results.markdown import md_code, md_text  # noqa: E402
from kit.results.records import load_run, worst  # noqa: E402
from kit.results.runs import RUN_MANIFEST, default_runs_dir  # noqa: E402

#: a heatmap cell whose failing models a verified remedy fixes: this beside its verdict (``✓R 2/3``: 2 of its 3)
REMEDY_MARK = "✓R"
REMEDY_HATCH = "////"  # and hatched over its verdict's colour when the remedy fixes every one
REMEDY_LEGEND = f"{REMEDY_MARK}: a verified\nremedy fixes\nthe cell"
ZERO_FLOOR = 1e-12  # identical outputs have zero error: drawn at this floor on log scales


class RunData:
    """A run's records as a table, plus the raw records and the run's manifest."""

    def __init__(self, run_dir: str | Path):
        self.dir = Path(run_dir)
        self.manifest, self.records, self.split = load_run(self.dir)
        allowed = {cell_id(r) for r, _ in self.split["allowed"]}
        self.df = pd.DataFrame(reports.flat_rows(self.dir, self.records, allowed), columns=reports.COLUMNS)
        self.groups = reports.groups_of(self.records, self.split)

    def apis(self) -> list[str]:
        """The APIs in the run, the zoo's in their usual order, then any other (a foreign checkpoint's)."""
        present = list(dict.fromkeys(self.df["api"]))
        return [a for a in APIS if a in present] + [a for a in present if a not in APIS]

    def releases(self, column: str) -> list[str]:
        return sorted(self.df[column].unique(), key=sort_key)


def find_run(run_dir: str | Path) -> Path:
    """``run_dir`` as given, or, when relative and not found from here (a notebook opened in notebooks/),
    under the runs folder or beside it: ``runs/latest`` and ``latest`` both name the newest run."""
    path = Path(run_dir)
    candidates = [path] if path.is_absolute() else [path, default_runs_dir().parent / path, default_runs_dir() / path]
    for candidate in candidates:
        if (candidate / RUN_MANIFEST).is_file():
            return candidate
    raise ValueError(
        f"no run folder at {run_dir} (looked in {', '.join(str(c) for c in candidates)}); "
        "runs/latest appears with the first `mxcompat run`"
    )


def load(run_dir: str | Path) -> RunData:
    pd.set_option("display.max_colwidth", None)  # errors and fingerprints are read whole, not cut at 50 chars
    data = RunData(find_run(run_dir))
    if data.df.empty:
        raise ValueError(f"run {run_dir} has no records: no reload step finished")
    return data


def show(fig, dpi: int = 110, vector: bool = False):
    """Display ``fig`` in the notebook and close it; works under any matplotlib backend
    (MPLBACKEND=Agg in the environment would otherwise leave the executed notebook without figures).

    ``vector``: as SVG with its text as text (a heatmap's hundreds of labels: half the time of drawing
    their glyphs into a PNG); else a PNG. The kit's figures set their margins themselves: no layout or
    bounding-box pass draws them twice."""
    import io

    from IPython.display import SVG, Image, display

    buf = io.BytesIO()
    if vector:
        with plt.rc_context({"svg.fonttype": "none"}):
            fig.savefig(buf, format="svg")
        display(SVG(data=buf.getvalue()))
    else:
        fig.savefig(buf, format="png", dpi=dpi)
        display(Image(data=buf.getvalue(), format="png"))
    plt.close(fig)


def headline(data: RunData):
    """The run in a few lines: exit code, distinct incompatibilities by direction, each with where it starts."""
    from IPython.display import Markdown

    code = reports.exit_code(data.manifest, data.split)
    req = data.manifest["request"]
    lines = [f"# Run {md_code(data.manifest['run_id'])}", ""] + reports.headline_lines(
        data.groups, code, data.manifest.get("skipped") or [], runtime_report.headline(data.manifest, data.records)
    )
    saved, loaded = md_text(", ".join(req["save"])), md_text(", ".join(req["load"]))
    lines += ["", f"Saved with {saved}; loaded with {loaded}."]
    return Markdown("\n".join(lines))


def signature_table(data: RunData) -> pd.DataFrame:
    """The incompatibilities: one row per (direction, signature), with what it touches and one verbatim example."""
    rows = [
        {
            "direction": g.direction,
            "signature": g.signature,
            "id": g.id,
            "starts": reports.starts(g),
            "saved with": signatures.span(g.saved_with),
            "loaded with": signatures.span(g.loaded_with),
            "models": ", ".join(g.models),
            "APIs": ", ".join(g.apis),
            "cells": len(g.cells),
            "fail the run": g.failing,
            "remedy": signatures.remedy_text(g),
            "example": g.example,
        }
        for g in data.groups
    ]
    columns = ["direction", "signature", "id", "starts", "saved with", "loaded with", "models", "APIs", "cells"]
    return pd.DataFrame(rows, columns=columns + ["fail the run", "remedy", "example"])


def remedies(data: RunData):
    """The verified remedies, each with what it changed and the code that does the same (Markdown)."""
    from IPython.display import Markdown

    lines = reports.remedy_lines(data.groups, level="###")
    return Markdown("\n".join(lines) if lines else "No failing cell has a verified remedy.")


def left(df: pd.DataFrame):
    """``df`` for reading: left-aligned text, no index column; its text and headings escaped for HTML."""
    styled = df.style.hide(axis="index").format(escape="html").format_index(escape="html", axis=1)
    return styled.set_properties(**{"text-align": "left", "vertical-align": "top"})


def _cell_html(value, link: bool) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return f"{value:.3g}"
    text = html.escape(str(value))
    return f'<a href="{text}">{text}</a>' if link and text else text


def linked_html(df: pd.DataFrame, links: tuple = ("notebook",)) -> str:
    """``df`` as an HTML table whose ``links`` columns are links (relative to the run folder, where
    summary.ipynb and summary.html live). Cells and headings are escaped here, as to_html is told not to."""
    shown = pd.DataFrame({c: [_cell_html(v, c in links) for v in df[c]] for c in df.columns}, columns=df.columns)
    shown.columns = [html.escape(str(c)) for c in df.columns]
    return shown.to_html(escape=False, index=False)


def collapsible(title: str, df: pd.DataFrame, links: tuple = ("notebook",)):
    """A table under a heading that opens and closes (``<details>``), in the notebook and in summary.html."""
    from IPython.display import HTML

    if df.empty:
        return HTML(f"<p><b>{html.escape(title)}</b>: none.</p>")
    return HTML(
        f"<details><summary><b>{html.escape(title)}</b> ({len(df)} rows)</summary>{linked_html(df, links)}</details>"
    )


def cell_tables(data: RunData) -> list:
    """The per-cell tables, each collapsible: the cells that fail the run, the forward cells, the rest that is
    not identical or close, the unsupported cells; notebooks as links."""
    failing = failing_table(data)
    fails = failing["direction"].isin(["backward", "same", "unknown", ONNX_DIRECTION]) & ~failing["allowed"]
    forward = failing["direction"] == "forward"
    return [
        collapsible("Cells that fail the run", failing[fails]),
        collapsible("Forward cells that are not identical or close (reported apart)", failing[forward]),
        collapsible("Allowed cells (known incompatibilities)", failing[failing["allowed"]]),
        collapsible("Unsupported cells, and why", unsupported_table(data)),
    ]


def counts_table(data: RunData) -> pd.DataFrame:
    """Cells by direction and verdict."""
    table = data.df.pivot_table(index="direction", columns="verdict", values="model", aggfunc="count", fill_value=0)
    return table[[v for v in SEVERITY if v in table.columns]]


def heatmaps(data: RunData):
    """Per API, saved release x loaded release coloured by the worst verdict over the models that both releases
    support, annotated with the largest max-abs error and how many models were checked; a cell whose failure a
    verified remedy fixes keeps its verdict's colour and is marked (:data:`REMEDY_MARK`, :data:`REMEDY_HATCH`)."""
    saved, loaded = data.releases("saved_with"), data.releases("loaded_with")
    runtimes = {e["name"]: e for e in data.manifest.get("runtimes") or []}
    failing = [n for n, e in runtimes.items() if e.get("verdict") in ("does not import", "remedy changes outputs")]
    loaded = sorted(set(loaded) | set(failing), key=sort_key)
    apis = data.apis()
    cmap = ListedColormap([VERDICT_COLOURS[v] for v in SEVERITY])
    ncols = 2 if len(apis) > 1 else 1
    nrows = math.ceil(len(apis) / ncols)
    side = max(3.2, 0.95 * max(len(saved), len(loaded)))
    fig, axes = plt.subplots(nrows, ncols, figsize=(side * ncols + 2.0, (side * 0.8 + 1.2) * nrows), squeeze=False)
    flat = list(axes.ravel())
    for ax in flat[len(apis) :]:
        ax.axis("off")
    by_cell = {key: group for key, group in data.df.groupby(["api", "saved_with", "loaded_with"], sort=False)}
    records_of: dict = {}
    for rec in data.records:
        records_of.setdefault((rec["api"], rec["saved_with"], rec["loaded_with"]), []).append(rec)
    for ax, api in zip(flat, apis):
        grid = np.full((len(saved), len(loaded)), np.nan)
        for i, s in enumerate(saved):
            for j, loader in enumerate(loaded):
                cell = by_cell.get((api, s, loader))
                if cell is None and loader in failing:  # the runtime itself fails: a column that says so
                    grid[i, j] = SEVERITY.index("load-error")
                    ax.text(
                        j,
                        i,
                        runtimes[loader]["verdict"].replace(" ", "\n", 1),
                        ha="center",
                        va="center",
                        fontsize=6.5,
                        color="white",
                    )
                    continue
                if cell is None:
                    continue
                checked = cell[cell["verdict"] != "unsupported"]
                verdict = worst(checked["verdict"]) if not checked.empty else "unsupported"
                grid[i, j] = SEVERITY.index(verdict)
                err = checked["max_abs"].dropna()
                # two lines a cell: a ten-release grid has hundreds, and drawing text is most of a figure's cost
                if verdict in ("load-error", "infer-error", "corrupt"):
                    label = f"{verdict}\n{int((checked['verdict'] == verdict).sum())} of {len(checked)}"
                else:
                    label = verdict if err.empty else f"{verdict}\n{err.max():.1e}"
                if not checked.empty:
                    label += f" ({len(checked)}/{len(cell)})"
                mark = remedy_mark(records_of.get((api, s, loader), []))
                if mark:
                    label = label.replace("\n", f" {mark}\n", 1) if "\n" in label else f"{label}\n{mark}"
                if mark == REMEDY_MARK:
                    ax.add_patch(
                        Rectangle(
                            (j - 0.5, i - 0.5),
                            1,
                            1,
                            fill=False,
                            hatch=REMEDY_HATCH,
                            linewidth=0,
                            alpha=0.35,
                            edgecolor=text_colour(verdict),
                        )
                    )
                ax.text(j, i, label, ha="center", va="center", fontsize=6.5, color=text_colour(verdict))
        ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=-0.5, vmax=len(SEVERITY) - 0.5, aspect="auto")
        ax.set_xticks(range(len(loaded)))
        ax.set_xticklabels([_loaded_label(n, runtimes) for n in loaded], rotation=45, ha="right", fontsize=7)
        ax.set_yticks(range(len(saved)))
        ax.set_yticklabels(saved, fontsize=7)
        ax.set_title(_panel_title(data, api), fontsize=9)
        ax.set_xlabel("exported by (then run outside MXNet)" if api in EXIT_APIS else "loaded with", fontsize=8)
        ax.set_ylabel("saved with", fontsize=8)
    handles = [Rectangle((0, 0), 1, 1, color=VERDICT_COLOURS[v]) for v in SEVERITY]
    handles.append(Rectangle((0, 0), 1, 1, facecolor="white", edgecolor="black", hatch=REMEDY_HATCH, linewidth=0.5))
    labels = list(SEVERITY) + [REMEDY_LEGEND]
    fig.legend(handles, labels, loc="center right", fontsize=7, frameon=False)
    width = fig.get_size_inches()[0]
    fig.suptitle(
        "worst verdict over the models checked, largest max-abs error (models checked / in the zoo)",
        fontsize=10 if width > 8 else 7,
        wrap=True,
        y=1 - 0.3 / fig.get_size_inches()[1],
    )
    longest = lambda names: max([len(line) for n in names for line in n.split("\n")] or [0])  # noqa: E731
    _fixed_margins(fig, nrows, ncols, longest(saved), longest(_loaded_label(n, runtimes) for n in loaded))
    return fig


def remedy_mark(records: list[dict]) -> str:
    """The mark of a heatmap cell (its models' records): :data:`REMEDY_MARK` when a verified remedy fixes every
    model behind its verdict, ``✓R 2/3`` when it fixes some, ``""`` when none (or the cell passes)."""
    checked = [r for r in records if r["verdict"] != UNSUPPORTED] or records  # the verdict the cell shows
    failing = [r for r in checked if r["verdict"] not in PASSING]
    fixed = sum(1 for r in failing if (r.get("remedy") or {}).get("fixed"))
    if not fixed:
        return ""
    return REMEDY_MARK if fixed == len(failing) else f"{REMEDY_MARK} {fixed}/{len(failing)}"


def _loaded_label(name: str, runtimes: dict) -> str:
    """A heatmap column's label: the release, or the runtime with how it imports (``remedy: numpy-names``)."""
    entry = runtimes.get(name)
    if entry is None:
        return name
    remedies = ", ".join(r["name"] for r in entry.get("remedies") or [])
    return f"{name}\n(remedy: {remedies})" if remedies else name


def _fixed_margins(fig, nrows: int, ncols: int, y_chars: int = 12, x_chars: int = 12) -> None:
    """The heatmaps' margins in inches (tick labels, axis labels, titles, the legend), set directly: laying
    out hundreds of cell labels with tight_layout costs a third of the figure's time. ``y_chars`` /
    ``x_chars``: the longest tick label's line on each axis (a runtime's name is long)."""
    width, height = fig.get_size_inches()
    y_in, x_in = 0.055 * y_chars + 0.55, 0.042 * x_chars + 0.55  # 7 pt text (and the axis label); x rotated 45°
    left, right, bottom, top = max(1.0, y_in), 1.75, max(1.1, x_in), 0.95  # y labels / legend / x labels / titles
    wspace_in, hspace_in = max(1.1, y_in + 0.1), max(1.35, x_in + 0.25)  # the next panel's y labels / x labels
    fig.subplots_adjust(
        left=left / width,
        right=1 - right / width,
        bottom=bottom / height,
        top=1 - top / height,
        wspace=wspace_in / max(0.1, (width - left - right - wspace_in * (ncols - 1)) / ncols),
        hspace=hspace_in / max(0.1, (height - bottom - top - hspace_in * (nrows - 1)) / nrows),
    )


def _panel_title(data: RunData, api: str) -> str:
    """A heatmap panel's title: the API; for an exit, the runtime its exports ran in."""
    if api not in EXIT_APIS:
        return api
    title = leaving.EXIT_TITLES[api]
    versions = sorted({str(r["runtime"]) for r in leaving.rows(data.records) if r["runtime"] and r["exit"] == title})
    return f"{api}: exported by MXNet, run in {', '.join(versions) or title}"


def output_errors(data: RunData) -> pd.DataFrame:
    """One row per compared output (every case of every record): its max abs error and where it came from."""
    rows = []
    for rec in data.records:
        for case, outs in (rec.get("cases") or {}).items():
            for m in outs:
                if "max_abs" in m and m["max_abs"] is not None and math.isfinite(m["max_abs"]):
                    rows.append(
                        {
                            "api": rec["api"],
                            "loaded_with": rec["loaded_with"],
                            "saved_with": rec["saved_with"],
                            "direction": rec["direction"],
                            "case": case,
                            "max_abs": max(m["max_abs"], ZERO_FLOOR),
                            "max_rel": m.get("max_rel"),
                        }
                    )
    return pd.DataFrame(rows, columns=["api", "loaded_with", "saved_with", "direction", "case", "max_abs", "max_rel"])


def error_distributions(data: RunData):
    """ECDFs of per-output max abs error on a log scale: by API, and by loaded release (backward cells)."""
    errs = output_errors(data)
    errs = errs[errs["direction"] != "forward"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
    for ax, column, title in ((axes[0], "api", "by API"), (axes[1], "loaded_with", "by loaded release")):
        groups = sorted(errs[column].unique(), key=sort_key) if column == "loaded_with" else data.apis()
        for g in groups:
            values = np.sort(errs.loc[errs[column] == g, "max_abs"].to_numpy())
            if values.size:
                ax.step(values, np.arange(1, values.size + 1) / values.size, where="post", label=str(g))
        ax.set_xscale("log")
        ax.set_xlim(ZERO_FLOOR / 2, max(1.0, errs["max_abs"].max() * 2) if not errs.empty else 1.0)
        ax.set_xlabel(f"max abs error per output (identical drawn at {ZERO_FLOOR:g})", fontsize=8)
        ax.set_ylabel("fraction of outputs", fontsize=8)
        ax.set_title(f"error distribution {title}", fontsize=9)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    fig.subplots_adjust(left=0.06, right=0.98, bottom=0.14, top=0.92, wspace=0.18)  # as tight_layout, at no cost
    return fig


def runtimes_table(data: RunData) -> pd.DataFrame:
    """The Runtimes section: one row per runtime the run named (:mod:`kit.results.runtime_report`)."""
    return runtime_report.table(data.manifest, data.records)


def runtime_disagreements(data: RunData):
    """Where a runtime and its release load the same artifact differently, with both verdicts and errors."""
    from IPython.display import Markdown

    lines = runtime_report.disagreement_lines(data.records, data.manifest)
    return Markdown("\n".join(lines) if lines else "Every artifact both loaded got the same verdict in each.")


def leaving_table(data: RunData) -> pd.DataFrame:
    """Leaving MXNet: per model and saving release, exports? runs? verdict, max abs, the blocking operator."""
    return leaving.table(data.records)


def failing_table(data: RunData) -> pd.DataFrame:
    """Every cell that shows an incompatibility (not identical or close; a same-release reload not identical),
    with its signature, its error and the executed notebook that produced it (relative to the run folder)."""
    columns = ["direction", "model", "api", "saved_with", "loaded_with", "verdict", "allowed", "signature_id"]
    df = data.df.loc[data.df["signature_id"].notna(), columns + ["max_abs", "reason"]].reset_index(drop=True)
    df["notebook"] = [reports.notebook_in_run({"loaded_with": r}) for r in df["loaded_with"]]
    return df


def migration_table(data: RunData, detail: bool = False) -> pd.DataFrame:
    """Migrating to MXNet 2.0: every 1.x artifact loaded in a 2.0 release, its verdicts and load path."""
    return migration.table(data.records, detail=detail)


def unsupported_table(data: RunData) -> pd.DataFrame:
    df = data.df[data.df["verdict"] == "unsupported"]
    return df.groupby(["model", "api", "reason"]).size().rename("cells").reset_index()


def skipped_table(data: RunData) -> pd.DataFrame:
    """What the run was asked for and did not check (``run.json``'s ``skipped``), with why."""
    return pd.DataFrame(data.manifest.get("skipped", []), columns=["kind", "name", "reason"])


def fingerprints_table(data: RunData) -> pd.DataFrame:
    """The environments side by side: one column per release, saving and loading alike."""
    seen = {}
    for rec in data.records:
        for fp in (rec.get("saved_fingerprint"), rec.get("loaded_fingerprint")):
            if fp and fp.get("release") and fp["release"] not in seen:
                seen[fp["release"]] = fp
    cols = {}
    for release in sorted(seen, key=sort_key):
        fp = seen[release]
        env = fp.get("kit_env") or {}
        cols[release] = {
            "mx.__version__": fp.get("mxnet"),
            "python": fp.get("python"),
            "numpy": fp.get("numpy"),
            "fallback": env.get("fallback"),
            "features": " ".join(fp.get("mxnet_features") or []) or "n/a (<1.5)",
            "cpu": (fp.get("cpu") or {}).get("model"),
            "cpu flags": " ".join((fp.get("cpu") or {}).get("flags") or []),
            "MXNET_/OMP_ variables": " ".join(f"{k}={v}" for k, v in sorted((fp.get("env") or {}).items())) or "-",
        }
    return pd.DataFrame(cols)
