"""The glossary (docs/glossary.md) names what the CLI, the notebooks' parameter cells and the records call things."""

from __future__ import annotations

import re
from pathlib import Path

import click
import nbformat

from kit.cli import main
from kit.common.record_schema import new_record

REPO = Path(__file__).resolve().parents[2]
GLOSSARY = REPO / "docs" / "glossary.md"
DEPRECATED = {"mxnet_version", "saved_versions", "saved_version", "out_dir", "overwrite", "reference_version"}


def split_row(line: str) -> list[str]:
    """A Markdown table row's cells: pipes inside backticks or escaped as \\| do not split."""
    cells, cell, code = [], "", False
    text = line.strip()
    text = text[1:] if text.startswith("|") else text
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text) and text[i + 1] == "|":
            cell += "|"
            i += 2
            continue
        if ch == "`":
            code = not code
        if ch == "|" and not code:
            cells.append(cell.strip())
            cell = ""
        else:
            cell += ch
        i += 1
    if cell.strip():
        cells.append(cell.strip())
    return cells


def glossary() -> dict[str, str]:
    """name column -> where column, from the table in docs/glossary.md whose header is name | means | where."""
    lines = GLOSSARY.read_text(encoding="utf-8").splitlines()
    for start, line in enumerate(lines):
        if line.lstrip().startswith("|") and [c.lower() for c in split_row(line)] == ["name", "means", "where"]:
            break
    else:
        raise AssertionError(f"{GLOSSARY}: no table with the header | name | means | where |")
    assert set(lines[start + 1].replace("|", "").strip()) <= set("-: "), "the header is not followed by |---|"
    rows = {}
    for line in lines[start + 2 :]:
        if not line.lstrip().startswith("|"):
            break
        cells = split_row(line)
        assert len(cells) == 3, f"a glossary row without 3 cells: {line}"
        name, _, where = cells
        assert name not in rows, f"{name} is in the glossary twice"
        rows[name] = where
    return rows


def notebook_parameters() -> dict[str, set[str]]:
    out = {}
    for path in sorted((REPO / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
        out[path.stem] = set(re.findall(r"^(\w+)\s*[:=]", cell.source, re.M))
    return out


def cli_options() -> dict[str, set[str]]:
    """command path -> its option flags (hidden aliases included)."""
    out = {}

    def walk(cmd: click.Command, path: str) -> None:
        out[path] = {o for p in cmd.params if isinstance(p, click.Option) for o in p.opts}
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, f"{path} {name}".strip())

    walk(main, "")
    return out


def test_the_glossary_has_the_concepts():
    names = glossary()
    for concept in (
        "release",
        "saved_with / loaded_with",
        "model_version / param_version",
        "store",
        "run_dir",
        "cell",
        "remedy",
        "signature",
    ):
        assert concept in names, names


def test_every_notebook_parameter_the_glossary_names_exists():
    params = set().union(*notebook_parameters().values())
    named = {p for where in glossary().values() for p in re.findall(r"notebook parameter `(\w+)`", where)}
    assert named >= {"release", "saved_with", "store", "run_dir", "retrain"}
    assert named <= params, named - params


def test_every_flag_the_glossary_names_exists():
    flags = set().union(*cli_options().values())
    named = {f for where in glossary().values() for f in re.findall(r"`(--[a-z-]+)", where)}
    assert {"--save", "--load", "--store", "--retrain", "--saved-with", "--cell"} <= named
    assert named <= flags, named - flags


def test_every_record_field_the_glossary_names_is_in_the_schema():
    fields = set(new_record("1.4.1", "mlp", "export", "1.9.1", "x"))
    for name in ("saved_with", "loaded_with", "model_version", "param_version", "load_path", "load_attempts"):
        assert name in fields
    named = {f for where in glossary().values() for f in re.findall(r"record fields? `(\w+)`", where)}
    assert named and named <= fields, named - fields


def test_no_old_name_is_a_parameter_or_a_shown_flag():
    for notebook, params in notebook_parameters().items():
        assert not params & DEPRECATED, (notebook, params & DEPRECATED)
        assert not [p for p in params if p.endswith("version")], notebook
    shown = {o for cmd, opts in cli_options().items() for o in opts}
    assert not {o for o in shown if o.lstrip("-").replace("-", "_") in DEPRECATED}


def test_the_glossary_table_parses_rows_as_markdown_does():
    assert split_row("| cell | one `a|b` pick | `--cells M:A` \\| notebook parameter `cells` |") == [
        "cell",
        "one `a|b` pick",
        "`--cells M:A` | notebook parameter `cells`",
    ]
    assert split_row("|a||c|") == ["a", "", "c"]
    names = glossary()
    assert len(names) >= 14 and all(names.values()), names
