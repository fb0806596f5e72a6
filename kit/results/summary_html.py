"""The executed summary notebook as ``summary.html``: nbconvert's HTML without the code, its import and templates
made ready in a thread while a run's steps go (:func:`prepare_html`)."""

from __future__ import annotations

import threading
from pathlib import Path

from kit.common.artifacts import write_atomic

_HTML: dict = {"exporter": None, "thread": None}


def _html_exporter():
    from nbconvert import HTMLExporter

    return HTMLExporter(exclude_input=True, exclude_input_prompt=True, exclude_output_prompt=True)


def prepare_html() -> None:
    """Import nbconvert and compile its templates in a thread, so that :func:`write_html` after the summary step
    does not (about a second of a short run's wall). A failure here only means write_html does it itself."""

    def warm():
        import nbformat

        exporter = _html_exporter()
        exporter.from_notebook_node(nbformat.v4.new_notebook())
        _HTML["exporter"] = exporter

    def guarded():
        try:
            warm()
        except Exception:  # noqa: BLE001 - write_html makes its own exporter and says what fails there
            pass

    if _HTML["thread"] is None:
        _HTML["thread"] = threading.Thread(target=guarded, name="mxcompat-html", daemon=True)
        _HTML["thread"].start()


def write_html(notebook: Path, html: Path) -> None:
    """The executed summary notebook as HTML without its code (``summary.ipynb`` keeps the code)."""
    import nbformat

    if _HTML["thread"] is not None:
        _HTML["thread"].join()
    exporter = _HTML["exporter"] or _html_exporter()
    body, _ = exporter.from_notebook_node(nbformat.read(notebook, as_version=4))
    write_atomic(html, lambda f: f.write(body))
