import pytest

from kit.common.errors import MissingSystemLibraryError
from kit.envs import syslibs


def test_real_libraries_are_present():
    assert syslibs.missing(["libgomp", "libquadmath"]) == []
    syslibs.require(["libgomp", "libquadmath"], needed_by="1.9.1")


def test_missing_library_names_the_package():
    libraries = dict(syslibs.LIBRARIES, libgomp=("libgomp-does-not-exist.so.9", "libgomp1", "libgomp"))
    assert syslibs.missing(["libgomp", "libquadmath"], libraries) == ["libgomp"]
    with pytest.raises(MissingSystemLibraryError) as e:
        syslibs.require(["libgomp"], needed_by="1.9.1", libraries=libraries)
    text = str(e.value)
    assert "MXNet 1.9.1 needs libgomp-does-not-exist.so.9" in text
    assert "apt-get install libgomp1" in text and "dnf install libgomp" in text
