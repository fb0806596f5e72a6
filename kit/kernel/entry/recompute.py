"""``python -m kit.kernel.entry.recompute REQUEST.json`` (``{"folder", "out", "release"}``): an artifact's internals,
computed on demand.

Run in the saving release's environment for an artifact whose internals were not
recorded at train time (an older artifact, or a checkpoint the kit did not train).
"""

import os
import sys

from kit.common import artifacts
from kit.common.main_protocol import serve
from kit.kernel.models import zoo
from kit.kernel.mx import internals, mxapi
from kit.kernel.saving import adapters


def recompute(request):
    """Write the internals of the artifact ``request["folder"]`` to ``request["out"]``; ``{"out"}``."""
    folder, out, release = request["folder"], request["out"], request["release"]
    mxapi.prepare_kernel()
    manifest = artifacts.verified_manifest(folder, "nothing was computed")
    ref = artifacts.load_reference(os.path.join(folder, artifacts.REFERENCE))
    spec, adapter = zoo.get(manifest["model"]), adapters.get(manifest["api"])
    single = any(i["kind"] == "pixels_single" for i in manifest["inputs"])
    inputs = internals.first_samples(ref["batch"]["input"], single, spec.internals_samples)
    sym, arg, aux = adapter.load_graph(spec, release, folder, manifest)
    internals.save(out, inputs, internals.evaluate(sym, arg, aux, inputs))
    return {"out": out}


if __name__ == "__main__":
    sys.exit(serve(recompute))
