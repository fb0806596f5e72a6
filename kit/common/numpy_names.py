"""The NumPy names MXNet reads that NumPy removed: which one an import failed on, and what to give back.

Read from the error itself: NumPy 2 says what to use instead (``Use `np.float64` instead``), NumPy 1.24-1.26
name the builtin an alias stood for (``np.bool``); for the few NumPy removed without a word, :data:`UNADVISED`.
An equivalent is written as a short expression (``np.float64``, ``-np.inf``, ``0.0``, ``builtins.bool``,
:data:`SORT_AXIS_0`, :data:`REMOVED`) that ``kit.kernel.runtime.fix`` resolves in a kernel and
:func:`paste_lines` writes for a user.
"""

import re

REMOVED = "removed"  # an equivalent that raises when called, naming what replaces it
SORT_AXIS_0 = "sort-axis-0"  # np.msort(a) was np.sort(a, axis=0)

#: removed from NumPy with no advice in the error, and what they were
UNADVISED = {
    "NAN": "np.nan",
    "product": "np.prod",
    "cumproduct": "np.cumprod",
    "msort": SORT_AXIS_0,
}
#: NumPy 1.20 removed its financial functions (numpy_financial has them); MXNet only registers their names
FINANCIAL = ("fv", "ipmt", "irr", "mirr", "nper", "npv", "pmt", "ppmt", "pv", "rate")

_MISSING = (
    re.compile(r"`np\.(\w+)` was (?:removed|a deprecated alias)"),
    re.compile(r"module 'numpy' has no attribute '(\w+)'"),
)
_ADVICE = re.compile(r"Use `([^`]+)` instead")
_BUILTIN = re.compile(r"alias for the builtin `(\w+)`")
_SIMPLE = re.compile(r"^-?(np(\.[A-Za-z_]\w*)+|\d+(\.\d+)?)\Z")
_MODULE = re.compile(r"No module named '([\w.]+)'")


def missing_name(error_text):
    """The NumPy name an import failed on (``PZERO``), or None when the error is about something else."""
    for pattern in _MISSING:
        found = pattern.findall(error_text or "")
        if found:
            return found[-1]
    return None


def missing_module(error_text):
    """The module an import failed to find (``distutils``), or None."""
    found = _MODULE.findall(error_text or "")
    return found[-1].split(".")[0] if found else None


def equivalent_for(name, error_text):
    """What ``np.<name>`` should be given back as, written as :func:`resolve` reads it.

    NumPy's advice in the error comes first (``Use `np.float64` instead``), then the builtin an alias named,
    then :data:`UNADVISED`; a financial function or anything else becomes :data:`REMOVED`.
    """
    builtin = _BUILTIN.search(error_text or "")
    if builtin and "`np.%s`" % name in error_text:
        return "builtins." + builtin.group(1)
    for advice in _ADVICE.findall(error_text or ""):
        if "`np.%s` was" % name in error_text and _SIMPLE.match(advice):
            return advice
    return UNADVISED.get(name, REMOVED)


def paste_lines(aliases):
    """The lines a user puts before ``import mxnet`` to do what ``kit.kernel.runtime.fix.give_back`` does (the
    docstring's "does" is tested: the lines run in the runtime, without the kit's remedy, and MXNet imports)."""
    lines = ["import numpy as np"]
    removed = sorted(name for name, expression in aliases.items() if expression == REMOVED)
    if removed:  # one stand-in per name: MXNet keys its registry by the function
        lines += [
            "def _removed(name):  # removed from NumPy; MXNet only registers the name",
            "    def stand_in(*args, **kwargs):",
            '        raise NotImplementedError("np.%s was removed from NumPy" % name)',
            "    stand_in.__name__ = name",
            "    return stand_in",
        ]
    for name, expression in sorted(aliases.items()):
        if expression.startswith("builtins."):
            lines.append("np.%s = %s" % (name, expression.split(".", 1)[1]))
        elif expression == SORT_AXIS_0:
            lines.append("np.%s = lambda a: np.sort(a, axis=0)" % name)
        elif expression == REMOVED:
            lines.append('np.%s = _removed("%s")' % (name, name))
        else:
            lines.append("np.%s = %s" % (name, expression))
    return lines + ["import mxnet as mx"]
