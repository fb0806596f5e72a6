"""A run's steps and their order: train per saving release, reload per loading release, then the summary."""

from __future__ import annotations

from pathlib import Path

from kit.common.capabilities import ONNX_API
from kit.common.errors import KitError, UsageError
from kit.common.versions import direction, is_runtime
from kit.envs import kernelspecs, onnx_path, runtime_remedies, runtimes
from kit.envs.manager import EnvManager
from kit.execute import notebook_parameters
from kit.execute.notebooks import NOTEBOOKS
from kit.execute.progress import progress_path
from kit.execute.steps import Step
from kit.home import KitHome
from kit.orchestrate.request import RunRequest
from kit.results.runs import SUMMARY_NOTEBOOK, Run, executed_notebook


def release_step(
    kind: str, release: str, run: Run, parameters: dict, depends_on: list[str] = (), limits: dict | None = None
) -> Step:
    """The step that runs ``<kind>.ipynb`` on release ``release``'s kernel with ``parameters`` (the notebook's,
    from :mod:`kit.execute.notebook_parameters`)."""
    return Step(
        id=f"{kind}:{release}",
        kind=kind,
        release=release,
        notebook=str(NOTEBOOKS / f"{kind}.ipynb"),
        output=str(run.dir / executed_notebook(kind, release)),
        kernel=kernelspecs.kernel_name(release),
        parameters=parameters,
        depends_on=list(depends_on),
        progress=progress_path(run.dir, f"{kind}:{release}"),
        limits=dict(limits or {}),
    )


def _sources(req: RunRequest, release: str) -> list[str]:
    """The saving releases whose artifacts ``release`` loads: older or the same, newer too with --forward. An
    ONNX exporter exports its own release's and older graphs only: whether a newer graph loads in an older
    release is the forward matrix's question, and a newer exporter (--load onnx-RELEASE) answers for it."""
    exporter = onnx_path.exporter_of(release)
    if exporter:
        return [s for s in req.save if direction(s, exporter) != "forward"]
    return [s for s in req.save if req.forward or direction(s, release) != "forward"]


def runtime_entries(req: RunRequest, manager: EnvManager) -> list[dict]:
    """The environment-level verdict of every runtime ``req`` names (``run.json``'s ``runtimes``): what it
    changes under its release, how it imports (under which remedies, the bare error verbatim), whether it
    reproduces its release's operators, and the versions its probe found."""
    entries = []
    for name in dict.fromkeys(req.save + req.load):
        if not is_runtime(name):
            continue
        spec = runtimes.parse(name)
        entry = {"name": name, "release": spec.release, "changes": spec.describe(), "verdict": None}
        try:
            env = manager.get(name)
        except KitError:
            env = None  # workers build it (a remote executor): its verdict is theirs
        if env is not None and env.runtime:
            entry.update({k: v for k, v in env.runtime.items() if k != "tries"})
            entry.update({k: env.info(k) for k in ("python", "numpy", "mxnet", "mxnet_features")})
        entries.append(entry)
    return entries


def unusable(entries: list[dict]) -> set[str]:
    """The runtimes of ``entries`` that run no step: they do not import, or their remedy changes outputs."""
    return {e["name"] for e in entries if e["verdict"] in runtime_remedies.FAILING}


def unchecked(req: RunRequest, entries: list[dict] = ()) -> list[dict]:
    """What ``req`` asks for that no step checks, each with why (``run.json``'s ``skipped``): every --load
    release older than every saving release loads nothing unless --forward; a runtime that does not import
    (or whose remedy changes outputs) runs nothing."""
    failing = unusable(entries)
    skipped = [
        {
            "kind": "runtime",
            "name": e["name"],
            "reason": f"runtime {e['verdict']}: "
            + (e.get("last_headline") or e.get("headline") or "see the Runtimes section"),
        }
        for e in entries
        if e["name"] in failing
    ]
    return skipped + [
        {
            "kind": "load",
            "name": release,
            "reason": f"older than every saving release ({', '.join(req.save)}); newer releases' artifacts "
            "load in older ones only with --forward",
        }
        for release in req.load
        if release not in failing and not _sources(req, release)
    ]


def plan(req: RunRequest, run: Run, store: Path, skip: set[str] = frozenset(), *, home: KitHome) -> list[Step]:
    """The steps of ``req``, each naming the steps whose outputs it reads (``depends_on``).

    ``store`` is the folder kernels read and write (an S3 store's working copy); ``skip``, runtimes that run
    no step (:func:`unusable`); ``home``, the kit home whose ONNX Runtime environment an ONNX step runs.
    """
    models, apis = req.scope
    cells = [f"{m}:{a}" for m, a in req.saved_cells()] if req.cells else []
    steps = [
        release_step(
            "train",
            release,
            run,
            notebook_parameters.train(
                release=release,
                store=store,
                models=models,
                apis=apis,
                epochs=req.epochs,
                retrain=req.retrain,
                cells=cells,
                saved_by=f"{run.id}/train:{release}",
            ),
            limits=req.limits,
        )
        for release in ([] if req.reload_only else req.save)
        if release not in skip
    ]
    if req.reload_only:  # every model and API the store holds, unless the request names them
        models, apis = req.models, req.apis
    for release in req.load:
        if release in skip:
            continue
        sources = [s for s in _sources(req, release) if s not in skip]
        if not sources:
            continue
        exporter = onnx_path.exporter_of(release)  # its kernel exports; each exit's runtime, in its own env, runs
        exits = req.exits or [ONNX_API]  # a request stored before exits were named: ONNX Runtime's
        parameters = notebook_parameters.reload(
            release=exporter or release,
            store=store,
            run_dir=run.dir,
            saved_with=sources,
            models=models,
            apis=exits if exporter else apis,
            tolerance=req.tolerance,
            forward=req.forward,
            versions=req.versions,
            cells=req.cells,
            exit_runtimes={e: onnx_path.runtime_python(home, e) for e in exits} if exporter else None,
        )
        trained = [f"train:{s}" for s in sources if not req.reload_only]
        steps.append(release_step("reload", release, run, parameters, trained, req.limits))
    if not any(s.kind == "reload" for s in steps):
        raise UsageError(
            "nothing to check: every --load release is older than every --save release",
            hint="add --forward to check newer artifacts in older releases",
        )
    steps.append(
        Step(
            id="summary",
            kind="summary",
            release=None,
            notebook=str(NOTEBOOKS / "summary.ipynb"),
            output=str(run.dir / SUMMARY_NOTEBOOK),
            kernel=kernelspecs.HOST_KERNEL,
            parameters=notebook_parameters.summary(run_dir=run.dir),
            depends_on=[s.id for s in steps],
            progress=progress_path(run.dir, "summary"),
            limits=dict(req.limits),
        )
    )
    return steps


def waves(steps: list[Step]) -> list[list[Step]]:
    """``steps`` in waves: each step comes in the first wave after every step it depends on.

    A step that depends on a step not in ``steps`` waits for nothing more on that account
    (the manifest of a resumed run lists every step, finished ones included).
    """
    ids = {s.id for s in steps}
    placed: dict[str, int] = {}
    remaining = list(steps)
    out: list[list[Step]] = []
    while remaining:
        wave = [s for s in remaining if all(d in placed or d not in ids for d in s.depends_on)]
        if not wave:
            raise ValueError("steps depend on each other in a circle: " + ", ".join(s.id for s in remaining))
        for s in wave:
            placed[s.id] = len(out)
        out.append(wave)
        remaining = [s for s in remaining if s.id not in placed]
    return out
