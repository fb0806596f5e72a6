"""The fingerprint of the environment code runs in: what a result depends on."""

import json
import os
import platform
import sys

from kit.kernel.runtime import fix as runtime_fix_module

ENV_MARKER = "mxcompat-env.json"  # written by the host side as the last step of an environment build

_CPU_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512_vnni", "amx_tile")
_ENV_PREFIXES = ("MXNET_", "OMP_", "KMP_", "OPENBLAS_", "MKL_", "MKLDNN_", "DNNL_")


def cpu_info(cpuinfo_path="/proc/cpuinfo"):
    """CPU model and the SIMD flags that change which kernels MXNet and BLAS run."""
    model, flags = platform.processor() or platform.machine(), set()
    try:
        with open(cpuinfo_path) as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name":
                    model = value.strip()
                elif key == "flags":
                    flags = set(value.split())
                    break
    except (IOError, OSError):
        pass
    return {"model": model, "flags": [f for f in _CPU_FLAGS if f in flags], "count": os.cpu_count()}


def mxnet_features():
    """Enabled build features (MKLDNN, OPENMP, BLAS...) where the release can report them (1.5+)."""
    try:
        from mxnet import runtime
    except ImportError:
        return None
    return sorted(name for name, feature in runtime.Features().items() if feature.enabled)


def kit_env(prefix=None):
    """What the kit recorded when it built this environment (release, fallback), or None outside one."""
    try:
        with open(os.path.join(prefix or sys.prefix, ENV_MARKER)) as f:
            marker = json.load(f)
    except (IOError, OSError, ValueError):
        return None
    return {
        "release": marker.get("release", {}).get("name"),
        "fallback": bool(marker.get("fallback")),
        "interpreter_source": marker.get("interpreter", {}).get("source"),
    }


def runtime_fix(prefix=None):
    """What a runtime's remedy gives back and sets in this environment (``{"aliases": [names], "switches"}``),
    or None where no runtime remedy is recorded."""
    recorded = runtime_fix_module.config(prefix)
    if recorded is None:
        return None
    return {"aliases": sorted(recorded.get("aliases") or {}), "switches": list(recorded.get("switches") or [])}


def fingerprint(release=None):
    """A JSON-able description of this interpreter, numpy, MXNet and machine.

    ``release`` is the name the kit knows this environment by (1.7.0.post2), which
    ``mx.__version__`` (1.7.0) cannot tell apart from another post release.
    """
    import numpy as np

    info = {
        "release": release,
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "executable": sys.executable,
        "numpy": np.__version__,
        "platform": platform.platform(),
        "cpu": cpu_info(),
        "env": dict((k, v) for k, v in sorted(os.environ.items()) if k.startswith(_ENV_PREFIXES)),
        "kit_env": kit_env(),
        "runtime_fix": runtime_fix(),
    }
    try:
        import mxnet as mx
    except Exception as e:  # recorded, not raised (np.bool on NumPy 1.24+ is an AttributeError): the caller decides
        info["mxnet"] = None
        info["mxnet_error"] = "%s: %s" % (type(e).__name__, e)
        return info
    info["mxnet"] = mx.__version__
    info["mxnet_path"] = os.path.dirname(mx.__file__)
    info["mxnet_features"] = mxnet_features()
    return info
