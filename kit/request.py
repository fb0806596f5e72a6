"""What a run is asked to do, and the checks that refuse a bad request before any work starts."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kit import kernelspecs
from kit.common import tolerance as tolerance_mod
from kit.common.capabilities import APIS, CORE_MODELS, MODEL_GROUPS, MODEL_NAMES, expand_models
from kit.common.errors import KitError, UsageError
from kit.envs import EnvManager
from kit.records import load_allow_list


@dataclass
class RunRequest:
    """What a run was asked to do; stored in the run manifest so ``--resume`` can redo it."""

    save: list[str]
    load: list[str]
    models: list[str] = field(default_factory=list)
    apis: list[str] = field(default_factory=list)
    forward: bool = False
    tolerance: dict = field(default_factory=dict)
    retrain: bool = False
    allow_list: str | None = None
    store: str | None = None
    foreign: bool = False  # the model is a checkpoint the kit did not train (mxcompat check-model)

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def cells(self) -> tuple[list[str], list[str]]:
        """The models and APIs the run covers (what an empty list means: every core model, every API)."""
        return self.models or list(CORE_MODELS), self.apis or list(APIS)


def validate(req: RunRequest, manager: EnvManager, local_envs: bool = True) -> None:
    """Refuse bad arguments before any work starts: releases, environments, models, APIs, tolerance.

    ``local_envs=False`` (steps run on workers, which build their own environments) skips
    the checks of this machine's environments and kernels.
    """
    if not req.save:
        raise UsageError("--save needs at least one release")
    if not req.load:
        raise UsageError("--load needs at least one release")
    releases = list(dict.fromkeys(req.save + req.load))
    for name in releases:
        manager.resolve(name)  # unknown release: error listing the known ones
    if local_envs:
        _check_environments(releases, manager)
    if not req.foreign:
        models, unknown = expand_models(req.models)
        if unknown:
            raise UsageError(
                f"unknown model(s): {', '.join(unknown)}",
                hint=f"known: {', '.join(MODEL_NAMES)}; groups: {', '.join(MODEL_GROUPS)}",
            )
        req.models = models
        unknown = [x for x in req.apis if x not in APIS]
        if unknown:
            raise UsageError(f"unknown API(s): {', '.join(unknown)}", hint="known: " + ", ".join(APIS))
    try:
        tolerance_mod.validate(req.tolerance)
    except tolerance_mod.ToleranceError as e:
        raise UsageError(f"bad --tolerance: {e}") from None
    load_allow_list(req.allow_list)


def _check_environments(releases: list[str], manager: EnvManager) -> None:
    """Every release has a ready environment with its kernel registered on this machine."""
    missing = []
    for name in releases:
        try:
            env = manager.get(name)
        except KitError:
            missing.append(name)
            continue
        if env.state != "ready":
            missing.append(name)
    if missing:
        raise UsageError(
            f"no ready environment for {', '.join(missing)}",
            hint=f"create them first: mxcompat env create {' '.join(missing)}",
        )
    unregistered = [n for n in releases if kernelspecs.read_kernelspec(manager.home, f"mxnet-{n}") is None]
    if unregistered:
        raise UsageError(
            f"kernel {', '.join('mxnet-' + n for n in unregistered)} is not registered",
            hint=f"register it again: mxcompat env create --force {' '.join(unregistered)}",
        )


def check_writable(store: Path) -> None:
    """Refuse a store that cannot be written before any work starts."""
    try:
        store.mkdir(parents=True, exist_ok=True)
        probe = store / f".write-test-{os.getpid()}"
        probe.write_text("ok")
        probe.unlink()
    except OSError as e:
        raise UsageError(
            f"the store {store} cannot be written: {e.strerror or e}",
            hint="pick another --store, or fix its permissions",
        ) from None


def parse_tolerance(text: str | None) -> dict:
    """``--tolerance``: JSON text or the path of a JSON/YAML file."""
    if not text:
        return {}
    import yaml

    path = Path(text)
    try:
        data = yaml.safe_load(path.read_text()) if path.is_file() else json.loads(text)
    except (ValueError, yaml.YAMLError) as e:
        raise UsageError(f"--tolerance is neither a readable file nor JSON: {e}") from None
    try:
        return tolerance_mod.validate(data)
    except tolerance_mod.ToleranceError as e:
        raise UsageError(f"bad --tolerance: {e}") from None
