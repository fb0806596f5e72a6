"""One virtualenv per MXNet release, each registered as Jupyter kernel ``mxnet-<name>``.

An environment is *ready* only once its marker file is written, which is the
last step of a build after MXNet was imported and ran a forward pass; a build
that is interrupted leaves a folder without a marker, reported *incomplete* and
rebuilt by the next ``create``.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import kit
from kit.common.artifacts import write_json_atomic
from kit.common.errors import EnvBuildError, EnvNotFoundError, KitError, UsageError
from kit.common.names import is_safe_name
from kit.common.versions import RELEASE_VERSION_VARIABLE, is_runtime, same_release, sort_key
from kit.envs import (
    bytecode,
    kernel_process,
    kernelspecs,
    onnx_path,
    releases,
    runtime_remedies,
    runtimes,
    syslibs,
)
from kit.envs.build_plan import BuildPlan
from kit.envs.interpreters import Interpreter, InterpreterFinder
from kit.envs.releases import Release
from kit.envs.uv import run_logged, uv_binary
from kit.home import REPO_ROOT, KitHome

MARKER = "mxcompat-env.json"
PTH_NAME = "mxcompat-kit.pth"


@dataclass
class Env:
    """An environment folder as found on disk."""

    name: str
    path: Path
    marker: dict | None

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    @property
    def kernel_name(self) -> str:
        return kernelspecs.kernel_name(self.name)

    @property
    def state(self) -> str:
        """ready, incomplete, broken, or a runtime's failing verdict ("does not import", "remedy changes
        outputs")."""
        if self.marker is None:
            return "incomplete"
        if self.runtime and self.runtime.get("verdict") not in runtime_remedies.USABLE:
            return self.runtime["verdict"]
        return "ready" if self.python.exists() else "broken"

    @property
    def runtime(self) -> dict | None:
        """A runtime's record (kit.envs.runtime_remedies.settle): how it imports, under which remedies, and how
        its operators compare with its release's canonical environment; None for a release's own environment."""
        return (self.marker or {}).get("runtime")

    @property
    def release(self) -> Release | None:
        return Release.from_dict(self.marker["release"]) if self.marker else None

    @property
    def fallback(self) -> bool:
        return bool(self.marker and self.marker.get("fallback"))

    def run_main(self, module: str, request: dict, what: str, **options) -> dict:
        """``python -m MODULE REQUEST.json`` in this environment, from its folder
        (:func:`kit.envs.kernel_process.run_kernel_main`, whose ``options`` it takes): the program's answer."""
        return kernel_process.run_kernel_main(self.python, module, request, what=what, cwd=self.path, **options)

    def info(self, key: str, default=None):
        probe = (self.marker or {}).get("probe") or {}
        return probe.get(key, default)

    def size_bytes(self) -> int:
        total = 0
        for root, _dirs, files in os.walk(self.path):
            for f in files:
                try:
                    total += os.lstat(os.path.join(root, f)).st_size
                except OSError:
                    pass
        return total


@dataclass
class Health:
    name: str
    ok: bool
    problems: list[str] = field(default_factory=list)
    probe: dict | None = None


@dataclass
class BuildResult:
    name: str
    status: str  # created, exists, failed
    seconds: float
    error: KitError | None = None
    notes: list[str] = field(default_factory=list)  # what an optional install step left out, and why


class EnvManager:
    """Creates, lists, verifies and removes the kit's environments."""

    def __init__(self, home: KitHome | None = None, finder: InterpreterFinder | None = None):
        self.home = home or KitHome()
        self.finder = finder or InterpreterFinder()

    # -- looking up ---------------------------------------------------------------------------
    def list(self) -> list[Env]:
        if not self.home.envs.is_dir():
            return []
        envs = [
            self._load(p)
            for p in self.home.envs.iterdir()
            if p.is_dir() and not p.is_symlink() and is_safe_name(p.name)  # hidden locks and strays are not envs
        ]
        return sorted(envs, key=_env_sort_key)

    def get(self, name: str) -> Env:
        path = self.home.env_dir(name)
        if not path.is_dir():
            raise EnvNotFoundError(
                f"no environment {name!r} in {self.home.envs}", hint=f"create it with `mxcompat env create {name}`"
            )
        return self._load(path)

    def state_of(self, name: str) -> str | None:
        """The state of environment ``name`` (:attr:`Env.state`), None when there is no such environment."""
        path = self.home.env_dir(name)
        return self._load(path).state if path.is_dir() else None

    def ready_env(self, name: str) -> Env:
        env = self.get(name)
        if env.state != "ready":
            raise EnvNotFoundError(
                f"environment {name!r} is {env.state}", hint=f"rebuild it with `mxcompat env create {name}`"
            )
        return env

    def resolve(self, name: str) -> Release:
        """A release by name: the table's, a custom one created earlier, or a runtime (``1.9.1+py3.12``)."""
        if name in releases.RELEASES:
            return releases.RELEASES[name]
        if onnx_path.find(name) is not None:
            return onnx_path.find(name)
        path = self.home.env_dir(name)
        if path.is_dir():
            env = self._load(path)
            if env.release is not None and env.release.custom:
                return env.release
        if is_runtime(name):
            return runtimes.release_for(name)
        return releases.get(name)  # raises with the list of known releases

    def _load(self, path: Path) -> Env:
        marker = None
        try:
            marker = json.loads((path / MARKER).read_text())
        except (OSError, ValueError):
            pass
        return Env(name=path.name, path=path, marker=marker)

    # -- planning -----------------------------------------------------------------------------
    def build_plan(self, release: Release, *, allow_fallback: bool = False, python: str | None = None) -> BuildPlan:
        """Check everything a build needs (interpreter, system libraries; a runtime's packages for its Python)
        before any work starts."""
        syslibs.require(release.system_libs, needed_by=release.name)
        if release.is_runtime:
            interp = self.finder.require(release.python, explicit=python, needed_by=release.name)
            runtimes.check_installable(release, uv_binary())
            return BuildPlan(release, interp, False)
        if python:
            return BuildPlan(
                release, self.finder.require(release.python, explicit=python, needed_by=release.name), False
            )
        interp = self.finder.find(release.python)
        if interp is not None:
            return BuildPlan(release, interp, False)
        if allow_fallback and release.fallback is not None:
            host = self._fallback_python(release.fallback.python)
            if host is not None:
                return BuildPlan(release, host, True)
        error = self.finder.not_found(release.python, release.name)
        if release.fallback is None:
            error.hint += f"; MXNet {release.name} has no documented fallback on another Python"
        elif not allow_fallback:
            error.hint += (
                f"; or pass --allow-fallback to run it on Python {release.fallback.python} "
                "with --no-deps (recorded as a fallback)"
            )
        raise error

    def _fallback_python(self, minor: str) -> Interpreter | None:
        host = self.finder.find(minor)
        if host is None and f"{sys.version_info[0]}.{sys.version_info[1]}" == minor:
            host = Interpreter(sys.executable, tuple(sys.version_info[:3]), "host")
        return host

    # -- building -----------------------------------------------------------------------------
    def create(self, plans: list[BuildPlan], *, jobs: int = 2, force: bool = False, on_done=None) -> list[BuildResult]:
        """Build every plan, up to ``jobs`` at once; one failure does not stop the others."""
        self.home.envs.mkdir(parents=True, exist_ok=True)
        self.home.logs.mkdir(parents=True, exist_ok=True)
        uv = uv_binary()  # resolved once, here: uv's finder is not thread-safe
        results = []
        # releases first: a runtime is verified against its release's canonical environment
        for phase in ([p for p in plans if not p.release.is_runtime], [p for p in plans if p.release.is_runtime]):
            with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
                futures = {pool.submit(self._build_one, plan, uv, force): plan for plan in phase}
                for fut in as_completed(futures):
                    plan = futures[fut]
                    try:
                        result = fut.result()
                    except KitError as e:
                        result = BuildResult(plan.name, "failed", 0.0, e)
                    except Exception as e:  # a bug or an OS error in one build must not hide the others' results
                        result = BuildResult(plan.name, "failed", 0.0, EnvBuildError(f"{type(e).__name__}: {e}"))
                    results.append(result)
                    if on_done:
                        on_done(result)
        order = {p.name: i for i, p in enumerate(plans)}
        return sorted(results, key=lambda r: order[r.name])

    def _build_one(self, plan: BuildPlan, uv: str, force: bool) -> BuildResult:
        started = time.monotonic()
        with self._lock(plan.name):
            env = self._load(self.home.env_dir(plan.name)) if self.home.env_dir(plan.name).is_dir() else None
            if env is not None and not force and self._up_to_date(env, plan):
                return BuildResult(plan.name, "exists", time.monotonic() - started)
            try:
                marker = self._build(plan, uv)
            except KitError as e:
                return BuildResult(plan.name, "failed", time.monotonic() - started, e)
        notes = [
            f"left out {' '.join(s['requirements'])}: {s['error'].splitlines()[0]}" for s in marker["skipped_optional"]
        ]
        if marker.get("runtime"):
            notes.insert(0, runtime_remedies.runtime_line(marker["runtime"]))
        return BuildResult(plan.name, "created", time.monotonic() - started, notes=notes)

    def _up_to_date(self, env: Env, plan: BuildPlan) -> bool:
        return (
            env.state == "ready"
            and env.release == plan.release
            and env.fallback == plan.fallback
            and (not plan.release.has_mxnet or kernelspecs.read_kernelspec(self.home, env.kernel_name) is not None)
            and env.marker.get("install_steps") == [step.to_dict() for step in plan.install_steps()]
        )

    def _build(self, plan: BuildPlan, uv: str) -> dict:
        """Build ``plan``'s environment; its marker (the optional install steps that failed are its
        ``skipped_optional``)."""
        path = self.home.env_dir(plan.name)
        log = self.home.logs / f"env-{plan.name}.log"
        log.write_text(f"# building {plan.name} on {plan.interpreter.path} (fallback={plan.fallback})\n")
        started = time.monotonic()
        kernelspecs.remove_kernelspec(self.home, plan.release.kernel_name)
        if path.exists():
            shutil.rmtree(path)
        run_logged(
            [uv, "venv", "--quiet", "--python", plan.interpreter.path, str(path)],
            log,
            what=f"creating the virtualenv for {plan.name}",
        )
        python = str(path / "bin" / "python")
        skipped = []
        overrides = []
        if plan.release.overrides:  # a runtime's numpy, installed past the release's own pin
            override_file = self.home.logs / f"env-{plan.name}.overrides.txt"
            override_file.write_text("\n".join(plan.release.overrides) + "\n")
            overrides = ["--override", str(override_file)]
        for step in plan.install_steps():
            argv = [uv, "pip", "install", "--python", python, *overrides] + (["--no-deps"] if step.no_deps else [])
            what = f"installing {' '.join(step.requirements)} for {plan.name}"
            try:
                run_logged(argv + step.requirements, log, what=what)
            except EnvBuildError as e:
                if not step.optional:
                    raise
                skipped.append({"requirements": step.requirements, "error": str(e)})
        purelib = (
            run_logged(
                [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                log,
                what="locating site-packages",
            )
            .strip()
            .splitlines()[-1]
        )
        Path(purelib, PTH_NAME).write_text(str(REPO_ROOT) + "\n")
        bytecode.compile_for_kernels(python, purelib, log, plan.name)
        steps = [step.to_dict() for step in plan.install_steps()]
        marker = {
            "release": plan.release.to_dict(),
            "fallback": plan.fallback,
            "interpreter": {
                "path": plan.interpreter.path,
                "version": list(plan.interpreter.version),
                "source": plan.interpreter.source,
            },
            "install_steps": steps,
            "skipped_optional": skipped,
            "kit_version": kit.__version__,
        }
        if plan.release.is_runtime:  # settled and verified first: a remedy that changes numbers is its verdict
            self._settle_runtime(plan, path, purelib, uv, log, marker)
        probe = self._probe(Env(plan.name, path, None), log, plan.release)
        problems = _probe_problems(probe, plan.release, _expected_libs(steps, skipped))
        if problems:
            raise EnvBuildError(
                f"environment {plan.name} was built but does not work: " + "; ".join(problems), hint=f"full log: {log}"
            )
        fb = " fallback" if plan.fallback else ""
        if plan.release.has_mxnet:
            self._register_kernel(plan, python, fb)
        marker.update(
            probe=probe,
            created_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            build_seconds=round(time.monotonic() - started, 2),
        )
        write_json_atomic(str(path / MARKER), marker)
        return marker

    def _settle_runtime(self, plan: BuildPlan, path: Path, purelib: str, uv: str, log: Path, marker: dict) -> None:
        """Make a runtime import with the remedies its errors call for, then check it against its release's
        canonical environment; a runtime that fails either keeps its marker (``env list`` shows why, no kernel
        runs it) and fails the build with its error verbatim or the numbers that differ."""
        started = time.monotonic()
        runtime = marker["runtime"] = runtime_remedies.settle(plan.release, path, purelib, uv, log)
        runtime["settle_seconds"] = round(time.monotonic() - started, 2)
        if runtime["verdict"] != runtime_remedies.DOES_NOT_IMPORT:
            ready = self.state_of(plan.release.canonical) == "ready"
            canonical = self.home.env_dir(plan.release.canonical) if ready else None
            runtime_remedies.check_canonical(plan.release, runtime, path, canonical, log)
        if runtime["verdict"] in runtime_remedies.FAILING:
            kernelspecs.remove_kernelspec(self.home, plan.release.kernel_name)
            write_json_atomic(str(path / MARKER), marker)
            raise EnvBuildError(runtime_remedies.failure_text(plan.name, runtime), hint=f"full log: {log}")

    def _register_kernel(self, plan: BuildPlan, python: str, fb: str) -> None:
        env = dict(s.partition("=")[::2] for s in plan.release.switches)  # also set at start by runtime_fix
        if plan.release.custom:  # a custom release's name is no version: the kernel checks the one it must report
            env[RELEASE_VERSION_VARIABLE] = plan.release.expected_version or ""
        kernelspecs.write_kernelspec(
            self.home,
            plan.release.kernel_name,
            python,
            display_name=f"MXNet {plan.name} (Python {plan.interpreter.minor}{fb})",
            metadata={"release": plan.name, "fallback": plan.fallback, "canonical": plan.release.canonical},
            env=env or None,
        )

    def _probe(self, env: Env, log: Path | None = None, release: Release | None = None) -> dict:
        """Run the kernel-side probe in ``env`` from outside the repository, so only the .pth finds kit (in the
        ONNX Runtime environment, the runtime worker's greeting), through the one door to kernel-side programs."""
        release = release or env.release
        module = "kit.kernel.entry.probe" if release is None or release.has_mxnet else "kit.kernel.exits.runtime_worker"
        return env.run_main(module, {"release": env.name}, f"probing {env.name}", timeout=300, log=log)

    @contextmanager
    def _lock(self, name: str):
        lock_path = self.home.envs / f".{name}.lock"
        with open(lock_path, "w") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise EnvBuildError(
                    f"another process is building environment {name!r}",
                    hint="wait for it to finish, then run the command again",
                ) from None
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    # -- removing and verifying ---------------------------------------------------------------
    def remove(self, name: str) -> None:
        """Remove the environment ``name`` as ``env list`` names it, and its kernel; nothing else."""
        listed = {e.name for e in self.list()}
        if name not in listed:
            raise UsageError(
                f"no environment {name!r} in {self.home.envs}",
                hint="name one that `mxcompat env list` shows: " + (", ".join(sorted(listed)) or "there are none"),
            )
        env = self.get(name)
        with self._lock(name):
            kernelspecs.remove_kernelspec(self.home, env.kernel_name)
            shutil.rmtree(env.path)
        (self.home.envs / f".{name}.lock").unlink(missing_ok=True)

    def doctor(self, names: list[str] | None = None, *, jobs: int = 2, on_done=None) -> list[Health]:
        """Re-verify each environment: marker, kernelspec, MXNet import and version, a forward pass."""
        envs = [self.get(n) for n in names] if names else self.list()
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            healths = list(pool.map(self._check, envs))
        if on_done:
            for h in healths:
                on_done(h)
        return healths

    def _check(self, env: Env) -> Health:
        if env.state in runtime_remedies.FAILING:
            return Health(env.name, False, ["runtime " + runtime_remedies.runtime_line(env.runtime)])
        if env.state != "ready":
            return Health(env.name, False, [f"environment is {env.state} (an interrupted or failed build)"])
        problems = []
        spec = kernelspecs.read_kernelspec(self.home, env.kernel_name)
        if not env.release.has_mxnet:
            pass  # an exit runtime's environment is a worker the kernels start, not a kernel
        elif spec is None:
            problems.append(f"kernel {env.kernel_name} is not registered")
        elif spec["argv"][0] != str(env.python):
            problems.append(f"kernel {env.kernel_name} points at {spec['argv'][0]}, not {env.python}")
        try:
            probe = self._probe(env)
        except KitError as e:
            return Health(env.name, False, problems + [str(e)])
        expected = _expected_libs(env.marker.get("install_steps", []), env.marker.get("skipped_optional", []))
        problems += _probe_problems(probe, env.release, expected)
        return Health(env.name, not problems, problems, probe)


def _expected_libs(steps: list[dict], skipped: list[dict]) -> set[str]:
    """The debugging libraries a build installed: those its steps asked for, less the optional ones that failed."""
    left_out = {r for s in skipped for r in s["requirements"]}
    asked = {r for s in steps for r in s["requirements"] if r not in left_out}
    return {lib for lib in ("matplotlib", "pandas") if any(r.startswith(lib + "==") for r in asked)}


def _probe_problems(probe: dict, release: Release, expected_libs: set[str] = frozenset()) -> list[str]:
    if not release.has_mxnet:
        return [] if probe.get("ready") else [f"{release.name} does not import: {probe.get('error', 'unknown error')}"]
    problems = []
    for lib, does in (("matplotlib", "draw"), ("pandas", "render a table")):
        if lib in expected_libs and probe.get(lib) is None:
            problems.append(f"{lib} does not {does}: {probe.get(lib + '_error', 'unknown error')}")
    if probe.get("mxnet") is None:
        problems.append(f"mxnet does not import: {probe.get('mxnet_error', 'unknown error')}")
        return problems
    if release.expected_version and not same_release(release.expected_version, probe["mxnet"]):
        problems.append(f"mxnet reports {probe['mxnet']}, expected {release.expected_version}")
    if not probe.get("forward_ok"):
        problems.append(
            "forward pass failed: "
            + str(probe.get("forward_error") or f"max abs error {probe.get('forward_max_abs_error')}")
        )
    return problems


def _env_sort_key(env: Env):
    return sort_key(env.name)
