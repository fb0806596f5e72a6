"""Runs a remedy's user code as a reader would copy it, inside an MXNet environment, and prints how far the
result is from the saving release's reference: ``python remedy_code_runner.py ARTIFACT RECORD.json``.

The snippet runs in a copy of the artifact's folder (its file names are relative) with ``x`` (the
held-out reference input) and ``net`` (the model's code in this release, initialized and called once)
defined, as its comments ask. It ends with ``out`` (graph snippets) or leaves ``net`` loaded.
Prints one JSON line: ``{"max_abs": ..., "scale": ...}`` (``scale``: the reference's largest magnitude, what
``max_abs`` is to be judged against: a trained model's outputs have no fixed size).
"""

import json
import os
import shutil
import sys
import tempfile

import numpy as np


def main():
    folder, record_path = sys.argv[1], sys.argv[2]
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import mxnet as mx

    from kit.common import artifacts
    from kit.kernel.models import zoo
    from kit.kernel.mx import mxapi

    mxapi.prepare_kernel()
    with open(record_path) as f:
        rec = json.load(f)
    manifest = artifacts.read_json(os.path.join(folder, artifacts.MANIFEST))
    case = artifacts.load_reference(os.path.join(folder, artifacts.REFERENCE))["batch"]
    x = case["input"][manifest["inputs"][0]["name"]]
    net = zoo.MODELS[rec["model"]].build(rec["loaded_with"], manifest.get("variant"))
    net.initialize()
    net(mxapi.array(x))
    work = tempfile.mkdtemp()
    for name in os.listdir(folder):
        if os.path.isfile(os.path.join(folder, name)):
            shutil.copy(os.path.join(folder, name), work)
    os.chdir(work)
    scope = {"x": x, "net": net, "mx": mx}
    exec(rec["remedy"]["user_code"], scope)
    if "out" in scope:
        got = scope["out"]
    else:
        mxapi.prepare_kernel()  # the snippet may have switched semantics off
        got = scope["net"](mxapi.array(x))
    got = got.asnumpy() if hasattr(got, "asnumpy") else np.asarray(got)
    expected = case["output"][0]
    print(json.dumps({"max_abs": float(np.abs(got - expected).max()), "scale": float(np.abs(expected).max())}))


if __name__ == "__main__":
    main()
