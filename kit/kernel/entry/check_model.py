"""``mxcompat check-model``'s kernel side: a checkpoint the kit did not train, prepared as an artifact in the
reference release (:mod:`kit.kernel.saving.foreign`)."""

from kit.common.errors import KitError, UsageError
from kit.common.main_protocol import serve
from kit.kernel.mx import mxapi
from kit.kernel.saving import foreign


def from_request(request):
    """``python -m kit.kernel.entry.check_model REQUEST.json`` (``{"release", "folder", "spec"}``): prepare a staged
    checkpoint; answers its param version and output count (kit.common.main_protocol). A checkpoint that does
    not fit its declared inputs is exit 2 with ``{"error", "hint"}``: the user's input."""
    mxapi.prepare_kernel()
    spec = request["spec"]
    try:
        manifest = foreign.prepare(request["release"], request["folder"], spec, int(spec.get("seed", 0)))
    except KitError as e:
        raise UsageError(e.message, hint=e.hint)
    return {
        "param_version": manifest["param_version"],
        "outputs": len(manifest["reference"]["cases"]["batch"]["outputs"]),
    }


if __name__ == "__main__":
    import sys

    sys.exit(serve(from_request))
