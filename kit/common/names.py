"""What a name the kit puts into a path (release, model, API, environment, run, a file of an artifact) may look
like, checked before any path is built from it."""

import re

#: letters, digits, '.', '_', '+', '=' and '-', starting with a letter or digit: safe as a path component
#: (a runtime's name carries '+' and an ``MXNET_*`` switch's '=': ``1.9.1+MXNET_MKLDNN_ENABLED=0``).
#: ``\Z``, not ``$``: ``$`` also matches before a trailing newline.
SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+=-]*\Z")


def is_safe_name(name):
    """``name`` is one safe path component (not ``..``, no separator, no trailing newline)."""
    return isinstance(name, str) and SAFE_NAME.match(name) is not None


def is_safe_relative(path):
    """``path`` is relative and made of safe components only (``a/b.json``; not ``../x``, ``/x``, ``a//b``)."""
    return isinstance(path, str) and bool(path) and all(is_safe_name(p) for p in path.split("/"))


def unsafe_reason(name, what="name"):
    """Why ``name`` cannot become a path component (None when it can): for the messages that refuse it."""
    if is_safe_name(name):
        return None
    return "%s %r is not a plain name (letters, digits, '.', '_', '+', '=', '-'; starting with a letter or digit)" % (
        what,
        name,
    )
