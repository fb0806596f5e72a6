"""The environments of the ONNX load path: an MXNet release with its exporter's onnx pins, and ONNX Runtime.

They cannot be one environment: onnxruntime's wheels need numpy >= 1.24, MXNet 1.x needs numpy < 1.24. That is
how a model leaves MXNet anyway: exported where MXNet lives, run where it does not.

Measured on Linux x86_64 (CPU wheels from PyPI), Python 3.11 unless said:

- 1.9.1 (``mx.onnx.export_model``) with onnx 1.14.1 / protobuf 3.20.3: LeNet, MLP, ResNet-BN export and run;
  LSTM and Embedding graphs fail the exporter's own check ("Unrecognized attribute: axes for operator
  ReduceMean"): it stamps onnx 1.14's newest opset (19) though its converters write opset 13, which the
  ``onnx_opset_13`` remedy pins. onnx 1.13.1 behaves the same (opset 18); onnx 1.12.0 (opset 17, all models
  export) has no wheel for Python 3.11; onnx >= 1.19 removed ``onnx.mapping``, which the exporter imports.
- 1.5.1 and 1.7.0.post2 (``mx.contrib.onnx.export_model``) with onnx 1.14.1: LeNet and MLP; BatchNorm fails
  ("Unrecognized attribute: spatial"), RNNs and Embedding have no converter (SwapAxis, Embedding).
- 1.4.1 on Python 3.7 with onnx 1.5.0 / protobuf 3.20.3 (a newer protobuf breaks ``import mxnet`` itself, whose
  contrib package imports onnx): LeNet and MLP as 1.5.1.
- ONNX Runtime 1.32.0 with numpy 1.26.4 (numpy 2.4 gives the same results).
"""

from __future__ import annotations

from dataclasses import replace

from kit.common.capabilities import EXIT_RUNTIMES, ONNX_API
from kit.common.errors import UsageError
from kit.envs import releases
from kit.envs.releases import Release

#: the ONNX Runtime environment's name (and the ``mxcompat env create`` argument that builds it)
RUNTIME_NAME = EXIT_RUNTIMES[ONNX_API]


def _runtime(name: str, requirements: tuple[str, ...], quirk: str) -> Release:
    return Release(
        name=name,
        python="3.11",
        requirements=requirements,
        expected_version=None,
        system_libs=(),
        quirks=("no MXNet: " + quirk,),
        kind=name,
    )


#: the environment of each exit's runtime (the worker ``kit.kernel.exits.runtime_worker`` runs in it), by name
RUNTIMES = {
    "onnxruntime": _runtime(
        "onnxruntime",
        ("onnxruntime==1.32.0", "numpy==1.26.4"),
        "onnxruntime's wheels need numpy >= 1.24, MXNet 1.x needs numpy < 1.24",
    ),
    "openvino": _runtime(
        "openvino",
        ("openvino==2026.4.1", "numpy==1.26.4"),
        "OpenVINO's MXNet frontend was removed in 2024; it reads the ONNX file",
    ),
    # torch from PyPI brings its CUDA libraries (a 5 GB environment): built when asked for, never unasked
    "torch": _runtime(
        "torch",
        ("torch==2.15.0", "torchvision==0.29.2", "onnx2torch==1.5.15", "onnx==1.23.2", "numpy==1.26.4"),
        "torch needs numpy >= 1.22 and onnx >= 1.16 (onnx2torch), MXNet 1.9's exporter onnx 1.14",
    ),
}
assert set(RUNTIMES) == set(EXIT_RUNTIMES.values())
RUNTIME = RUNTIMES[RUNTIME_NAME]

#: release -> the exporter's packages, installed beside that release's own pins (measured, see above)
EXPORTER_PINS = {
    "1.4.1": ("onnx==1.5.0", "protobuf==3.20.3"),
    "1.5.1": ("onnx==1.14.1", "protobuf==3.20.3"),
    "1.7.0.post2": ("onnx==1.14.1", "protobuf==3.20.3"),
    "1.9.1": ("onnx==1.14.1", "protobuf==3.20.3"),
}
#: the exporter ``--load onnx`` means: the newest 1.x, whose exporter is the most complete
DEFAULT_EXPORTER = "1.9.1"
PREFIX = ONNX_API + "-"


def env_name(release: str) -> str:
    """The exporter environment of ``release`` (``onnx-1.9.1``): a load target of its own."""
    return PREFIX + release


def exporter_of(name: str) -> str | None:
    """The exporting release a load target names: an exit (``onnx``, ``openvino``, ``torch``: the default
    exporter's) or ``onnx-RELEASE``; None for any other."""
    if name in EXIT_RUNTIMES:
        return DEFAULT_EXPORTER
    if name.startswith(PREFIX):
        return name[len(PREFIX) :]
    return None


def target(name: str) -> str:
    """``name`` as an exporter environment's name (``onnx`` -> ``onnx-1.9.1``); other names unchanged."""
    release = exporter_of(name)
    return env_name(release) if release else name


def exporter(release: str) -> Release:
    """The environment that exports ``release``'s graphs: the release's own pins plus its exporter's."""
    if release not in EXPORTER_PINS:
        raise UsageError(
            f"no measured ONNX exporter for MXNet {release}",
            hint="exporters: "
            + ", ".join(env_name(r) for r in EXPORTER_PINS)
            + f" (`--load onnx` is {DEFAULT_EXPORTER})",
        )
    base = releases.get(release)
    return replace(
        base,
        name=env_name(release),
        requirements=base.requirements + EXPORTER_PINS[release],
        quirks=base.quirks + (f"ONNX exporter: {' '.join(EXPORTER_PINS[release])}",),
        fallback=None,
        kind="onnx-exporter",
    )


def exit_of(name: str) -> str | None:
    """The exit a load name asks for: ``onnx``, ``openvino``, ``torch``; ``onnx`` for ``onnx-RELEASE``."""
    if name in EXIT_RUNTIMES:
        return name
    return ONNX_API if exporter_of(name) else None


def find(name: str) -> Release | None:
    """The exit path's environment called ``name`` (a runtime's: ``onnxruntime``, ``openvino``, ``torch``; an
    exporter's: ``onnx-RELEASE``, or ``onnx`` for the default one), else None. ``openvino`` and ``torch`` name
    their runtime's environment: their exporter is ``onnx``'s."""
    if name in RUNTIMES:
        return RUNTIMES[name]
    release = exporter_of(name)
    return exporter(release) if release else None


def environments(name: str) -> list[Release]:
    """What ``mxcompat env create NAME`` builds for a name of the exit path: an exporter with ONNX Runtime
    (``onnx``, ``onnx-RELEASE``), a runtime with the default exporter (``openvino``, ``torch``), a runtime alone
    (``onnxruntime``)."""
    found = find(name)
    if found is None:
        return []
    if name in RUNTIMES:
        return [found] if name == RUNTIME_NAME else [exporter(DEFAULT_EXPORTER), found]
    return [found, RUNTIME]


def runtime_python(home, exit_api: str):
    """The Python of ``exit_api``'s runtime environment in the kit home ``home``."""
    return home.env_dir(EXIT_RUNTIMES[exit_api]) / "bin" / "python"
