"""What a run is asked to do, and the checks that refuse a bad request before any work starts."""

from __future__ import annotations

import errno
import json
import os
import shutil
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from kit.common import cell_selection
from kit.common import tolerance as tolerance_mod
from kit.common.capabilities import (
    APIS,
    C_PREDICT_API,
    CORE_MODELS,
    EXIT_RUNTIMES,
    MODEL_GROUPS,
    MODEL_NAMES,
    ONNX_SOURCES,
    expand_models,
    split_pin,
)
from kit.common.errors import KitError, UsageError
from kit.common.versions import sort_key
from kit.envs import kernelspecs, onnx_path, runtime_remedies
from kit.envs.limits import Limits
from kit.envs.manager import EnvManager
from kit.results.records import load_allow_list


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
    reload_only: bool = False  # no --save: the saving releases are those the store holds; nothing trains
    versions: str = "current"  # "all": also reload every replaced weights version kept in the store
    cells: list[str] = field(default_factory=list)  # MODEL:API patterns (--cells); validate() makes them pairs
    epochs: int = 0  # training epochs of every model that trains; 0: each model's own
    limits: dict = field(default_factory=dict)  # step_timeout, cell_timeout, kernel_memory (kit.envs.limits)
    strict_runtimes: bool = False  # runtime cells (and runtimes that do not import) decide the exit code
    exits: list[str] = field(default_factory=list)  # the exits --load names (onnx, openvino, torch); normalized()

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def scope(self) -> tuple[list[str], list[str]]:
        """The models and APIs the run covers (what an empty list means: every core model, every API);
        a pinned model keeps its pin (``MODEL@ARCH``), which the kernels apply. ``cells`` narrows it."""
        return self.models or list(CORE_MODELS), self.apis or list(APIS)

    @property
    def stored_scope(self) -> tuple[list[str], list[str]]:
        """:attr:`scope` as the store names it (no pins)."""
        models, apis = self.scope
        return list(dict.fromkeys(split_pin(m)[0] for m in models)), apis

    def saved_cells(self) -> list[tuple[str, str]]:
        """The (model, API) artifacts the run's checks read, as the store names them."""
        models, apis = self.stored_scope
        if not self.cells:
            return [(m, a) for m in models for a in apis]
        return cell_selection.saved_for([(split_pin(m)[0], a) for m, a in _pairs(self.cells)])

    def held_releases(self, cells: set[tuple[str, str, str]]) -> set[str]:
        """The saving releases whose artifacts the store's ``cells`` ((release, model, api) triples) all hold."""
        if self.reload_only:
            return set(self.save)
        wanted = self.saved_cells()
        return {r for r in self.save if all((r, m, a) in cells for m, a in wanted)}

    def normalized(self) -> RunRequest:
        """This request in canonical form, as a new one (this one is left as it is): an exit (``onnx``,
        ``openvino``, ``torch``) as its default exporter's release and in :attr:`exits`, model groups expanded
        (every core model when none is named), ``--cells`` made the exact (model, API) pairs they match, the
        limits filled in. What it cannot resolve is a UsageError here:
        an unknown model or API, a ``--cells`` pattern that matches nothing, a bad limit. :func:`validate`
        checks the rest."""
        load = list(dict.fromkeys(onnx_path.target(n) for n in self.load))  # onnx: the default exporter's
        exits = list(dict.fromkeys(self.exits + [e for e in map(onnx_path.exit_of, self.load) if e]))
        models, apis, cells = self.models, self.apis, self.cells
        if self.reload_only:  # groups stand for their models; other names may be checkpoints in the store
            expanded = []
            for name in models:
                group, unknown = expand_models([name])
                expanded += [name] if unknown else group
            models = list(dict.fromkeys(expanded))
        elif not self.foreign:
            models, unknown = expand_models(models)
            if unknown:
                raise UsageError(
                    f"unknown model(s): {', '.join(unknown)}",
                    hint=f"known: {', '.join(MODEL_NAMES)}; groups: {', '.join(MODEL_GROUPS)}",
                )
            unknown = [x for x in apis if x not in APIS]
            if unknown:
                raise UsageError(f"unknown API(s): {', '.join(unknown)}", hint="known: " + ", ".join(APIS))
            if cells:
                cells, models, apis = _cell_pairs(cells, models, apis)
        limits = Limits.from_dict(self.limits).to_dict()  # a bad value: a usage error here, not in a step
        return replace(
            self, load=load, models=list(models), apis=list(apis), cells=list(cells), limits=limits, exits=exits
        )

    def with_stored_releases(self, cells: set[tuple[str, str, str]], store_location: str) -> RunRequest:
        """A reload-only request whose saving releases are every release the store holds artifacts of (of its
        models and APIs, when it names them), as a new request."""
        named = {split_pin(m)[0] for m in self.models}
        found = {
            r
            for r, m, a in cells
            if (not named or m in named)
            and (not self.apis or a in self.apis)
            and cell_selection.matches(self.cells, m, a)
        }
        if not found:
            raise UsageError(
                f"the store {store_location} holds no artifacts"
                + (" of the models and APIs asked for" if self.models or self.apis or self.cells else ""),
                hint="train some first: mxcompat run --save RELEASES (or pull a store: mxcompat store pull)",
            )
        return replace(self, save=sorted(found, key=sort_key))

    def needs_training(self, release: str, held: set[str]) -> bool:
        """Whether ``release`` must train: asked to retrain, or its artifacts are not all in the store."""
        return not self.reload_only and (self.retrain or release not in held)


def validate(req: RunRequest, manager: EnvManager, local_envs: bool = True, held: set[str] = frozenset()) -> None:
    """Refuse a bad request before any work starts: releases, environments, ``--cells``, tolerance, allow-list.
    ``req`` is checked, never changed: give it as :meth:`RunRequest.normalized` made it (which refuses the models,
    APIs and cells it cannot resolve).

    ``local_envs=False`` (steps run on workers, which build their own environments) skips
    the checks of this machine's environments and kernels; ``held`` are the saving releases
    whose artifacts the store already holds (they need no environment).
    """
    if not req.save and not req.reload_only:
        raise UsageError("--save needs at least one release")
    if not req.load:
        raise UsageError("--load needs at least one release")
    if req.apis and any(onnx_path.exporter_of(n) for n in req.load) and not set(req.apis) & set(ONNX_SOURCES):
        raise UsageError(
            "--load onnx exports graphs, and --apis names no API that saves one",
            hint="add export or module_checkpoint to --apis",
        )
    for name in dict.fromkeys(req.save + req.load):
        manager.resolve(name)  # unknown release: error listing the known ones
    if local_envs:
        check_environments(req, manager, held)
    _parse_cells(req.cells)
    try:
        tolerance_mod.validate(req.tolerance)
    except tolerance_mod.ToleranceError as e:
        raise UsageError(f"bad --tolerance: {e}") from None
    load_allow_list(req.allow_list)


def _parse_cells(patterns: list[str]) -> list[tuple[str, str]]:
    try:
        return cell_selection.parse(patterns)
    except cell_selection.CellPatternError as e:
        raise UsageError(f"bad --cells: {e}") from None


def _pairs(cells: list[str]) -> list[tuple[str, str]]:
    return [tuple(c.split(":", 1)) for c in cells]


def _cell_pairs(cells: list[str], models: list[str], apis: list[str]) -> tuple[list[str], list[str], list[str]]:
    """``(cells, models, apis)``: ``--cells`` patterns made the exact (model, API) pairs they match, within
    ``models`` and ``apis`` when those are given (any zoo model and API when not), and the models and APIs of
    those pairs; a pattern that matches nothing is an error."""
    _parse_cells(cells)
    within_models = models or list(MODEL_NAMES)
    within_apis = apis or list(APIS) + [C_PREDICT_API]
    pairs, unmatched = cell_selection.expand(cells, within_models, within_apis)
    if unmatched:
        raise UsageError(
            f"--cells {', '.join(unmatched)} match(es) no cell" + (" within --models/--apis" if models or apis else ""),
            hint=f"models: {', '.join(within_models)}; APIs: {', '.join(within_apis)}",
        )
    return (
        [f"{m}:{a}" for m, a in pairs],
        list(dict.fromkeys(m for m, _ in pairs)),
        list(dict.fromkeys(a for _, a in cell_selection.saved_for(pairs))),
    )


def check_environments(req: RunRequest, manager: EnvManager, held: set[str] = frozenset()) -> None:
    """Every release that runs a step here has a ready environment with its kernel registered: the loading
    releases, and the saving releases that must train (their artifacts are not all in the store)."""
    runtime = [EXIT_RUNTIMES[e] for e in req.exits] if any(onnx_path.exporter_of(r) for r in req.load) else []
    missing = [r for r in dict.fromkeys(req.load + runtime) if not _ready(manager, r) and not _settled(manager, r)]
    if missing:
        raise UsageError(
            f"no ready environment for {', '.join(missing)}",
            hint=f"create them first: mxcompat env create {' '.join(missing)}",
        )
    untrained = [
        r for r in req.save if req.needs_training(r, held) and not _ready(manager, r) and not _settled(manager, r)
    ]
    if untrained:
        names = " ".join(untrained)
        raise UsageError(
            f"{', '.join(untrained)} must train ("
            + ("--retrain" if req.retrain else "the store lacks some of their artifacts")
            + ") and there is no ready environment for it",
            hint=f"either create the environment (mxcompat env create {names}) or fill the store with their "
            f"artifacts (mxcompat store pull s3://bucket/prefix --release R, or a --store that holds them)",
        )
    releases = list(dict.fromkeys(req.load + [r for r in req.save if req.needs_training(r, held)]))
    releases = [r for r in releases if not _settled(manager, r)]
    unregistered = [
        n for n in releases if kernelspecs.read_kernelspec(manager.home, kernelspecs.kernel_name(n)) is None
    ]
    if unregistered:
        raise UsageError(
            f"kernel {', '.join(kernelspecs.kernel_name(n) for n in unregistered)} is not registered",
            hint=f"register it again: mxcompat env create --force {' '.join(unregistered)}",
        )


def _settled(manager: EnvManager, name: str) -> bool:
    """A runtime built and found failing (does not import, or its remedy changes outputs): an environment-level
    verdict the run reports, not a missing environment."""
    return _state(manager, name) in runtime_remedies.FAILING


def _ready(manager: EnvManager, name: str) -> bool:
    return _state(manager, name) == "ready"


def _state(manager: EnvManager, name: str) -> str | None:
    try:
        return manager.state_of(name)
    except KitError:  # a name no environment can have
        return None


#: below this much free space in the store's filesystem a run says so before any work
LOW_SPACE = 64 * 2**20
STORE_HINTS = {
    "ENOSPC": "free space on that filesystem, or pick another --store",
    "EROFS": "the filesystem is mounted read-only: pick another --store",
    "EACCES": "pick another --store, or give this user write permission on it",
}


def check_writable(store: Path) -> None:
    """Refuse a store that cannot be written before any work starts."""
    try:
        store.mkdir(parents=True, exist_ok=True)
        probe = store / f".write-test-{os.getpid()}"
        probe.write_text("ok")
        probe.unlink()
    except OSError as e:
        name = errno.errorcode.get(e.errno or 0, "")
        raise UsageError(
            f"the store {store} cannot be written: {e.strerror or e}" + (f" ({name})" if name else ""),
            hint=STORE_HINTS.get(name, "pick another --store, or fix its permissions"),
        ) from None


def store_space_warning(store: Path) -> str | None:
    """A warning when the store's filesystem is nearly full (training would end in ENOSPC), else None."""
    try:
        free = shutil.disk_usage(store).free
    except OSError:
        return None
    if free >= LOW_SPACE:
        return None
    return (
        f"warning: the store {store} has {free / 2**20:.1f} MiB free (ENOSPC likely): a core model's artifacts "
        "take about 1 MiB per release, a vision model's about 120 MiB"
    )


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
    return data or {}  # checked with the rest of the request (validate)
