import os

import mxnet as mx

from kit.common.errors import KitError
from kit.common.versions import RELEASE_VERSION_VARIABLE
from kit.kernel.entry import train_run


def _check(release, variable=None):
    saved = os.environ.pop(RELEASE_VERSION_VARIABLE, None)
    if variable is not None:
        os.environ[RELEASE_VERSION_VARIABLE] = variable
    try:
        train_run.check_kernel(release)
        return None
    except KitError as e:
        return str(e)
    finally:
        os.environ.pop(RELEASE_VERSION_VARIABLE, None)
        if saved is not None:
            os.environ[RELEASE_VERSION_VARIABLE] = saved


def test_a_custom_release_is_checked_against_the_version_its_kernel_says():
    assert _check("0.0.1") is not None and "this kernel runs MXNet %s" % mx.__version__ in _check("0.0.1")
    assert _check("9.9.9rc0", variable=mx.__version__) is None  # the release's wheel under another name
    assert "0.0.1" in _check("9.9.9rc0", variable="0.0.1")
    assert _check("my-build", variable="") is None  # version unknown: nothing to compare
    assert _check("my-build") is None  # a name that is no version, from a kernel registered before the variable
