"""``python -m kit.kernel.recompute ARTIFACT_DIR OUT.npz RELEASE``: an artifact's internals, computed on demand.

Run in the saving release's environment for an artifact whose internals were not
recorded at train time (an older artifact, or a checkpoint the kit did not train).
"""

import os
import sys

from kit.common import artifacts
from kit.kernel import adapters, internals, mxapi, zoo


def main(argv=None):
    folder, out, release = (argv or sys.argv[1:])[:3]
    mxapi.prepare_kernel()
    manifest = artifacts.read_json(os.path.join(folder, artifacts.MANIFEST))
    ref = artifacts.load_reference(os.path.join(folder, artifacts.REFERENCE))
    spec, adapter = zoo.get(manifest["model"]), adapters.get(manifest["api"])
    single = any(i["kind"] == "pixels_single" for i in manifest["inputs"])
    inputs = internals.first_samples(ref["batch"]["input"], single, spec.internals_samples)
    sym, arg, aux = adapter.load_graph(spec, release, folder, manifest)
    internals.save(out, inputs, internals.evaluate(sym, arg, aux, inputs))
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
