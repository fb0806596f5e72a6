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

from kit.common.capabilities import ONNX_API
from kit.common.errors import UsageError
from kit.envs import releases
from kit.envs.releases import Release

#: the ONNX Runtime environment's name (and the ``mxcompat env create`` argument that builds it)
RUNTIME_NAME = "onnxruntime"
RUNTIME = Release(
    name=RUNTIME_NAME,
    python="3.11",
    requirements=("onnxruntime==1.32.0", "numpy==1.26.4"),
    expected_version=None,
    system_libs=(),
    quirks=("no MXNet: onnxruntime's wheels need numpy >= 1.24, MXNet 1.x needs numpy < 1.24",),
    kind="onnxruntime",
)

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
    """The exporting release a load target names: ``onnx`` (the default) or ``onnx-RELEASE``; None for any other."""
    if name == ONNX_API:
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


def find(name: str) -> Release | None:
    """The ONNX path's environment called ``name`` (``onnxruntime``, ``onnx``, ``onnx-RELEASE``), else None."""
    if name == RUNTIME_NAME:
        return RUNTIME
    release = exporter_of(name)
    return exporter(release) if release else None


def environments(name: str) -> list[Release]:
    """What ``mxcompat env create NAME`` builds for a name of the ONNX path: an exporter with the runtime."""
    found = find(name)
    if found is None:
        return []
    return [found] if found is RUNTIME else [found, RUNTIME]
