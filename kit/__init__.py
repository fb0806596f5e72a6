"""mxnet-compat-kit: does a model saved by one MXNet release load, and infer the same, on another?

This module is imported inside every MXNet kernel too (down to Python 3.6), so it
stays free of host-side imports.
"""

import sys

from kit.common.errors import KitError

# jsonschema 4.25+ imports rfc3987_syntax where it is installed (jupyter-events asks for it) to check "iri"
# formats, and that import compiles 39 grammars: 2 s in every process that imports nbformat (the CLI, each
# step's worker, papermill). No notebook or record the kit validates has an IRI: the import fails fast instead.
sys.modules.setdefault("rfc3987_syntax", None)

__version__ = "0.1.0"
__all__ = ["KitError", "__version__"]
