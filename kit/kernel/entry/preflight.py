"""``python -m kit.kernel.entry.preflight REQUEST.json`` in an exporter's environment: the pre-flight of an
artifact's graph for the exits asked (``kit.kernel.exits.preflight``), each remedy it names with its title."""

import os

from kit.common import artifacts
from kit.common.main_protocol import serve
from kit.kernel.exits import onnx_export, preflight
from kit.kernel.mx import mxapi


def from_request(request):
    """``{"folder", "exits"}``: the artifact in ``folder`` (a check-model checkpoint or a zoo graph)."""
    from kit.kernel.remedies import attempts  # noqa: F401 - registers every remedy
    from kit.kernel.remedies.base import by_name

    mxapi.prepare_kernel()
    folder = request["folder"]
    manifest = artifacts.read_json(os.path.join(folder, artifacts.MANIFEST))
    symbol, params = onnx_export.files(manifest)
    shapes = dict((i["name"], onnx_export.input_shape(i, manifest)) for i in manifest["inputs"])
    found = preflight.check(
        os.path.join(folder, symbol), os.path.join(folder, params) if params else None, shapes, request["exits"]
    )
    found["titles"] = dict((name, by_name(name).title) for name in found["remedies"])
    return found


if __name__ == "__main__":
    import sys

    sys.exit(serve(from_request))
