"""Every internal node of a model's graph, evaluated: where in a model a difference starts.

``evaluate`` binds a symbol's internals (every non-variable output, in topological
order) and runs them on given inputs. ``record`` stores them for an artifact at
train time, on the first samples of the reference batch, so a later release's
nodes can be compared with what the saving release computed.
"""

import json
import os
import re
import sys
import zipfile
from collections import OrderedDict

import mxnet as mx
import numpy as np

from kit.common.capabilities import has_feature
from kit.kernel.mx import mxapi

INTERNALS = "internals.npz"
SAMPLES = 2
_OUTPUT_SUFFIX = re.compile(r"_output\d*$")


class GraphUnavailable(Exception):
    """The model cannot be traced to a symbol graph in this release (e.g. an imperative LSTM before 1.3)."""


def node_table(sym):
    """node name -> {"op", "attrs"} from the symbol's JSON (attribute key differs across releases)."""
    nodes = json.loads(sym.tojson())["nodes"]
    out = {}
    for n in nodes:
        attrs = n.get("attrs") or n.get("attr") or n.get("param") or {}
        out[n["name"]] = {"op": n["op"], "attrs": dict(attrs)}
    return out


def node_of(output_name):
    return _OUTPUT_SUFFIX.sub("", output_name)


def evaluate(sym, arg_params, aux_params, inputs):
    """OrderedDict output name -> numpy array for every operator output of ``sym`` on ``inputs``."""
    internals = sym.get_internals()
    variables = set(sym.list_arguments()) | set(sym.list_auxiliary_states())
    # by position: MXNet 0.11's model zoo gives several nodes one name; later ones are told apart by "#k"
    picked, names, seen = [], [], {}
    for i, name in enumerate(internals.list_outputs()):
        if name in variables:
            continue
        seen[name] = seen.get(name, 0) + 1
        picked.append(internals[i])
        names.append(name if seen[name] == 1 else "%s#%d" % (name, seen[name]))
    group = mx.sym.Group(picked)
    args = dict((k, mxapi.on_cpu(v)) for k, v in arg_params.items())
    for name, value in inputs.items():
        args[name] = mx.nd.array(value, dtype=value.dtype)
    batch = list(inputs.values())[0].shape[0] if list(inputs.values())[0].ndim else 1
    for name in group.list_arguments():
        if name not in args and name.endswith("_label"):  # a loss head's label: unused in inference
            args[name] = mx.nd.zeros((batch,))
    missing = [a for a in group.list_arguments() if a not in args]
    if missing:
        raise KeyError("no value for graph arguments: %s" % ", ".join(missing))
    args = dict((a, args[a]) for a in group.list_arguments())
    aux = dict((a, mxapi.on_cpu(aux_params[a])) for a in group.list_auxiliary_states())
    # node by node, unfused: MXNet 1.7+ would fuse conv+BN+relu into MKLDNN subgraphs (hiding the nodes),
    # and their partitioner rejects a group of internals
    saved = os.environ.get("MXNET_SUBGRAPH_BACKEND")
    if has_feature(mx.__version__, "subgraph_backend_none")[0]:  # 1.4/1.5 reject the value (and fuse nothing)
        os.environ["MXNET_SUBGRAPH_BACKEND"] = "NONE"
    try:
        exe = mxapi.bind(group, args, aux)
        outputs = exe.forward(is_train=False)
        return OrderedDict((n, o.asnumpy()) for n, o in zip(names, outputs))
    finally:
        if saved is None:
            os.environ.pop("MXNET_SUBGRAPH_BACKEND", None)
        else:
            os.environ["MXNET_SUBGRAPH_BACKEND"] = saved


def first_samples(inputs, single=False, samples=SAMPLES):
    """The first ``samples`` samples of each input (one image when the model takes one per call)."""
    return dict((k, v if single else v[:samples]) for k, v in inputs.items())


def save(path, inputs, nodes):
    """An ``.npz`` that ``np.load`` reads, deflated at level 1: relu outputs are mostly zeros, so big models'
    files still shrink a lot, in a fifth of savez_compressed's time (level 6). Python 3.6's zipfile has
    no level: there it is the default."""
    arrays = dict(("input.%s" % k, v) for k, v in inputs.items())
    arrays.update(("node.%s" % k, v) for k, v in nodes.items())
    arrays["order"] = np.array(list(nodes), dtype="U")
    level = {"compresslevel": 1} if sys.version_info >= (3, 7) else {}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, **level) as zf:
        for name, value in arrays.items():
            with zf.open(name + ".npy", "w") as f:
                np.lib.format.write_array(f, np.asanyarray(value), allow_pickle=False)


def load(path):
    """``(inputs, nodes)`` from an internals file; never unpickles."""
    with np.load(path, allow_pickle=False) as z:
        order = [str(n) for n in z["order"]]
        inputs = dict((k[len("input.") :], z[k]) for k in z.files if k.startswith("input."))
        nodes = OrderedDict((n, z["node." + n]) for n in order)
    return inputs, nodes


def record(adapter, spec, release, folder, manifest, batch_inputs):
    """Evaluate and store the internals of the artifact in ``folder`` as ``release`` loads it.

    Returns the manifest entry: ``{"file", "nodes", "samples"}`` or ``{"unavailable": reason}``.
    """
    single = any(i["kind"] == "pixels_single" for i in manifest["inputs"])
    samples = spec.internals_samples
    inputs = first_samples(batch_inputs, single, samples)
    try:
        sym, arg, aux = adapter.load_graph(spec, release, folder, manifest)
        nodes = evaluate(sym, arg, aux, inputs)
    except GraphUnavailable as e:
        return {"unavailable": str(e)}
    save(os.path.join(folder, INTERNALS), inputs, nodes)
    return {"file": INTERNALS, "nodes": len(nodes), "samples": 1 if single else samples}
