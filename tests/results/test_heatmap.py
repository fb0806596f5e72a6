"""The summary's heatmaps and the one verdict palette: a cell a verified remedy fixes keeps its verdict's colour
and is marked; one that nothing fixes is not."""

from __future__ import annotations

import json

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.colors import to_rgba

from kit.common import palette, verdicts
from kit.results import summary

REMEDIED = {"fixed": True, "name": "rnn_flat_params", "verdict": "close", "tried": [], "why_none": None}
UNREMEDIED = {"fixed": False, "name": None, "verdict": None, "tried": [], "why_none": "no known remedy"}


def _record(loaded: str, verdict: str, remedy: dict | None, model: str = "lstm") -> dict:
    return {
        "saved_with": "1.2.1",
        "model": model,
        "api": "save_parameters",
        "loaded_with": loaded,
        "direction": "backward",
        "verdict": verdict,
        "reason": f"Parameter '{model}.rnn_param' is missing in the file" if verdict == "load-error" else None,
        "error": None,
        "summary": {},
        "remedy": remedy,
    }


def _run(tmp_path, records: list[dict]):
    (tmp_path / "records").mkdir()
    for i, rec in enumerate(records):
        (tmp_path / "records" / f"{i}.json").write_text(json.dumps(rec))
    (tmp_path / "run.json").write_text(json.dumps({"request": {}, "steps": {}, "order": []}))
    return summary.load(tmp_path)


@pytest.fixture
def figure(tmp_path):
    data = _run(
        tmp_path,
        [
            _record("1.9.1", "load-error", REMEDIED),  # a verified remedy fixes it
            _record("2.0.0b1", "load-error", UNREMEDIED),  # nothing does
            _record("1.2.1", "identical", None),
        ],
    )
    fig = summary.heatmaps(data)
    yield fig
    plt.close(fig)


def _cell_texts(ax) -> dict:
    """``{(column, row): text}`` of the cell labels of a panel."""
    return {tuple(int(round(v)) for v in t.get_position()): t.get_text() for t in ax.texts}


def test_a_remedied_cell_is_marked_and_keeps_its_verdicts_colour(figure):
    ax = figure.axes[0]
    loaded = [t.get_text() for t in ax.get_xticklabels()]
    assert loaded == ["1.2.1", "1.9.1", "2.0.0b1"]
    texts = _cell_texts(ax)
    assert texts[(1, 0)].splitlines()[0] == f"load-error {summary.REMEDY_MARK}"
    assert summary.REMEDY_MARK not in texts[(2, 0)] and texts[(2, 0)].startswith("load-error")
    assert summary.REMEDY_MARK not in texts[(0, 0)]
    hatched = [p for p in ax.patches if p.get_hatch() == summary.REMEDY_HATCH]
    assert [(p.get_x(), p.get_y()) for p in hatched] == [(0.5, -0.5)]  # over the remedied cell only
    # both failing cells keep load-error's colour
    image = ax.images[0]
    rgba = image.cmap(image.norm(image.get_array()))
    red = to_rgba(palette.VERDICT_COLOURS["load-error"])
    assert np.allclose(rgba[0, 1], red) and np.allclose(rgba[0, 2], red)


def test_the_legend_names_the_mark(figure):
    legend = figure.legends[0]
    labels = [t.get_text() for t in legend.get_texts()]
    assert labels == list(verdicts.SEVERITY) + [summary.REMEDY_LEGEND]
    assert legend.legend_handles[-1].get_hatch() == summary.REMEDY_HATCH
    assert summary.REMEDY_MARK in summary.REMEDY_LEGEND


def test_remedy_mark_counts_the_models_behind_the_verdict():
    fixed, unfixed = _record("2.0.0b1", "load-error", REMEDIED), _record("2.0.0b1", "load-error", UNREMEDIED, "gru")
    unsupported = _record("2.0.0b1", "unsupported", UNREMEDIED, "mlp")
    assert summary.remedy_mark([fixed, unsupported]) == summary.REMEDY_MARK  # the unsupported model is not shown
    assert summary.remedy_mark([fixed, unfixed]) == f"{summary.REMEDY_MARK} 1/2"
    assert summary.remedy_mark([unfixed]) == ""
    assert summary.remedy_mark([_record("2.0.0b1", "unsupported", REMEDIED)]) == summary.REMEDY_MARK
    assert summary.remedy_mark([_record("2.0.0b1", "close", None)]) == ""


def test_every_verdict_has_one_colour():
    assert set(palette.VERDICT_COLOURS) == set(verdicts.SEVERITY)
    assert len(set(palette.VERDICT_COLOURS.values())) == len(verdicts.SEVERITY)  # no two verdicts look alike
    assert all(palette.colour(v) == palette.VERDICT_COLOURS[v] for v in verdicts.SEVERITY)
    assert palette.colour("saved") == palette.OTHER


def test_the_notebook_plots_draw_with_the_palette():
    from kit.kernel.entry import plots

    rows = [{"saved_with": "1.2.1", "verdict": v, "max_abs": 0.5} for v in ("close", "drift")]
    fig = plots.reload_errors(rows)
    colours = {c.get_label(): tuple(c.get_facecolor()[0]) for c in fig.axes[0].collections}
    assert colours == {v: to_rgba(palette.VERDICT_COLOURS[v]) for v in ("close", "drift")}
