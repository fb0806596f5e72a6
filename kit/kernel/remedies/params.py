"""Remedies that change parameter files: 1.x per-gate RNN weights to 2.0's flat ``rnn_param`` and back,
``save_params`` names mapped by structure, 2.0's npz files re-saved in MXNet's NDArray format."""

import re

import mxnet as mx
import numpy as np

from kit.common.capabilities import C_PREDICT_API, FOREIGN_API, GLUON2
from kit.kernel.mx import mxapi
from kit.kernel.remedies.base import PARAMETER_MAPPING, RESAVE, Refused, Remedy, register  # noqa: F401

#: a 1.x RNN layer's per-gate parameter names: structural (``_unfused``) or fused (``l0_i2h_weight``)
_UNFUSED = re.compile(
    r"^(?P<layer>.*?)\._unfused\.(?P<l>\d+)\.(?:(?P<d>[lr])_cell\.)?(?P<g>i2h|h2h|h2r)_(?P<t>weight|bias)$"
)
_FUSED = re.compile(r"^(?P<layer>.*?)(?P<d>[lr])(?P<l>\d+)_(?P<g>i2h|h2h|h2r)_(?P<t>weight|bias)$")


def fold_rnn_params(arrays, separator="."):
    """``(arrays, folded)``: ``arrays`` (name -> NDArray, in file order) with every 1.x RNN layer's per-gate
    parameters replaced by one flat ``<layer>.rnn_param`` at the first gate's place, in the fused RNN
    operator's order (weights before biases; then layers, directions, i2h before h2h)."""
    groups, order = {}, []
    for name in arrays:
        m = _UNFUSED.match(name) or _FUSED.match(name)
        if not m:
            order.append(name)
            continue
        key = m.group("layer").rstrip("._")
        if key not in groups:
            groups[key] = {}
            order.append((key,))
        if m.group("g") == "h2r":
            raise Refused("parameter %r is an LSTM projection (h2r): its place in rnn_param is not mapped" % name)
        groups[key][(m.group("t"), int(m.group("l")), m.group("d") or "l", m.group("g"))] = arrays[name]
    out, folded = [], []
    for item in order:
        if not isinstance(item, tuple):
            out.append((item, arrays[item]))
            continue
        gates = groups[item[0]]
        keys = sorted(gates, key=lambda k: (k[0] != "weight", k[1], k[2] != "l", k[3] != "i2h"))
        flat = np.concatenate([_numpy(gates[k]).reshape(-1) for k in keys])
        name = (item[0] + separator if item[0] else "") + "rnn_param"
        out.append((name, mx.nd.array(flat, dtype=flat.dtype)))
        folded.append("%d per-gate arrays -> %s %s" % (len(keys), name, list(flat.shape)))
    return out, folded


def _numpy(array):
    return array.asnumpy() if hasattr(array, "asnumpy") else np.asarray(array)


def _load_into_port(work, named):
    """The loading release's model (its Gluon 2.0 port) with ``named`` ((name, NDArray) pairs) loaded by name."""
    net = work.spec.build(work.loaded, work.manifest.get("variant") or None)
    net.load_dict(dict((k, mxapi.as_array(v)) for k, v in named), mx.cpu())
    return net


def _port_predictor(work, net):
    from kit.kernel.saving.adapters import _block_predictor

    if hasattr(net, "hybridize"):
        net.hybridize()
    return _block_predictor(net, [i["name"] for i in work.manifest["inputs"]], "Gluon 2.0 port + load_dict")


@register
class RnnFlatParams(Remedy):
    """1.x per-gate RNN parameters (LSTM, GRU, RNN; ``_unfused`` or fused names) as 2.0's one ``rnn_param``."""

    name = "rnn_flat_params"
    title = "concatenate the 1.x per-gate RNN weights into 2.0's flat rnn_param and load by name"
    changes, apis, loading = PARAMETER_MAPPING, ("save_parameters",), (GLUON2, None)
    error = r"Parameter '[^']*rnn_param' is missing"
    user_code = """
import numpy as np, mxnet as mx
with mx.util.np_array(False), mx.util.np_shape(False):
    saved = mx.nd.load("{params}")  # a 1.x file
g = "lstm._unfused.0."  # one RNN layer's per-gate arrays; weights first, then biases
flat = np.concatenate([saved[g + k].asnumpy().ravel()
                       for k in ("i2h_weight", "h2h_weight", "i2h_bias", "h2h_bias")])
params = dict((k, mx.np.array(v.asnumpy())) for k, v in saved.items() if not k.startswith(g))
params["lstm.rnn_param"] = mx.np.array(flat)
net.load_dict(params)  # net: the model's Gluon 2.0 code
"""

    def apply(self, work, error_text):
        arrays = mxapi.load_ndarrays(work.path(work.files()[1]))
        named, folded = fold_rnn_params(arrays)
        if not folded:
            raise Refused("the file holds no 1.x per-gate RNN parameters (names like lstm._unfused.0.i2h_weight)")
        work.named = named
        return "; ".join(folded)

    def load(self, work):
        work.net = _load_into_port(work, work.named)
        return _port_predictor(work, work.net)


#: a 1.x parameter name's last part, as 2.0 calls it
_KINDS = {"moving_mean": "running_mean", "moving_var": "running_var"}


def _kind(name):
    last = re.split(r"[._]", name)[-1]
    if name.endswith(("running_mean", "moving_mean")):
        last = "running_mean"
    elif name.endswith(("running_var", "moving_var")):
        last = "running_var"
    elif name.endswith("rnn_param"):
        last = "rnn_param"
    return _KINDS.get(last, last)


def map_by_structure(saved, wanted):
    """``{saved name: wanted name}`` pairing a 1.x file's prefixed names with a 2.0 model's structural ones.

    ``saved`` and ``wanted`` are ``[(name, shape)]`` in their own order (the file's, the model's
    registration order). Pairs go by position, each checked by shape and kind (weight, bias, gamma, ...);
    where position fails, by (kind, shape) when every one is unique. Raises :class:`Refused` with the
    first name that cannot be placed.
    """
    if len(saved) != len(wanted):
        raise Refused(
            "the file holds %d arrays, the 2.0 model has %d parameters: no one-to-one mapping"
            % (len(saved), len(wanted))
        )
    pairs = list(zip(saved, wanted))
    if all(tuple(a[1]) == tuple(b[1]) and _kind(a[0]) == _kind(b[0]) for a, b in pairs):
        return dict((a[0], b[0]) for a, b in pairs)
    keys = [(_kind(n), tuple(s)) for n, s in wanted]
    if len(set(keys)) != len(keys):
        bad = [(a, b) for a, b in pairs if tuple(a[1]) != tuple(b[1]) or _kind(a[0]) != _kind(b[0])][0]
        raise Refused(
            "ambiguous: %r %s does not fit %r %s by position, and several 2.0 parameters share a kind and shape"
            % (bad[0][0], list(bad[0][1]), bad[1][0], list(bad[1][1]))
        )
    index = dict((k, n) for k, (n, _) in zip(keys, wanted))
    out = {}
    for name, shape in saved:
        key = (_kind(name), tuple(shape))
        if key not in index:
            raise Refused("no 2.0 parameter is a %s of shape %s for %r" % (key[0], list(key[1]), name))
        out[name] = index[key]
    return out


@register
class SaveParamsByStructure(Remedy):
    """A 1.x ``save_params`` file (prefixed names) in 2.0, which has no ``load_params``: names mapped."""

    name = "save_params_name_map"
    title = "map the 1.x prefixed parameter names onto the 2.0 model's structural names and load_dict"
    changes, apis, loading = PARAMETER_MAPPING, ("save_params",), (GLUON2, None)
    unsupported = True  # 2.0 has no load_params: the cell is unsupported, not failing, and still worth a remedy
    user_code = """
import mxnet as mx
with mx.util.np_array(False), mx.util.np_shape(False):
    saved = mx.nd.load("{params}")  # 1.x prefixed names, in the model's order
net.initialize()  # net: the model's Gluon 2.0 code; one call on an input fixes every shape
net(mx.np.array(x))
names = list(net.collect_params())  # structural names, same order (check the shapes pairwise)
# an RNN layer: fold its per-gate arrays into one rnn_param first (see rnn_flat_params)
net.load_dict(dict((n, mx.np.array(v.asnumpy())) for n, v in zip(names, saved.values())))
"""

    def apply(self, work, error_text):
        arrays = mxapi.load_ndarrays(work.path(work.files()[1]))
        named, folded = fold_rnn_params(arrays, separator="_")
        net = work.spec.build(work.loaded, work.manifest.get("variant") or None)
        net.initialize(mx.init.Zero() if hasattr(mx.init, "Zero") else None)
        _shape_by_one_call(net, work.manifest["inputs"])
        wanted = [(n, tuple(p.shape)) for n, p in net.collect_params().items()]
        mapping = map_by_structure([(n, tuple(a.shape)) for n, a in named], wanted)
        net.load_dict(dict((mapping[n], mxapi.as_array(a)) for n, a in named), mx.cpu())
        work.net = net
        shown = ["%s -> %s" % (k, mapping[k]) for k, _ in named[:3]]
        return "%d arrays renamed by structure (%s%s)%s" % (
            len(named),
            ", ".join(shown),
            ", ..." if len(named) > 3 else "",
            ("; " + "; ".join(folded)) if folded else "",
        )

    def load(self, work):
        return _port_predictor(work, work.net)


def _shape_by_one_call(net, inputs):
    from kit.kernel.mx.training import gluon_input

    net(
        *[
            gluon_input(np.zeros(([] if i["kind"] == "pixels_single" else [1]) + list(i["shape"]), dtype=i["dtype"]))
            for i in inputs
        ]
    )


def unfold_rnn_params(arrays, targets):
    """``(arrays, unfolded)``: every ``<layer>.rnn_param`` of ``arrays`` split into the per-gate arrays
    ``targets`` (1.x structural name -> shape) names under ``<layer>._unfused.``, in the fused order."""
    out, unfolded = {}, []
    for name, value in arrays.items():
        if not name.endswith("rnn_param"):
            out[name] = value
            continue
        layer = name[: -len("rnn_param")].rstrip("._")
        gates = []
        for target, shape in targets.items():
            m = _UNFUSED.match(target)
            if m and m.group("layer") == layer:
                key = (m.group("t"), int(m.group("l")), m.group("d") or "l", m.group("g"))
                gates.append((key, target, shape))
        if not gates:
            raise Refused("the 1.x model has no per-gate parameters under %s._unfused for %s" % (layer, name))
        gates.sort(key=lambda g: (g[0][0] != "weight", g[0][1], g[0][2] != "l", g[0][3] != "i2h"))
        flat, at = _numpy(value).reshape(-1), 0
        need = sum(int(np.prod(shape)) for _, _, shape in gates)
        if need != flat.size:
            raise Refused("%s holds %d values, the 1.x layer's gates %d" % (name, flat.size, need))
        for _, target, shape in gates:
            size = int(np.prod(shape))
            out[target] = mx.nd.array(flat[at : at + size].reshape(shape), dtype=flat.dtype)
            at += size
        unfolded.append("%s %s -> %d per-gate arrays" % (name, [flat.size], len(gates)))
    return out, unfolded


@register
class RnnPerGateParams(Remedy):
    """Forward from 2.0: a flat ``rnn_param`` split into the per-gate parameters 1.x's model code names."""

    name = "rnn_per_gate_params"
    title = "split 2.0's flat rnn_param into the 1.x per-gate RNN parameters"
    changes = PARAMETER_MAPPING
    directions = ("forward",)
    apis = ("save_parameters",)
    error = r"Parameter '[^']*_unfused[^']*' is missing"
    edits_artifact = True
    user_code = """
import numpy as np, mxnet as mx  # in the 1.x release; net: the model's 1.x code, initialized, called once
saved = mx.nd.load("{params}")
flat, at = saved.pop("lstm.rnn_param").asnumpy(), 0
own = net._collect_params_with_prefix()  # 1.x structural names -> parameters (with shapes)
for k in ("i2h_weight", "h2h_weight", "i2h_bias", "h2h_bias"):  # one layer; more: every weight first
    shape = own["lstm._unfused.0." + k].shape
    size = int(np.prod(shape))
    saved["lstm._unfused.0." + k] = mx.nd.array(flat[at:at + size].reshape(shape))
    at += size
mx.nd.save("{params}", saved)
"""

    def apply(self, work, error_text):
        name = work.files()[1]
        arrays = mxapi.load_ndarrays(work.path(name))
        net = work.spec.build(work.loaded, work.manifest.get("variant") or None)
        net.initialize()
        _shape_by_one_call(net, work.manifest["inputs"])
        targets = dict((k, tuple(p.shape)) for k, p in net._collect_params_with_prefix().items())
        arrays, unfolded = unfold_rnn_params(arrays, targets)
        if not unfolded:
            raise Refused("%s holds no rnn_param" % name)
        mx.nd.save(work.path(name), arrays)
        return "; ".join(unfolded)


#: NDArray file magic of MXNet's own format (mx.nd.save); anything else 1.x reports as invalid
_ND_MAGIC = b"\x12\x01\x00\x00\x00\x00\x00\x00"


@register
class LegacyParamsFormat(Remedy):
    """Forward from 2.0: a parameter file 1.x cannot read (2.0's ``npz``) re-saved with ``mx.nd.save``."""

    name = "legacy_params_format"
    title = "re-save the 2.0 parameter file in the 1.x NDArray format (mx.nd.save)"
    changes = RESAVE
    directions = ("forward",)
    apis = ("export", "save_parameters", "module_checkpoint", C_PREDICT_API, FOREIGN_API)
    error = r"Invalid NDArray file format"
    edits_artifact = True
    user_code = """
import numpy as np, mxnet as mx  # in the 1.x release
saved = np.load("{params}", allow_pickle=False)  # 2.0 writes parameters as a numpy .npz
mx.nd.save("{params}", dict((k, mx.nd.array(saved[k], dtype=saved[k].dtype)) for k in saved.files))
"""

    def apply(self, work, error_text):
        name = work.files()[1]
        path = work.path(name)
        with open(path, "rb") as f:
            head = f.read(8)
        if head == _ND_MAGIC:
            raise Refused("%s is already in MXNet's NDArray format: the error is not the file format" % name)
        if not head.startswith(b"PK"):
            raise Refused("%s is neither an NDArray file nor an npz archive (starts %r)" % (name, head[:4]))
        saved = np.load(path, allow_pickle=False)
        arrays = dict((k, mx.nd.array(saved[k], dtype=saved[k].dtype)) for k in saved.files)
        saved.close()
        mx.nd.save(path, arrays)
        return "re-saved %s (%d arrays, npz) with mx.nd.save" % (name, len(arrays))
