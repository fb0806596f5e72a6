"""A runtime remedy applied in a kit environment before ``import mxnet``: the NumPy names MXNet reads that the
installed NumPy removed, given back, and the runtime's ``MXNET_*`` switches set.

The names are found by trying (:mod:`kit.kernel.entry.runtime_check`), never from a hand list; what each becomes
is read from NumPy's own error (:mod:`kit.common.numpy_names`). The environment's ``mxcompat-runtime.pth``
runs :func:`apply` at interpreter start with what the build recorded in ``<env>/mxcompat-runtime.json``.
"""

import json
import os
import sys

from kit.common.numpy_names import FINANCIAL, REMOVED, SORT_AXIS_0
from kit.common.versions import RUNTIME_CONFIG

SWITCH = "MXCOMPAT_RUNTIME_FIX"


def resolve(np, name, expression):
    """The object ``expression`` (from :func:`equivalent_for`) names, with ``np`` the numpy module."""
    if expression.startswith("builtins."):
        import builtins

        return getattr(builtins, expression.split(".", 1)[1])
    if expression == SORT_AXIS_0:
        return lambda a: np.sort(a, axis=0)
    if expression == REMOVED:
        return _removed(name)
    negative = expression.startswith("-")
    text = expression.lstrip("-")
    if text.startswith("np."):
        value = np
        for part in text.split(".")[1:]:
            value = getattr(value, part)
    else:
        value = float(text)
    return -value if negative else value


def _removed(name):
    def removed(*args, **kwargs):
        raise NotImplementedError(
            "np.%s was removed from NumPy%s; the kit gave the name back only so that MXNet imports"
            % (name, " (use numpy_financial)" if name in FINANCIAL else "")
        )

    removed.__name__ = name
    return removed


def give_back(aliases):
    """Set every ``{name: expression}`` on numpy that numpy lacks; the names it set."""
    import numpy as np

    given = []
    for name, expression in sorted(aliases.items()):
        if name in np.__dict__:
            continue
        setattr(np, name, resolve(np, name, expression))
        given.append(name)
    _fault_injection()
    return given


def config(prefix=None):
    """What this environment's build recorded (``{"aliases": {...}}``), or None."""
    try:
        with open(os.path.join(prefix or sys.prefix, RUNTIME_CONFIG)) as f:
            return json.load(f)
    except (IOError, OSError, ValueError):
        return None


def apply():
    """Set the runtime's ``MXNET_*`` switches (where the process has not set them itself) and give back the
    names its build found, unless ``MXCOMPAT_RUNTIME_FIX=off``; the names given back."""
    recorded = config()
    if not recorded:
        return []
    for switch in recorded.get("switches") or ():
        name, _, value = switch.partition("=")
        os.environ.setdefault(name, value)
    if os.environ.get(SWITCH) == "off" or not recorded.get("aliases"):
        return []
    return give_back(recorded["aliases"])


def _fault_injection():
    """``MXCOMPAT_FAULT=skew:runtime-fix`` makes the remedy change MXNet's numbers (every FullyConnected adds
    1e-2), for the tests that prove a remedy which imports but changes outputs is reported as failing."""
    if os.environ.get("MXCOMPAT_FAULT") != "skew:runtime-fix" or any(
        type(f).__name__ == "_Skew" for f in sys.meta_path
    ):
        return

    class _Skew(object):
        def find_spec(self, fullname, path=None, target=None):
            if fullname != "mxnet":
                return None
            sys.meta_path.remove(self)
            import importlib.util

            spec = importlib.util.find_spec(fullname)
            run_module = spec.loader.exec_module

            def exec_module(module):
                run_module(module)
                original = module.nd.FullyConnected
                module.nd.FullyConnected = lambda *a, **k: original(*a, **k) + 1e-2

            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, _Skew())
