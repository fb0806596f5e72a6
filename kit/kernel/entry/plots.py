"""matplotlib figures and pandas tables for the train, reload and investigate notebooks.

Every release environment has matplotlib (2.2.5 on Python 3.6 up to 3.9 on 3.11) and
pandas where it installs, so a user debugging a cell re-plots with the library they
know. Figures use the object-oriented API on an Agg canvas, not pyplot: no backend
is chosen for the user's own cells, and :func:`show` displays a PNG in any kernel.
"""

import io
import math

from kit.common.palette import colour
from kit.common.versions import sort_key

#: errors of exactly zero sit here on log axes
FLOOR = 1e-12


def figure(width=7.0, height=3.2):
    """A matplotlib Figure on an Agg canvas, outside pyplot's state."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def png(fig):
    """The figure as PNG bytes."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=fig.dpi)
    return buf.getvalue()


def show(fig):
    """Display ``fig`` in the notebook as a PNG and return it (to re-plot, change and show it again)."""
    from IPython.display import Image, display

    display(Image(data=png(fig), format="png"))
    return fig


def loss_curves(histories, title=""):
    """Training loss per batch, a line per model (``histories``: name -> list of losses)."""
    fig = figure()
    ax = fig.add_subplot(1, 1, 1)
    for name in sorted(histories):
        ax.plot(range(len(histories[name])), histories[name], label=name, linewidth=1.2)
    ax.set_xlabel("batch")
    ax.set_ylabel("cross-entropy")
    ax.set_title(title)
    if histories:
        ax.legend(loc="upper right", fontsize=8, ncol=2)
    else:
        ax.text(0.5, 0.5, "nothing trained", ha="center", va="center", transform=ax.transAxes)
    fig.subplots_adjust(left=0.1, right=0.98, bottom=0.15, top=0.9)  # tight_layout measures every label: slow
    return fig


def _floored(values):
    return [max(v, FLOOR) if v is not None else float("nan") for v in values]


def error_growth(rows, title="max abs error per node"):
    """Each node's max abs error against the saving release, in topological order, on a log axis.

    Nodes past tolerance are marked red; nodes with no comparable output are left out.
    """
    fig = figure()
    ax = fig.add_subplot(1, 1, 1)
    xs = [r["index"] for r in rows]
    ys = _floored([r.get("max_abs") for r in rows])
    ax.semilogy(xs, ys, color="#1f77b4", linewidth=1.2, marker=".", markersize=4)
    bad = [(x, y) for x, y, r in zip(xs, ys, rows) if r.get("ok") is False]
    if bad:
        ax.scatter([b[0] for b in bad], [b[1] for b in bad], color="#d62728", zorder=3, s=18, label="past tolerance")
        ax.legend(loc="upper left", fontsize=8)
    ax.set_xlabel("node (topological order)")
    ax.set_ylabel("max abs error")
    ax.set_title(title)
    fig.tight_layout()
    return fig


LAYER_METRICS = ("max_abs", "max_rel", "frac_out_of_tolerance")


def layer_heatmap(rows, metrics=LAYER_METRICS, title="error per layer"):
    """A heatmap, one row per metric and one column per node: log10 of each metric (floored at 1e-12)."""
    import numpy as np

    grid = np.array([[math.log10(max(r.get(m) or 0.0, FLOOR)) for r in rows] for m in metrics], dtype=float)
    fig = figure(height=1.2 + 0.45 * len(metrics))
    ax = fig.add_subplot(1, 1, 1)
    image = ax.imshow(
        grid if rows else np.zeros((len(metrics), 1)),
        aspect="auto",
        cmap="viridis",
        interpolation="nearest",
        vmin=math.log10(FLOOR),
        vmax=max(0.0, grid.max() if rows else 0.0),
    )
    ax.set_yticks(range(len(metrics)))
    ax.set_yticklabels(metrics)
    ax.set_xlabel("node (topological order)")
    ax.set_title(title)
    fig.colorbar(image, ax=ax, label="log10")
    fig.tight_layout()
    return fig


def worst_elements(elements, title="worst elements of the first node past tolerance"):
    """Saved against loaded value for the elements that moved most, joined by their difference."""
    fig = figure()
    ax = fig.add_subplot(1, 1, 1)
    xs = range(len(elements))
    ax.scatter(xs, [e["saved"] for e in elements], label="saved", color="#1f77b4", s=20)
    ax.scatter(xs, [e["loaded"] for e in elements], label="loaded", color="#d62728", s=20, marker="x")
    for x, e in zip(xs, elements):
        ax.plot([x, x], [e["saved"], e["loaded"]], color="#7f7f7f", linewidth=0.8)
    ax.set_xticks(list(xs))
    ax.set_xticklabels([str(e["index"]) for e in elements], rotation=60, fontsize=7)
    ax.set_xlabel("element (flat index)")
    ax.set_ylabel("value")
    ax.set_title(title)
    if elements:
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def reload_errors(rows, title="max abs error of every reloaded artifact"):
    """A dot per reloaded artifact: its max abs error by saving release, coloured by verdict."""
    fig = figure()
    ax = fig.add_subplot(1, 1, 1)
    releases = sorted(set(r["saved_with"] for r in rows), key=sort_key)
    place = dict((name, i) for i, name in enumerate(releases))
    shown = [r for r in rows if r.get("max_abs") is not None]
    for verdict in sorted(set(r["verdict"] for r in shown)):
        mine = [r for r in shown if r["verdict"] == verdict]
        ax.scatter(
            [place[r["saved_with"]] for r in mine],
            _floored([r["max_abs"] for r in mine]),
            label=verdict,
            color=colour(verdict),
            s=16,
        )
    ax.set_yscale("log")
    ax.set_ylim(FLOOR / 10, 10.0)
    _plain_log_labels(ax.yaxis)
    ax.set_xticks(range(len(releases)))
    ax.set_xticklabels(releases, rotation=30, fontsize=8)
    ax.set_xlabel("saved with")
    ax.set_ylabel("max abs error (0 drawn at 1e-12)")
    ax.set_title(title)
    if shown:
        ax.legend(fontsize=8, loc="upper left")
    fig.subplots_adjust(left=0.12, right=0.98, bottom=0.27, top=0.9)
    return fig


def _plain_log_labels(axis):
    """Label a log axis's decades as plain text (1e-06): mathtext labels take most of a small figure's drawing."""
    from matplotlib import ticker

    axis.set_major_formatter(ticker.FuncFormatter(lambda v, _: "%.0e" % v if v > 0 else ""))
    axis.set_minor_formatter(ticker.NullFormatter())


def table(rows, columns):
    """``rows`` (dicts) as a pandas DataFrame of ``columns``; a plain-text table where pandas is missing."""
    try:
        import pandas
    except ImportError:
        return TextTable(rows, columns)
    return pandas.DataFrame([[row.get(c) for c in columns] for row in rows], columns=list(columns))


class TextTable(object):
    """A fixed-width table for a kernel without pandas; its repr is the table."""

    def __init__(self, rows, columns):
        self.rows, self.columns = rows, list(columns)

    def __repr__(self):
        def cell(v):
            return "%.4g" % v if isinstance(v, float) else ("" if v is None else str(v))

        body = [[cell(row.get(c)) for c in self.columns] for row in self.rows]
        widths = [max([len(c)] + [len(b[i]) for b in body]) for i, c in enumerate(self.columns)]
        lines = ["  ".join(c.ljust(w) for c, w in zip(self.columns, widths))]
        lines += ["  ".join(v.ljust(w) for v, w in zip(b, widths)) for b in body]
        return "\n".join(lines)
