import math
import struct

from kit.kernel.entry import plots

ROWS = [
    {"index": 0, "status": "identical", "ok": True, "max_abs": 0.0, "max_rel": 0.0, "frac_out_of_tolerance": 0.0},
    {"index": 1, "status": "close", "ok": True, "max_abs": 1e-6, "max_rel": 1e-5, "frac_out_of_tolerance": 0.0},
    {"index": 2, "status": "past tolerance", "ok": False, "max_abs": 0.5, "max_rel": 2.0, "frac_out_of_tolerance": 0.3},
]


def _png_size(data):
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_loss_curves_draw_each_model_with_its_values():
    fig = plots.loss_curves({"mlp": [3.0, 2.0, 1.0], "lenet": [1.0, 1.5]}, title="loss")
    ax = fig.axes[0]
    lines = dict((line.get_label(), list(line.get_ydata())) for line in ax.get_lines())
    assert lines == {"lenet": [1.0, 1.5], "mlp": [3.0, 2.0, 1.0]}
    assert ax.get_title() == "loss"
    assert _png_size(plots.png(fig)) == (700, 320)


def test_error_growth_is_log_scaled_and_marks_nodes_past_tolerance():
    fig = plots.error_growth(ROWS)
    ax = fig.axes[0]
    assert ax.get_yscale() == "log"
    ys = list(ax.get_lines()[0].get_ydata())
    assert ys == [plots.FLOOR, 1e-6, 0.5]  # an identical node sits on the floor, not at -inf
    marked = ax.collections[0].get_offsets()
    assert [list(p) for p in marked] == [[2.0, 0.5]]


def test_layer_heatmap_holds_log10_of_every_metric():
    fig = plots.layer_heatmap(ROWS)
    grid = fig.axes[0].get_images()[0].get_array()
    assert grid.shape == (3, 3)
    assert abs(grid[0][2] - math.log10(0.5)) < 1e-12 and grid[0][0] == math.log10(plots.FLOOR)
    assert abs(grid[2][2] - math.log10(0.3)) < 1e-12
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == list(plots.LAYER_METRICS)


def test_worst_elements_plots_saved_and_loaded_values():
    elements = [{"index": 7, "saved": 1.0, "loaded": 1.5, "abs_diff": 0.5}]
    ax = plots.worst_elements(elements).axes[0]
    saved, loaded = (list(c.get_offsets()[0]) for c in ax.collections)
    assert saved == [0.0, 1.0] and loaded == [0.0, 1.5]


def test_reload_errors_places_each_artifact_under_its_saving_release():
    rows = [
        {"saved_with": "1.9.1", "verdict": "identical", "max_abs": 0.0},
        {"saved_with": "1.0.0.post4", "verdict": "drift", "max_abs": 0.01},
        {"saved_with": "1.2.1", "verdict": "load-error", "max_abs": None},
    ]
    ax = plots.reload_errors(rows).axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1.0.0.post4", "1.2.1", "1.9.1"]
    by_label = dict((c.get_label(), [list(p) for p in c.get_offsets()]) for c in ax.collections)
    assert by_label == {"drift": [[0.0, 0.01]], "identical": [[2.0, plots.FLOOR]]}


def test_table_keeps_columns_in_order_with_their_values():
    shown = plots.table([{"model": "mlp", "max_abs": 0.5, "extra": 1}], ["model", "max_abs"])
    try:
        import pandas  # noqa: F401
    except ImportError:
        assert repr(shown).splitlines() == ["model  max_abs", "mlp    0.5    "]
    else:
        assert list(shown.columns) == ["model", "max_abs"] and shown.values.tolist() == [["mlp", 0.5]]


def test_text_table_when_pandas_is_missing():
    text = repr(plots.TextTable([{"a": 1.23456789, "b": None}], ["a", "b"]))
    assert text.splitlines() == ["a      b", "1.235   "]
