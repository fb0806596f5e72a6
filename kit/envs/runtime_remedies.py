"""Runtime remedies: what makes a runtime that does not import import, found by trying, kept only when the
remedied runtime computes what its release's canonical environment computes.

Each remedy is declared like the cell remedies: what it changes and the lines a user pastes to do the same.
:func:`settle` runs in a freshly built runtime environment: it tries ``import mxnet`` bare, then with each
remedy its error calls for, until MXNet imports or the error is one no remedy knows (kept verbatim).
:func:`verify` runs the same operator battery (:mod:`kit.kernel.entry.runtime_check`) in the runtime and in the
canonical environment and compares them with the kit's tolerance.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kit.common import tolerance
from kit.common.errors import KitError
from kit.common.numpy_names import paste_lines
from kit.common.versions import RUNTIME_CONFIG
from kit.envs import kernel_process
from kit.envs.releases import Release
from kit.envs.uv import run_logged

PTH_NAME = "mxcompat-runtime.pth"  # sorts after mxcompat-kit.pth, which puts the kit on the path
PTH_LINE = "import kit.kernel.runtime.fix as _mxcompat_fix; _mxcompat_fix.apply()\n"
#: a runtime's env-level verdicts: the first two are usable, the last two fail
IMPORTS, IMPORTS_UNDER_REMEDY, REMEDY_CHANGES_OUTPUTS, DOES_NOT_IMPORT = (
    "imports",
    "imports under remedy",
    "remedy changes outputs",
    "does not import",
)
USABLE = (IMPORTS, IMPORTS_UNDER_REMEDY)
FAILING = (REMEDY_CHANGES_OUTPUTS, DOES_NOT_IMPORT)
MAX_TRIES = 64  # NumPy 2.1.3 under 1.9.1 takes 19


@dataclass(frozen=True)
class RuntimeRemedy:
    """One way to make a runtime import: what it changes, and what a user does to do the same."""

    name: str
    changes: str
    requirement: str | None = None  # a package installed into the environment

    def paste(self, aliases: dict) -> list[str]:
        if self.requirement:
            return [f'pip install "{self.requirement}"']
        return paste_lines(aliases)

    def record(self, aliases: dict) -> dict:
        """What a runtime's record says of this remedy: what it changes, the lines to paste, the names found."""
        entry = {"name": self.name, "changes": self.changes, "paste": self.paste(aliases)}
        if not self.requirement:
            entry["names"] = dict(sorted(aliases.items()))
        return entry


NUMPY_NAMES = RuntimeRemedy(
    "numpy-names",
    "gives back, before `import mxnet`, the NumPy names MXNet reads that the installed NumPy removed, each as "
    "NumPy's own error says to use instead (np.bool is the builtin bool it aliased)",
)
DISTUTILS = RuntimeRemedy(
    "distutils",
    "installs setuptools into the environment: MXNet imports distutils, which Python 3.12 removed from the "
    "standard library and setuptools provides again",
    requirement="setuptools<81",
)
#: the runtime remedy a missing module calls for (a removed NumPy name calls for NUMPY_NAMES)
MODULE_REMEDIES = {"distutils": DISTUTILS}


def write_config(env_path: Path, purelib: str, switches: tuple[str, ...], aliases: dict) -> None:
    """What the environment's interpreter applies at start: the switches and the names given back."""
    (env_path / RUNTIME_CONFIG).write_text(
        json.dumps({"switches": list(switches), "aliases": aliases}, indent=1) + "\n"
    )
    Path(purelib, PTH_NAME).write_text(PTH_LINE)


def _check(python: str, aliases: dict | None, log: Path | None, *, battery: bool = False) -> dict:
    return kernel_process.run_kernel_main(
        python,
        "kit.kernel.entry.runtime_check",
        {"aliases": aliases, "battery": battery},
        what="importing mxnet",
        timeout=300,
        log=log,
    )


def settle(release: Release, env_path: Path, purelib: str, uv: str, log: Path) -> dict:
    """Make runtime ``release`` import in its environment at ``env_path`` if a remedy can: the runtime's record
    (``verdict``, the bare import's ``error`` verbatim, the ``remedies`` applied with what they found)."""
    python = str(env_path / "bin" / "python")
    aliases: dict = {}
    write_config(env_path, purelib, release.switches, aliases)
    state: dict = {"verdict": IMPORTS, "remedies": [], "tries": 0}
    applied: list[RuntimeRemedy] = []
    for attempt in range(MAX_TRIES):
        state["tries"] = attempt + 1
        answer = _check(python, aliases, log)
        if answer["ok"]:
            break
        if attempt == 0:
            state.update(error=answer["error"], headline=answer["headline"])
        name, module = answer.get("missing_name"), answer.get("missing_module")
        if name is not None and name not in aliases:
            aliases[name] = answer["equivalent"]
            applied += [] if NUMPY_NAMES in applied else [NUMPY_NAMES]
        elif module in MODULE_REMEDIES and MODULE_REMEDIES[module] not in applied:
            remedy = MODULE_REMEDIES[module]
            run_logged(
                [uv, "pip", "install", "--python", python, remedy.requirement],
                log,
                what=f"installing {remedy.requirement} into {release.name} (runtime remedy {remedy.name})",
            )
            applied.append(remedy)
        else:  # an error no remedy knows, or one a remedy did not cure
            state.update(verdict=DOES_NOT_IMPORT, last_error=answer["error"], last_headline=answer["headline"])
            break
    else:
        state.update(verdict=DOES_NOT_IMPORT, last_error=f"still failing after {MAX_TRIES} tries")
    write_config(env_path, purelib, release.switches, aliases)
    state["remedies"] = [remedy.record(aliases) for remedy in applied]
    if applied and state["verdict"] == IMPORTS:
        state["verdict"] = IMPORTS_UNDER_REMEDY
    return state


def battery(python: str, log: Path | None = None) -> dict:
    """The operator battery's outputs in the environment of ``python`` (its recorded remedies applied)."""
    answer = _check(python, None, log, battery=True)
    if not answer["ok"]:
        raise KitError(f"mxnet does not import in {python}: {answer['headline']}")
    return answer["outputs"]


def verify(runtime_outputs: dict, canonical_outputs: dict, canonical: str) -> dict:
    """Compare the runtime's battery with its release's canonical one under the kit's float32 tolerance:
    ``{"against", "operators", "max_abs", "differ": {op: max abs}, "fails": {op: error}, "ok"}``."""
    tol = tolerance.resolve(np.dtype("float32"))
    differ, fails, worst = {}, {}, 0.0
    for op, expected in sorted(canonical_outputs.items()):
        got = runtime_outputs.get(op, {"error": "not computed"})
        if "error" in expected:
            continue  # the canonical release has no such operator: nothing to reproduce
        if "error" in got:
            fails[op] = got["error"]
            continue
        a, e = np.asarray(got["values"]), np.asarray(expected["values"])
        if a.shape != e.shape:
            fails[op] = f"{a.size} values, the canonical environment gives {e.size}"
            continue
        diff = float(np.abs(a - e).max()) if a.size else 0.0
        worst = max(worst, diff)
        if not bool(np.all(tolerance.within(a, e, tol))):
            differ[op] = diff
    return {
        "against": canonical,
        "operators": len(canonical_outputs),
        "max_abs": worst,
        "differ": differ,
        "fails": fails,
        "ok": not differ and not fails,
    }


def check_canonical(release: Release, runtime: dict, env_path: Path, canonical_path: Path | None, log: Path) -> None:
    """Run the operator battery in the runtime at ``env_path`` and in its release's canonical environment at
    ``canonical_path`` (None: not built here, nothing to compare); ``runtime["verified"]`` says how they compare,
    and a remedied runtime that does not reproduce its release becomes :data:`REMEDY_CHANGES_OUTPUTS`."""
    if canonical_path is None:
        runtime["verified"] = {"against": release.canonical, "ok": None, "why": "no canonical environment"}
        return
    mine = battery(str(env_path / "bin" / "python"), log)
    theirs = battery(str(canonical_path / "bin" / "python"), log)
    runtime["verified"] = verify(mine, theirs, release.canonical)
    if runtime["verdict"] == IMPORTS_UNDER_REMEDY and not runtime["verified"]["ok"]:
        runtime["verdict"] = REMEDY_CHANGES_OUTPUTS


def failure_text(name: str, runtime: dict) -> str:
    """Why a failing runtime fails: its error verbatim, or the numbers its remedy changed."""
    tried = ", ".join(r["name"] for r in runtime["remedies"]) or "none applied"
    if runtime["verdict"] == DOES_NOT_IMPORT:
        error = runtime.get("last_error") or runtime.get("error") or ""
        return f"runtime {name} does not import (remedies tried: {tried}):\n{error}"
    return (
        f"runtime {name} imports under remedies {tried} but does not reproduce "
        f"{runtime['verified']['against']}: {verification_text(runtime['verified'])}; the remedy changes numbers: "
        "it is reported as failing, not used"
    )


def runtime_line(runtime: dict) -> str:
    """One line on how a runtime imports: ``imports under remedy numpy-names (18 names), distutils; reproduces
    1.9.1 (14 operators, max abs 0)``."""
    remedies = ", ".join(
        r["name"] + (f" ({len(r['names'])} names)" if r.get("names") else "") for r in runtime.get("remedies", [])
    )
    line = runtime["verdict"] + (f" {remedies}" if remedies and runtime["verdict"] != IMPORTS else "")
    if runtime["verdict"] == DOES_NOT_IMPORT:
        line += ": " + (runtime.get("last_headline") or runtime.get("headline") or "")
    verified = runtime.get("verified")
    if verified and verified.get("ok") is not None:
        line += "; " + verification_text(verified)
    return line


def verification_text(verified: dict) -> str:
    if verified["ok"]:
        return (
            f"reproduces {verified['against']} ({verified['operators']} operators, max abs {verified['max_abs']:.3g})"
        )
    parts = [f"{op} max abs {d:.3g}" for op, d in verified["differ"].items()]
    parts += [f"{op}: {e}" for op, e in verified["fails"].items()]
    return f"differs from {verified['against']}: " + "; ".join(parts)
