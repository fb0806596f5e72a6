"""The release table: every MXNet release the kit supports (1.x and 2.0) and how to build it.

The Python, numpy pins and quirks below were measured on Linux x86_64 with the
CPU wheels from PyPI (see DESIGN.md). A user can add a release candidate or a
local build under a name of their choosing with :func:`custom_release`.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path

from kit.common import capabilities
from kit.common.errors import UnknownReleaseError, UsageError
from kit.common.names import SAFE_NAME
from kit.common.versions import at_least, parse_release, release_key
from kit.envs import kernelspecs


@dataclass(frozen=True)
class Fallback:
    """A documented way to run a release on the host Python when its own is absent.

    ``no_deps`` are installed with ``--no-deps``; ``requirements`` normally.
    """

    python: str
    no_deps: tuple[str, ...]
    requirements: tuple[str, ...]


@dataclass(frozen=True)
class Release:
    """One buildable MXNet: what to install, on which Python, and what to expect of it."""

    name: str
    python: str
    requirements: tuple[str, ...]
    expected_version: str | None
    system_libs: tuple[str, ...] = ("libgomp",)
    quirks: tuple[str, ...] = ()
    fallback: Fallback | None = None
    custom: bool = False
    source: str = "table"
    #: "mxnet"; "onnx-exporter" (an MXNet release with its ONNX exporter's pins); an exit runtime's name
    #: ("onnxruntime", "openvino", "torch": no MXNet, see kit.envs.onnx_path.RUNTIMES)
    kind: str = "mxnet"

    @property
    def has_mxnet(self) -> bool:
        return self.kind not in capabilities.EXIT_RUNTIMES.values()

    #: a runtime's (kit.envs.runtimes): the table release it runs, the MXNET_* switches its kernel sets
    #: ("NAME=VALUE") and the requirements installed past the release's own pins (uv overrides)
    canonical: str | None = None
    switches: tuple[str, ...] = ()
    overrides: tuple[str, ...] = ()

    @property
    def kernel_name(self) -> str:
        return kernelspecs.kernel_name(self.name)

    @property
    def is_runtime(self) -> bool:
        return self.canonical is not None

    @property
    def apis(self) -> tuple[str, ...]:
        """Save/load APIs this release has (all of them when its version is unknown)."""
        if self.expected_version is None:
            return capabilities.APIS
        return capabilities.apis_of(self.expected_version)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Release:
        data = dict(data)
        fb = data.get("fallback")
        data["fallback"] = Fallback(fb["python"], tuple(fb["no_deps"]), tuple(fb["requirements"])) if fb else None
        for key in ("requirements", "system_libs", "quirks", "switches", "overrides"):
            data[key] = tuple(data.get(key) or ())
        return cls(**data)


def ipykernel_for(python: str) -> str:
    """The ipykernel known to work with current papermill/nbclient on ``python``."""
    major_minor = tuple(int(p) for p in python.split(".")[:2])
    if major_minor <= (3, 6):
        return "ipykernel==5.5.6"
    if major_minor == (3, 7):
        return "ipykernel==6.16.2"
    if major_minor < (3, 10):
        return "ipykernel>=6.16,<7"
    return "ipykernel>=7,<8"


#: matplotlib and pandas for a kernel's Python, pinned to wheels that import beside the release table's numpy
#: (measured: 2.2.5/0.25.3 on 3.6 with numpy 1.13.3, 3.2.2/1.0.5 on 3.7 with 1.14.6, 3.9.4/2.2.3 on 3.11 with 1.23.5)
_DEBUGGING_LIBS = (
    ((3, 6), ("matplotlib==2.2.5", "pandas==0.25.3")),
    ((3, 7), ("matplotlib==3.2.2", "pandas==1.0.5")),
    ((3, 9), ("matplotlib==3.7.5", "pandas==2.0.3")),
    ((3, 13), ("matplotlib==3.9.4", "pandas==2.2.3")),
)


def debugging_libs_for(python: str) -> tuple[str, str] | None:
    """``(matplotlib pin, pandas pin)`` for a kernel on ``python``; None where the kit knows no wheels."""
    major_minor = tuple(int(p) for p in python.split(".")[:2])
    if major_minor < (3, 6):
        return None
    for newest, pins in _DEBUGGING_LIBS:
        if major_minor <= newest:
            return pins
    return None


def _table_release(name, python, numpy, quirks=(), fallback=True):
    libs = ("libgomp", "libquadmath") if at_least(name, "1.7.0") else ("libgomp",)
    fb = None
    if fallback:
        fb = Fallback("3.11", (f"mxnet=={name}",), ("numpy==1.23.5", "requests"))
    return Release(
        name=name,
        python=python,
        requirements=(f"mxnet=={name}", f"numpy=={numpy}"),
        expected_version=name,
        system_libs=libs,
        quirks=tuple(quirks),
        fallback=fb,
    )


_PY36_QUIRKS = (
    "no SymbolBlock.imports: exports reload through SymbolBlock(sym.load(...)) + load_params",
    "no Block.save_parameters",
)
_MKLDNN = "turns on the MKLDNN subgraph backend on the Module path"
_GLUON2 = (
    "Gluon 2.0: forward instead of hybrid_forward, no prefix=/name_scope(), structural parameter names; "
    "the zoo runs as its Gluon 2.0 port (kit/kernel/models/zoo_gluon2.py)",
    "no mx.mod and no save_params/load_params: 1.x Module checkpoints load through SymbolBlock.imports",
    "needs numpy<1.24 (np.bool)",
    "needs libquadmath",
)

RELEASES: dict[str, Release] = {
    r.name: r
    for r in (
        _table_release(
            "0.11.0",
            "3.6",
            "1.13.3",
            (
                "no HybridBlock.export: gluon models are saved with save_params and as Module checkpoints",
                "no SymbolBlock.imports, no gluon transforms, no model_zoo MobileNet",
                "Sequential.add takes one block",
                "0.12.0/0.12.1 are left out: their wheels need libgfortran.so.3 (GCC 6), which Debian 12 does not "
                "package (only libgfortran5)",
            ),
            fallback=False,
        ),
        _table_release("1.0.0.post4", "3.6", "1.13.3", _PY36_QUIRKS + ("no gluon data transforms",)),
        _table_release("1.1.0", "3.6", "1.13.3", _PY36_QUIRKS),
        _table_release(
            "1.2.1",
            "3.7",
            "1.14.6",
            (
                "SyntaxError on Python 3.8+: no host-Python fallback",
                "parameter-less exports reload only with param_file=None",
            ),
            fallback=False,
        ),
        _table_release("1.3.1", "3.7", "1.14.6", ("parameter-less exports reload only with param_file=None",)),
        _table_release("1.4.1", "3.7", "1.14.6", ("parameter-less exports reload only with param_file=None",)),
        _table_release("1.5.1", "3.11", "1.23.5", ("also runs on Python 3.12 with numpy 1.26.4",), fallback=False),
        _table_release("1.6.0", "3.11", "1.23.5", ("needs numpy<1.24 (np.bool)", "imports distutils"), fallback=False),
        _table_release(
            "1.7.0.post2",
            "3.11",
            "1.23.5",
            ("needs numpy<1.24 (np.bool)", "needs libquadmath", _MKLDNN, "mx.__version__ reports 1.7.0"),
            fallback=False,
        ),
        _table_release(
            "1.8.0.post0",
            "3.11",
            "1.23.5",
            ("needs numpy<1.24 (np.bool)", "needs libquadmath", _MKLDNN, "mx.__version__ reports 1.8.0"),
            fallback=False,
        ),
        _table_release(
            "1.9.1", "3.11", "1.23.5", ("needs numpy<1.24 (np.bool)", "needs libquadmath", _MKLDNN), fallback=False
        ),
        _table_release(
            "2.0.0a0",
            "3.11",
            "1.23.5",
            _GLUON2
            + (
                "mx.__version__ reports 2.0.0",
                "numpy semantics start off (the kit turns them on, as 2.0 scripts do)",
                "no SoftmaxOutput operator: 1.x graphs with a SoftmaxOutput head do not load",
            ),
            fallback=False,
        ),
        _table_release(
            "2.0.0b1",
            "3.11",
            "1.23.5",
            _GLUON2 + ("mx.__version__ reports 2.0.0beta1", "numpy semantics start on"),
            fallback=False,
        ),
    )
}


def known_names() -> list[str]:
    return sorted(RELEASES, key=release_key)


def get(name: str) -> Release:
    """The table's release called ``name``; an error listing the known ones otherwise."""
    try:
        return RELEASES[name]
    except KeyError:
        raise UnknownReleaseError(
            f"unknown MXNet release {name!r}",
            hint="known releases: "
            + ", ".join(known_names())
            + "; add a release candidate or local build with --name NAME --wheel PATH or --spec 'mxnet==X'",
        ) from None


def check_name(name: str) -> str:
    if not SAFE_NAME.match(name or ""):
        raise UsageError(
            f"invalid environment name {name!r}",
            hint="use letters, digits, '.', '_', '+', '=' and '-', starting with a letter or digit",
        )
    return name


def version_from_wheel(path: str | Path) -> str | None:
    """The version in a wheel's file name (``mxnet-1.9.1-py3-none-...whl`` gives ``1.9.1``)."""
    parts = Path(path).name.split("-")
    if len(parts) >= 5 and parts[-1].endswith(".whl"):
        try:
            parse_release(parts[1])
            return parts[1]
        except ValueError:
            return None
    return None


def version_from_spec(spec: str) -> str | None:
    """The version a pinned requirement names (``mxnet==1.9.1`` gives ``1.9.1``)."""
    m = re.match(r"^\s*[A-Za-z0-9_.-]+\s*===?\s*([^\s;,]+)\s*$", spec)
    if not m:
        return None
    try:
        parse_release(m.group(1))
        return m.group(1)
    except ValueError:
        return None


def custom_release(
    name: str,
    *,
    python: str,
    wheel: str | None = None,
    spec: str | None = None,
    pins: tuple[str, ...] = (),
    expected_version: str | None = None,
) -> Release:
    """A release the table does not know: a local wheel or any pip requirement."""
    check_name(name)
    if name in RELEASES:
        raise UsageError(
            f"{name!r} is a release in the table",
            hint="pick another --name for a custom build, or create the table's release without --wheel/--spec",
        )
    if bool(wheel) == bool(spec):
        raise UsageError("a custom release needs exactly one of --wheel PATH or --spec 'mxnet==X'")
    if not re.match(r"^3\.\d+$", python or ""):
        raise UsageError(f"--python-version must look like 3.11, got {python!r}")
    if wheel:
        wheel_path = Path(wheel).expanduser().resolve()
        if not wheel_path.is_file():
            raise UsageError(f"wheel not found: {wheel}")
        requirement = str(wheel_path)
        guessed = version_from_wheel(wheel_path)
    else:
        requirement = spec.strip()
        guessed = version_from_spec(requirement)
    pins = tuple(pins)
    if not any(p.replace(" ", "").lower().startswith("numpy") for p in pins):
        pins += ("numpy<1.24",)  # MXNet 1.6-1.9 fail to import with numpy >= 1.24 (np.bool)
    return Release(
        name=name,
        python=python,
        requirements=(requirement,) + pins,
        expected_version=expected_version or guessed,
        system_libs=("libgomp", "libquadmath"),
        quirks=("custom build",),
        custom=True,
        source="wheel" if wheel else "spec",
    )
