"""What building one environment takes, decided before any work starts: its interpreter and install steps."""

from __future__ import annotations

from dataclasses import dataclass

from kit.envs import releases
from kit.envs.interpreters import Interpreter
from kit.envs.releases import Release


@dataclass(frozen=True)
class BuildPlan:
    """What building one environment takes, decided before any work starts."""

    release: Release
    interpreter: Interpreter
    fallback: bool

    @property
    def name(self) -> str:
        return self.release.name

    def install_steps(self) -> list[InstallStep]:
        """What to install, in order: MXNet with its kernel and plotting packages, then pandas where it installs."""
        if not self.release.has_mxnet:  # a runtime the kernels call: no kernel, no plotting
            return [InstallStep(list(self.release.requirements))]
        ipykernel = releases.ipykernel_for(self.interpreter.minor)
        libs = releases.debugging_libs_for(self.interpreter.minor)
        matplotlib, pandas = ([libs[0]], [libs[1]]) if libs else ([], [])
        if self.fallback:
            fb = self.release.fallback
            base = [InstallStep(list(fb.no_deps), no_deps=True)]
            reqs = list(fb.requirements)
        else:
            base, reqs = [], list(self.release.requirements)
        steps = base + [InstallStep(reqs + [ipykernel] + matplotlib)]
        if pandas:
            # numpy pinned again: pandas must not move the release's numpy to install itself
            numpy_pins = [r for r in reqs if r.replace(" ", "").lower().startswith("numpy")]
            steps.append(InstallStep(numpy_pins + pandas, optional=True))
        return steps


@dataclass(frozen=True)
class InstallStep:
    """One ``uv pip install``; an optional step that fails is noted in the marker and the build goes on."""

    requirements: list[str]
    no_deps: bool = False
    optional: bool = False

    def to_dict(self) -> dict:
        return {"requirements": list(self.requirements), "no_deps": self.no_deps, "optional": self.optional}
