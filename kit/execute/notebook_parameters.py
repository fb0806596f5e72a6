"""The papermill parameters of each notebook the kit runs, built in one place.

One builder per notebook in ``notebooks/``: its keyword arguments are the names of that notebook's
``parameters`` cell (an unknown name is a TypeError) and it sets every one of them, so an executed notebook
and ``run.json`` show what each step was given. tests/execute/test_notebook_parameters.py holds each builder to
its notebook's cell as papermill reads it, names and defaults.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

#: the parameters of a step that are paths on the machine that planned it, and the place each becomes on a
#: machine that runs the step apart (kit.execute.remote_step): the store's working copy or the step's run folder
PATH_PARAMETERS = {"train": {"store": "store"}, "reload": {"store": "store", "run_dir": "run"}}


def train(
    *,
    release: str,
    store: str | os.PathLike,
    models: Iterable[str] = (),
    apis: Iterable[str] = (),
    seed: int = 0,
    epochs: int | None = None,
    retrain: bool = False,
    cells: Iterable[str] = (),
    saved_by: str | None = None,
) -> dict:
    """train.ipynb's: train ``models`` (empty: the core zoo) in ``release`` and save them with ``apis`` (empty:
    every API) into ``store``; ``epochs`` None keeps each model's own; ``saved_by``, the run step the manifests
    name (the kit keeps the executed notebook beside what it saved)."""
    return {
        "release": release,
        "models": list(models),
        "apis": list(apis),
        "store": str(store),
        "seed": seed,
        "epochs": epochs or 0,
        "retrain": retrain,
        "cells": list(cells),
        "saved_by": saved_by or "",
    }


def reload(
    *,
    release: str,
    store: str | os.PathLike,
    run_dir: str | os.PathLike,
    saved_with: Iterable[str] = (),
    models: Iterable[str] = (),
    apis: Iterable[str] = (),
    tolerance: dict | None = None,
    forward: bool = False,
    versions: str = "current",
    skip_recorded: bool = False,
    cells: Iterable[str] = (),
    exit_runtimes: dict | None = None,
) -> dict:
    """reload.ipynb's: check in ``release`` what ``saved_with`` (empty: every release) saved in ``store``, one
    record per cell into ``run_dir``; ``exit_runtimes``, ``{exit: Python}``, the Python of each exit's runtime
    environment for its cells (``{"onnx": ONNX Runtime's}``)."""
    return {
        "release": release,
        "store": str(store),
        "saved_with": list(saved_with),
        "models": list(models),
        "apis": list(apis),
        "run_dir": str(run_dir),
        "tolerance": dict(tolerance or {}),
        "forward": forward,
        "versions": versions,
        "skip_recorded": skip_recorded,
        "cells": list(cells),
        "exit_runtimes": {api: str(python) for api, python in (exit_runtimes or {}).items()},
    }


def investigate(
    *,
    release: str,
    store: str | os.PathLike,
    model: str,
    api: str,
    saved_with: str,
    tolerance: dict | None = None,
    reference: str | os.PathLike | None = None,
    record: str | os.PathLike | None = None,
    out_json: str | os.PathLike | None = None,
    exit_runtimes: dict | None = None,
    exports: str | os.PathLike | None = None,
) -> dict:
    """investigate.ipynb's: compare layer by layer the artifact (``saved_with``, ``model``, ``api``) of ``store``
    as ``release`` computes it; ``reference``, internals computed on demand (None: those recorded at train
    time); ``record``, the cell's record in the run; ``out_json``, where the investigation goes as JSON;
    ``exit_runtimes``, ``{exit: Python}`` for an exit's cell (its exported file runs there), ``exports``, where
    its files go."""
    return {
        "release": release,
        "store": str(store),
        "model": model,
        "api": api,
        "saved_with": saved_with,
        "tolerance": dict(tolerance or {}),
        "reference": str(reference or ""),
        "record": str(record or ""),
        "out_json": str(out_json or ""),
        "exit_runtimes": {api: str(python) for api, python in (exit_runtimes or {}).items()},
        "exports": str(exports or ""),
    }


def summary(*, run_dir: str | os.PathLike) -> dict:
    """summary.ipynb's: the run folder to summarize."""
    return {"run_dir": str(run_dir)}


BUILDERS = {"train": train, "reload": reload, "investigate": investigate, "summary": summary}
