"""The README's glossary names what the CLI, the notebooks' parameter cells and the records call things."""

from __future__ import annotations

import re
from pathlib import Path

import click
import nbformat

from kit.cli import main
from kit.common.record_schema import new_record

REPO = Path(__file__).resolve().parent.parent
DEPRECATED = {"mxnet_version", "saved_versions", "saved_version", "out_dir", "overwrite", "reference_version"}


def glossary() -> dict[str, str]:
    """name column -> where column, from the README's glossary table."""
    text = (REPO / "README.md").read_text()
    table = text.split("### Glossary", 1)[1].split("\n\n", 2)[1]
    rows = [line.split("|")[1:-1] for line in table.splitlines()[2:]]
    return {name.strip(): where.strip() for name, _, where in rows}


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
    for concept in ("release", "saved_with / loaded_with", "model_version / param_version", "store", "run_dir"):
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
    shown = {
        o
        for cmd, opts in cli_options().items()
        for o in opts
        if not o.startswith("--reference-version")  # check-model's documented alias of --saved-with
    }
    assert not {o for o in shown if o.lstrip("-").replace("-", "_") in DEPRECATED}


def test_the_readmes_own_links_open_in_a_clone():
    """Every relative link and image of the README names a file the repository holds."""
    text = (REPO / "README.md").read_text()
    targets = re.findall(r"\]\(([^)#\s]+)\)", text)
    assert "docs/architecture.md" in targets and "docs/lab-launcher.png" in targets
    missing = [t for t in targets if "://" not in t and not (REPO / t).exists()]
    assert not missing, missing
    assert "../shared" not in text
