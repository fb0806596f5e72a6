"""Runtimes: a release plus what changes under it, written ``RELEASE+TAG[+TAG...]``.

A tag is ``pyX.Y`` (the interpreter), ``numpyX.Y.Z`` (installed past the release's own numpy pin), ``mkl`` /
``native`` (the ``mxnet-mkl`` / ``mxnet-native`` distribution of that version) or ``NAME=VALUE`` (an
``MXNET_*`` switch set in the kernel). A runtime is built like a release (its own environment and kernel)
from the release table's entry for its release, its *canonical* environment. What does not exist is refused
before any work: a flavour never published for that version, a Python or numpy with no wheels for it.
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kit.common.errors import UsageError
from kit.common.names import unsafe_reason
from kit.common.versions import base_version, release_of, runtime_tags
from kit.envs import releases
from kit.envs.releases import Release
from kit.envs.uv import uv_env

#: the versions each build flavour published on PyPI (read from the registry on 2026-12-07; MXNet is retired)
FLAVOURS = {
    "mkl": (
        "mxnet-mkl",
        "MKL-DNN on (0.10 to 1.6.0, while plain mxnet has it off until 1.7)",
        (
            "0.10.0",
            "0.10.0.post2",
            "0.11.0",
            "0.12.0",
            "0.12.1",
            "1.0.0",
            "1.0.0.post0",
            "1.0.0.post1",
            "1.0.0.post2",
            "1.0.0.post4",
            "1.1.0",
            "1.2.0",
            "1.2.1",
            "1.2.1.post0",
            "1.2.1.post1",
            "1.3.0",
            "1.3.0.post0",
            "1.3.1",
            "1.4.0",
            "1.4.0.post0",
            "1.4.1",
            "1.5.0",
            "1.5.1",
            "1.5.1.post0",
            "1.6.0",
        ),
    ),
    "native": (
        "mxnet-native",
        "MKL-DNN off (1.7 and 1.8, while plain mxnet has it on from 1.7)",
        ("1.7.0", "1.8.0.post0"),
    ),
}

_PYTHON = re.compile(r"^py(3\.\d+)\Z")
_NUMPY = re.compile(r"^numpy(\d+\.\d+(?:\.\d+)?)\Z")
_SWITCH = re.compile(r"^(MXNET_[A-Z0-9_]+)=([A-Za-z0-9._-]*)\Z")
SYNTAX = "RELEASE+TAG[+TAG...] with tags pyX.Y, numpyX.Y.Z, mkl or native, MXNET_NAME=VALUE"


@dataclass(frozen=True)
class Runtime:
    """What a runtime name says: its release and the tags that change what runs under it."""

    name: str
    release: str
    python: str | None = None
    numpy: str | None = None
    flavour: str | None = None
    switches: tuple[str, ...] = ()  # "NAME=VALUE", in the order written

    def describe(self) -> str:
        """What changes under the release, in words (``Python 3.12, numpy 1.26.4``)."""
        parts = [f"Python {self.python}"] if self.python else []
        parts += [f"numpy {self.numpy}"] if self.numpy else []
        parts += [f"{FLAVOURS[self.flavour][0]}"] if self.flavour else []
        parts += list(self.switches)
        return ", ".join(parts)


def parse(name: str) -> Runtime:
    """The runtime ``name`` spells; a usage error naming the tag that is wrong."""
    release, tags = release_of(name), runtime_tags(name)
    if not tags:
        raise UsageError(f"{name!r} is a release, not a runtime", hint=f"a runtime is {SYNTAX}")
    reason = unsafe_reason(name, "runtime name")
    if reason:
        raise UsageError(reason, hint=f"a runtime is {SYNTAX}")
    fields: dict = {}
    switches: list[str] = []
    for tag in tags:
        python, numpy = _PYTHON.match(tag), _NUMPY.match(tag)
        key, m = ("python", python) if python else ("numpy", numpy)
        if m is not None:
            if key in fields:
                raise UsageError(f"runtime {name!r} names {key} twice", hint=f"a runtime is {SYNTAX}")
            fields[key] = m.group(1)
        elif tag in FLAVOURS:
            if "flavour" in fields:
                raise UsageError(f"runtime {name!r} names two build flavours", hint="pick one of: mkl, native")
            fields["flavour"] = tag
        elif _SWITCH.match(tag):
            switches.append(tag)
        else:
            raise UsageError(f"runtime {name!r}: {tag!r} is not a tag the kit knows", hint=f"a runtime is {SYNTAX}")
    return Runtime(name=name, release=release, switches=tuple(switches), **fields)


def flavour_version(runtime: Runtime) -> str:
    """The version of the flavour's distribution that ships ``runtime``'s release (``1.7.0.post2+native`` is
    ``mxnet-native==1.7.0``); a usage error listing the releases the flavour exists for."""
    package, _, published = FLAVOURS[runtime.flavour]
    if runtime.release in published:
        return runtime.release
    same = [v for v in published if base_version(v) == base_version(runtime.release)]
    if same:
        return same[-1]
    raise UsageError(
        f"{package} was never published for MXNet {runtime.release}: runtime {runtime.name!r} does not exist",
        hint=f"{package} exists for " + ", ".join(published),
    )


def release_for(name: str) -> Release:
    """The buildable :class:`Release` of runtime ``name``: its release's table entry with the tags applied."""
    runtime = parse(name)
    if runtime.release not in releases.RELEASES:
        raise UsageError(
            f"runtime {name!r}: {runtime.release!r} is not a release in the table",
            hint="a runtime changes what runs under a table release: " + ", ".join(releases.known_names()),
        )
    canonical = releases.RELEASES[runtime.release]
    mxnet = f"mxnet=={runtime.release}"
    if runtime.flavour:
        mxnet = f"{FLAVOURS[runtime.flavour][0]}=={flavour_version(runtime)}"
    numpy = [r for r in canonical.requirements if r.startswith("numpy")]
    overrides: tuple[str, ...] = ()
    if runtime.numpy:
        numpy = [f"numpy=={runtime.numpy}"]
        overrides = (f"numpy=={runtime.numpy}",)  # past the release's own numpy pin, as users install it
    quirks = (f"runtime of {runtime.release}: {runtime.describe()}",)
    return dataclasses.replace(
        canonical,
        name=name,
        python=runtime.python or canonical.python,
        requirements=(mxnet, *numpy),
        quirks=quirks,
        fallback=None,
        source="runtime",
        canonical=runtime.release,
        switches=runtime.switches,
        overrides=overrides,
    )


def check_installable(release: Release, uv: str, *, timeout: float = 300) -> None:
    """Refuse, before any work, a runtime whose packages have no wheels for its Python (numpy 1.23.5 on
    Python 3.12): uv resolves its requirements for that Python and Linux x86_64, wheels only."""
    with tempfile.TemporaryDirectory(prefix="mxcompat-runtime-") as tmp:
        reqs, over = Path(tmp, "requirements.txt"), Path(tmp, "overrides.txt")
        reqs.write_text("\n".join(release.requirements) + "\n")
        over.write_text("\n".join(release.overrides) + "\n")
        argv = [uv, "pip", "compile", str(reqs), "--override", str(over), "--python-version", release.python]
        argv += ["--python-platform", "x86_64-manylinux_2_28", "--only-binary", ":all:", "--no-header", "--quiet"]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=uv_env())
        except subprocess.TimeoutExpired:
            raise UsageError(
                f"could not check within {timeout:.0f}s whether runtime {release.name!r} exists",
                hint="the package index did not answer; try again",
            ) from None
    if proc.returncode == 0:
        return
    if "No solution found" not in proc.stderr:  # the index, the network or uv itself: not an answer
        tail = "\n".join(proc.stderr.strip().splitlines()[-4:]) or f"exit {proc.returncode}"
        raise UsageError(
            f"could not check whether runtime {release.name!r} exists: uv failed:\n{tail}",
            hint="the package index must be reachable (uv's own settings apply); try again",
        )
    why = [line.strip() for line in proc.stderr.splitlines() if line.strip().startswith(("cause:", "╰─▶"))]
    raise UsageError(
        f"runtime {release.name!r} does not exist on Python {release.python}: "
        + (" ".join(why) or proc.stderr.strip().splitlines()[-1]),
        hint="pick a numpy with wheels for that Python (numpy1.26.4 on 3.12, numpy2.1.3 on 3.13), or another Python",
    )
