from kit.common import render


def test_html_table_escapes_and_tints():
    html = render.html_table(
        [{"model": "<mlp>", "status": "failed", "acc": 0.123456}], ["model", "status", "acc"], colour_by="status"
    )
    assert "&lt;mlp&gt;" in html and "<mlp>" not in html
    assert "#f8d0d0" in html and "0.1235" in html


def test_svg_lines_draws_one_polyline_per_series():
    svg = render.svg_lines({"a": [3.0, 2.0, 1.0], "b": [1.0, 1.5]}, title="loss")
    assert svg.startswith("<svg") and svg.count("<polyline") == 2 and ">loss<" in svg
    assert "no data" in render.svg_lines({}, title="empty")
