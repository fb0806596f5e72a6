"""System shared libraries MXNet's wheels load but do not ship."""

from __future__ import annotations

import ctypes

from kit.common.errors import MissingSystemLibraryError

# library -> (soname to load, Debian/Ubuntu package, Fedora/RHEL package)
LIBRARIES = {
    "libgomp": ("libgomp.so.1", "libgomp1", "libgomp"),
    "libquadmath": ("libquadmath.so.0", "libquadmath0", "libquadmath"),
}


def is_loadable(soname: str) -> bool:
    try:
        ctypes.CDLL(soname)
    except OSError:
        return False
    return True


def missing(libs, libraries: dict = LIBRARIES) -> list[str]:
    """The names in ``libs`` whose shared object cannot be loaded."""
    return [lib for lib in libs if not is_loadable(libraries[lib][0])]


def require(libs, *, needed_by: str, libraries: dict = LIBRARIES) -> None:
    """Raise a clear error naming the system package when any of ``libs`` is missing."""
    absent = missing(libs, libraries)
    if not absent:
        return
    debian = " ".join(libraries[lib][1] for lib in absent)
    fedora = " ".join(libraries[lib][2] for lib in absent)
    names = ", ".join(libraries[lib][0] for lib in absent)
    raise MissingSystemLibraryError(
        f"MXNet {needed_by} needs {names}, which this machine does not have",
        hint=f"install the system package: `apt-get install {debian}` (Debian/Ubuntu) "
        f"or `dnf install {fedora}` (Fedora/RHEL)",
    )
