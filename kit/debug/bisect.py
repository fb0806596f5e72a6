"""Which release introduced a change: binary search over the releases between a good and a bad one."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from kit.common import artifacts, run_layout
from kit.common.capabilities import APIS, MODEL_NAMES
from kit.common.errors import KitError, UsageError
from kit.common.verdicts import PASSING, UNSUPPORTED
from kit.common.versions import is_runtime, release_key, release_of
from kit.envs import releases, runtimes
from kit.envs.manager import EnvManager
from kit.execute import notebook_parameters
from kit.execute.steps import execute_step
from kit.home import KitHome
from kit.orchestrate.plan import release_step
from kit.results.runs import Run, default_runs_dir, new_run_id


def verdict_class(verdict: str) -> str:
    return "pass" if verdict in PASSING else ("unsupported" if verdict == UNSUPPORTED else "fail")


@dataclass
class BisectResult:
    run_dir: Path
    releases: list[str]
    probes: list[tuple[str, str]] = field(default_factory=list)  # (release, verdict), in probe order
    first_changed: str | None = None
    last_unchanged: str | None = None

    @property
    def reloads(self) -> int:
        return len(self.probes)


def check_release(name: str) -> str:
    """``name`` if it is a table release or a runtime of one (``1.9.1+py3.12+numpy1.26.4``); a usage error
    listing what exists otherwise."""
    if is_runtime(name):
        runtimes.release_for(name)
    else:
        releases.get(name)
    return name


def releases_between(good: str, bad: str) -> list[str]:
    """Table releases from ``good`` to ``bad`` inclusive, ordered from good to bad (either direction); an end
    that is a runtime stands in for its release (``--good 1.9.1 --bad 1.9.1+py3.13+numpy2.1.3``: those two)."""
    for r in (good, bad):
        check_release(r)
    names = releases.known_names()
    lo, hi = sorted((names.index(release_of(good)), names.index(release_of(bad))))
    span = names[lo : hi + 1]
    span = span if release_key(good) <= release_key(bad) else list(reversed(span))
    if release_of(good) == release_of(bad):
        return list(dict.fromkeys([good, bad]))
    return [good] + span[1:-1] + [bad]


def bisect(
    model: str,
    api: str,
    good: str,
    bad: str,
    *,
    saved_with: str | None = None,
    store: str | None = None,
    run_id: str | None = None,
    runs_dir: str | Path | None = None,
    home: KitHome | None = None,
    allow_fallback: bool = False,
    on_event: Callable[[str], None] = print,
) -> BisectResult:
    """Name the first release, walking from ``good`` to ``bad``, whose verdict on the artifact changes.

    The artifact is (``saved_with`` or ``good``, model, api) from ``store``; it is trained
    first when missing. ``good`` is taken as good (not reloaded); ``bad`` is reloaded
    once, then each probe halves the interval: at most ceil(log2 n) + 1 reloads for n
    releases. Environments are created as probes need them.
    """
    if model not in MODEL_NAMES or api not in APIS:
        raise UsageError(
            f"unknown model or API: {model}/{api}", hint=f"models: {', '.join(MODEL_NAMES)}; APIs: {', '.join(APIS)}"
        )
    home = home or KitHome()
    span = releases_between(good, bad)
    if len(span) < 2:
        raise UsageError("--good and --bad must be two different releases")
    saved_with = check_release(saved_with or good)
    store_dir = Path(store).expanduser().resolve() if store else home.store
    run = Run(runs_dir or default_runs_dir(), run_id or f"bisect-{new_run_id()}")
    if run.exists():
        raise UsageError(f"run {run.id} already exists")
    run.lock()
    try:
        run.write_manifest(
            {
                "run_id": run.id,
                "kind": "bisect",
                "model": model,
                "api": api,
                "good": good,
                "bad": bad,
                "saved_with": saved_with,
                "store": str(store_dir),
                "releases": span,
            }
        )
        manager = EnvManager(home)
        result = BisectResult(run.dir, span)
        _ensure_env(manager, saved_with, allow_fallback, on_event)
        if not (Path(artifacts.artifact_dir(store_dir, saved_with, model, api)) / artifacts.MANIFEST).is_file():
            on_event(f"training {model}/{api} in {saved_with} first")
            _step(
                run,
                home,
                "train",
                saved_with,
                notebook_parameters.train(release=saved_with, store=store_dir, models=[model], apis=[api]),
            )

        def probe(release: str) -> str:
            _ensure_env(manager, release, allow_fallback, on_event)
            _step(
                run,
                home,
                "reload",
                release,
                notebook_parameters.reload(
                    release=release,
                    store=store_dir,
                    run_dir=run.dir,
                    saved_with=[saved_with],
                    models=[model],
                    apis=[api],
                    forward=True,
                ),
            )
            record = run_layout.record_path(run.dir, saved_with, model, api, release)
            verdict = artifacts.read_json(record)["verdict"]
            result.probes.append((release, verdict))
            on_event(f"[{len(result.probes)}] {release}: {verdict}")
            return verdict

        bad_class = verdict_class(probe(span[-1]))
        lo, hi = 0, len(span) - 1
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if verdict_class(probe(span[mid])) == bad_class:
                hi = mid
            else:
                lo = mid
        result.first_changed, result.last_unchanged = span[hi], span[lo]
        bound = math.ceil(math.log2(len(span))) + 1
        summary = {
            "probes": result.probes,
            "first_changed": result.first_changed,
            "last_unchanged": result.last_unchanged,
            "reloads": result.reloads,
            "bound": bound,
            "bad_verdict_class": bad_class,
        }
        artifacts.write_json_atomic(str(run.dir / "bisect.json"), summary)
        return result
    finally:
        run.unlock()


def _ensure_env(manager: EnvManager, release: str, allow_fallback: bool, on_event) -> None:
    try:
        if manager.get(release).state == "ready":
            return
    except KitError:
        pass
    on_event(f"creating the environment for {release}")
    plan = manager.build_plan(manager.resolve(release), allow_fallback=allow_fallback)
    result = manager.create([plan])[0]
    if result.error is not None:
        raise result.error


def _step(run: Run, home: KitHome, kind: str, release: str, parameters: dict) -> None:
    step = release_step(kind, release, run, parameters)
    result = execute_step(step.to_dict(), str(home.root), str(run.dir / "logs" / f"{kind}-{release}.log"))
    if result["status"] != "ok":
        raise KitError(
            f"{kind} on {release} broke: {(result['error'] or '').strip().splitlines()[-1:]}", hint=f"see {step.output}"
        )
