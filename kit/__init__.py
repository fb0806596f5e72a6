"""mxnet-compat-kit: does a model saved by one MXNet release load, and infer the same, on another?

This module is imported inside every MXNet kernel too (down to Python 3.6), so it
stays free of host-side imports.
"""

from kit.common.errors import KitError

__version__ = "0.1.0"
__all__ = ["KitError", "__version__"]
