"""One normalizing function for MXNet release strings.

``mx.__version__`` drops the ``.postN`` suffix (1.7.0.post2 reports ``1.7.0``), so
releases are compared through :func:`release_key` and artifacts are keyed by the
release name the kit was asked for, never by ``__version__`` alone.
"""

import re

_RELEASE = re.compile(
    r"^\s*v?(?P<nums>\d+(?:\.\d+)*)"
    r"(?:[._-]?(?P<pre>a|b|rc|alpha|beta)[._-]?(?P<prenum>\d*))?"
    r"(?:[._-]?post[._-]?(?P<post>\d*))?"
    r"(?:[._-]?dev[._-]?(?P<dev>\d*))?"
    r"\s*$"
)
_PRE_ORDER = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "rc": 2}

#: releases whose ``mx.__version__`` is not their name with the post suffix dropped (measured on the wheels)
REPORTS = {"2.0.0a0": "2.0.0"}


#: joins a release and what changes under it into a runtime's name: ``1.9.1+py3.12+numpy1.26.4``
RUNTIME_SEPARATOR = "+"


def release_of(name):
    """The release a runtime name runs (``1.9.1+py3.12`` gives ``1.9.1``); a release name is its own."""
    return str(name).split(RUNTIME_SEPARATOR, 1)[0]


def runtime_tags(name):
    """What a runtime name changes under its release, in the order written (``("py3.12", "numpy1.26.4")``);
    ``()`` for a release's canonical environment."""
    parts = str(name).split(RUNTIME_SEPARATOR)
    return tuple(parts[1:])


def is_runtime(name):
    """True for a runtime name (a release with tags), False for a release's own name."""
    return RUNTIME_SEPARATOR in str(name)


def parse_release(text):
    """Parse a release string into a comparable tuple.

    The tuple is ``(numbers, pre, post)``: numbers padded to three parts, ``pre``
    a pair that sorts release candidates before the final release, ``post`` the
    post-release ``(1, n)``, ``(0, 0)`` when absent (so 1.1.0 < 1.1.0.post0). A runtime's tags
    (``1.9.1+py3.12+numpy1.26.4``) do not change its place: it is its release's. Raises ValueError on anything else.
    """
    m = _RELEASE.match(release_of(text))
    if not m:
        raise ValueError("not an MXNet release string: %r" % (text,))
    nums = tuple(int(p) for p in m.group("nums").split("."))
    nums = (nums + (0, 0, 0))[: max(3, len(nums))]
    if m.group("pre"):
        pre = (_PRE_ORDER[m.group("pre")], int(m.group("prenum") or 0))
    elif m.group("dev") is not None:
        pre = (-1, int(m.group("dev") or 0))
    else:
        pre = (3, 0)
    post = (1, int(m.group("post") or 0)) if m.group("post") is not None else (0, 0)  # 1.1.0 < 1.1.0.post0
    return (nums, pre, post)


def release_key(text):
    """Sort key of a release string (1.0.0.post4 < 1.1.0rc1 < 1.1.0 < 1.1.0.post0)."""
    return parse_release(text)


def base_version(text):
    """The release without its post suffix, as ``mx.__version__`` reports it."""
    nums, pre, _ = parse_release(text)
    base = ".".join(str(n) for n in nums)
    if pre[0] in (0, 1, 2):
        base += ("a", "b", "rc")[pre[0]] + str(pre[1])
    return base


#: set in a custom release's kernel: the ``mx.__version__`` it must report (empty: unknown)
RELEASE_VERSION_VARIABLE = "MXCOMPAT_RELEASE_VERSION"

#: in a runtime environment's root: the ``MXNET_*`` switches and NumPy names its interpreter applies at start
RUNTIME_CONFIG = "mxcompat-runtime.json"


def same_release(asked, reported):
    """True when ``reported`` (an ``mx.__version__``) is the release ``asked`` names.

    A reported version carries no post suffix, so only the numbers and any
    pre-release tag are compared; 2.0.0a0 reports ``2.0.0`` and 2.0.0b1 ``2.0.0beta1`` (:data:`REPORTS`).
    """
    return base_version(REPORTS.get(asked, asked)) == base_version(reported)


def at_least(release, minimum):
    """True when ``release`` is ``minimum`` or newer, ignoring post suffixes."""
    nums, pre, _ = parse_release(release)
    mnums, mpre, _ = parse_release(minimum)
    return (nums, pre) >= (mnums, mpre)


#: the direction of a cell whose two sides run the same release in different runtimes
RUNTIME_DIRECTION = "runtime"


def direction(saved, loaded):
    """``backward`` (an artifact of an older release loaded in a newer one), ``same``, ``forward``,
    ``runtime`` (the same release, saved or loaded in another runtime: ``1.9.1`` in ``1.9.1+py3.12``), or
    ``unknown`` when either is a custom name (``rc-build``) that has no place in release order."""
    try:
        a, b = release_key(saved), release_key(loaded)
    except ValueError:
        return "unknown"
    if a == b:
        return "same" if runtime_tags(saved) == runtime_tags(loaded) else RUNTIME_DIRECTION
    return "backward" if a < b else "forward"


def sort_key(name):
    """Sort key for a release name that may be a custom one (``rc-build``): table releases in release
    order first, then custom names alphabetically."""
    try:
        return (0, release_key(name), name)
    except ValueError:
        return (1, ((), (), (0, 0)), name)
