"""Remedies: the fixes a migrating user applies to an artifact that does not load, tried and measured.

Each remedy is registered once (``@register``) and declares which failures it applies to
(direction, API, loading releases, the error it answers), what it changes (a loading mode, a
parameter mapping, a graph edit, a re-save in another format) and the few lines of user code
that do the same. :func:`retry` runs every remedy that applies to a failed cell, in the loading
release's kernel, on the same reference cases with the same tolerance, and returns what each
did. A remedy informs: the cell's own verdict never changes.

Graph and file edits work on a copy of the artifact and may chain (a 2.0 export needs its
parameters re-saved, then an attribute dropped); a loading mode runs the unchanged files.
"""

import contextlib
import json
import os
import re
import shutil
import tempfile
import traceback

import numpy as np
import mxnet as mx

from kit.common import verdicts
from kit.common.capabilities import C_PREDICT_API, FOREIGN_API, GLUON2
from kit.common.versions import at_least, direction
from kit.kernel import mxapi

#: every remedy, in the order they are tried
REMEDIES = []

LOADING_MODE, PARAMETER_MAPPING, GRAPH_EDIT, RESAVE = "loading mode", "parameter mapping", "graph edit", "re-save"
#: the most edits one attempt chains before it gives up
MAX_CHAIN = 8


class Refused(Exception):
    """A remedy that looked at the artifact and will not apply: the message says why (recorded as tried)."""


def register(cls):
    """Class decorator: add ``cls`` (a :class:`Remedy`) to :data:`REMEDIES`."""
    REMEDIES.append(cls())
    return cls


def by_name(name):
    for remedy in REMEDIES:
        if remedy.name == name:
            return remedy
    raise KeyError("unknown remedy %r; known: %s" % (name, ", ".join(r.name for r in REMEDIES)))


class Work(object):
    """One attempt's view of the artifact: a private copy of its folder and manifest, the loading release."""

    def __init__(self, spec, adapter, loaded, saved, api, folder, manifest):
        self.spec, self.adapter, self.loaded, self.saved, self.api = spec, adapter, loaded, saved, api
        self.source = folder
        self.folder = tempfile.mkdtemp(prefix="mxcompat-remedy-")
        for name in os.listdir(folder):
            path = os.path.join(folder, name)
            if os.path.isfile(path) and not name.startswith("."):
                shutil.copy(path, os.path.join(self.folder, name))
        self.manifest = json.loads(json.dumps(manifest))
        self.direction = direction(saved, loaded)

    def files(self):
        """``(symbol file, params file)`` of a graph artifact (either may be None)."""
        info = self.manifest.get("load") or {}
        if "symbol_file" in info:
            return info.get("symbol_file"), info.get("param_file")
        if "prefix" in info:
            return "%s-symbol.json" % info["prefix"], "%s-%04d.params" % (info["prefix"], info["epoch"])
        return None, info.get("param_file")

    def path(self, name):
        return os.path.join(self.folder, name)

    def close(self):
        shutil.rmtree(self.folder, ignore_errors=True)


class Remedy(object):
    """Base: declares what failures it answers; ``apply`` changes the work copy, ``load`` loads it."""

    name = None
    #: a line a reader understands: what the remedy does
    title = None
    #: one of LOADING_MODE, PARAMETER_MAPPING, GRAPH_EDIT, RESAVE
    changes = None
    #: "backward" / "forward": the directions it applies to
    directions = ("backward",)
    #: the APIs whose artifacts it applies to
    apis = ()
    #: the loading releases it applies to: (first, first not) or None for open ends
    loading = (None, None)
    #: a regular expression the error must match (None: any error, and an unsupported cell when ``unsupported``)
    error = None
    unsupported = False
    #: edits the artifact's files: may follow another edit in one attempt
    edits_artifact = False
    #: what a user writes to do the same (``{symbol}``, ``{params}``, ``{inputs}`` filled in)
    user_code = ""

    def matches(self, work, error_text, verdict):
        first, last = self.loading
        if first and not at_least(work.loaded, first):
            return False
        if last and at_least(work.loaded, last):
            return False
        if work.direction not in self.directions or work.api not in self.apis:
            return False
        if verdict == verdicts.UNSUPPORTED:
            return self.unsupported
        return self.error is None or re.search(self.error, error_text or "") is not None

    def apply(self, work, error_text):
        """Change the work copy (files, manifest); return what changed, in words. Raise :class:`Refused`."""
        return None

    def load(self, work):
        """The predictor of the work copy (default: the artifact's own load path)."""
        return work.adapter.load(work.spec, work.loaded, work.folder, work.manifest)

    def mode(self):
        """The context this remedy's artifact loads and runs in."""
        return mxapi.legacy_semantics() if self.changes == LOADING_MODE else _Nothing()

    def code(self, work):
        symbol, params = work.files()
        inputs = [i["name"] for i in work.manifest.get("inputs") or []]
        return self.user_code.strip().format(symbol=symbol or "model-symbol.json", params=params, inputs=inputs)


class _Nothing(object):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class _LegacyPredictor(object):
    def __init__(self, predictor):
        self._predictor = predictor
        self.path, self.attempts = predictor.path, []

    def __call__(self, inputs):
        with mxapi.legacy_semantics():
            return self._predictor(inputs)


@register
class LegacyShapeSemantics(Remedy):
    """A 1.x graph in MXNet 2.0 under legacy shape semantics: 0 in a 1.x shape means "unknown", not "empty"."""

    name = "legacy_shape_semantics"
    title = "load and run the 1.x graph under legacy shape semantics (mx.npx.reset_np())"
    changes = LOADING_MODE
    apis = ("export", "module_checkpoint", FOREIGN_API)
    loading = (GLUON2, None)
    user_code = """
import mxnet as mx
mx.npx.reset_np()  # legacy (1.x) shape and array semantics for this graph
net = mx.gluon.SymbolBlock.imports("{symbol}", {inputs}, "{params}")
out = net(mx.nd.array(x))
"""

    def matches(self, work, error_text, verdict):
        return Remedy.matches(self, work, error_text, verdict) and not at_least(work.saved, GLUON2)

    def apply(self, work, error_text):
        if not mxapi.numpy_semantics():
            raise Refused("numpy semantics were already off in this kernel: the naive load ran under legacy ones")
        return "loaded and ran with numpy shape and array semantics off (1.x semantics)"

    def load(self, work):
        with mxapi.legacy_semantics():
            predictor = work.adapter.load(work.spec, work.loaded, work.folder, work.manifest)
        return _LegacyPredictor(predictor)


#: operators whose ``shape`` attribute makes an array, where 1.x wrote 0 for "unknown" (numpy semantics: -1)
_SHAPED_CONSTANTS = ("_zeros", "_ones", "_full", "_empty")


@register
class UnknownDimsAsMinusOne(Remedy):
    """A 1.x graph made native to 2.0: the 0 ("unknown", e.g. an RNN's begin state batch) in a constant's
    shape written as -1, what numpy shape semantics call unknown (0 there means an empty axis)."""

    name = "np_shape_unknown_dims"
    title = "rewrite 0 (1.x: unknown) as -1 in the shapes of the graph's constant nodes (a native 2.0 graph)"
    changes = GRAPH_EDIT
    apis = ("export", "module_checkpoint", FOREIGN_API)
    loading = (GLUON2, None)
    edits_artifact = True
    user_code = """
import json, re
graph = json.load(open("{symbol}"))
for node in graph["nodes"]:  # begin states made with 1.x semantics: (1, 0, 24) -> (1, -1, 24)
    if node["op"] in ("_zeros", "_ones", "_full", "_empty") and "shape" in node.get("attrs", {{}}):
        node["attrs"]["shape"] = re.sub(r"(?<![\\d-])0(?!\\d)", "-1", node["attrs"]["shape"])
json.dump(graph, open("{symbol}", "w"))
"""

    def matches(self, work, error_text, verdict):
        return Remedy.matches(self, work, error_text, verdict) and not at_least(work.saved, GLUON2)

    def apply(self, work, error_text):
        symbol = work.path(work.files()[0])
        with open(symbol) as f:
            graph = json.load(f)
        changed = []
        for node in graph["nodes"]:
            attrs = node.get("attrs") or node.get("param") or {}
            if node["op"] in _SHAPED_CONSTANTS and "shape" in attrs:
                shape = re.sub(r"(?<![\d-])0(?!\d)", "-1", attrs["shape"])
                if shape != attrs["shape"]:
                    changed.append("%s %s -> %s" % (node["name"], attrs["shape"], shape))
                    attrs["shape"] = shape
        if not changed:
            raise Refused("no constant node of the graph has a 0 (unknown) dimension to rewrite")
        with open(symbol, "w") as f:
            json.dump(graph, f)
        return "shapes rewritten: " + "; ".join(changed[:3]) + (" ..." if len(changed) > 3 else "")


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
    from kit.kernel.adapters import _block_predictor

    if hasattr(net, "hybridize"):
        net.hybridize()
    return _block_predictor(net, [i["name"] for i in work.manifest["inputs"]], "Gluon 2.0 port + load_dict")


@register
class RnnFlatParams(Remedy):
    """1.x per-gate RNN parameters (LSTM, GRU, RNN; ``_unfused`` or fused names) as 2.0's one ``rnn_param``."""

    name = "rnn_flat_params"
    title = "concatenate the 1.x per-gate RNN weights into 2.0's flat rnn_param and load by name"
    changes = PARAMETER_MAPPING
    apis = ("save_parameters",)
    loading = (GLUON2, None)
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
    changes = PARAMETER_MAPPING
    apis = ("save_params",)
    loading = (GLUON2, None)
    unsupported = True
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
    from kit.kernel.training import gluon_input

    net(
        *[
            gluon_input(np.zeros(([] if i["kind"] == "pixels_single" else [1]) + list(i["shape"]), dtype=i["dtype"]))
            for i in inputs
        ]
    )


#: graph attributes newer releases write that older ones do not know: (operators, value that changes
#: nothing); a value of None means "the default by the kernel's rank" (layout)
DEFAULT_ATTRIBUTES = {
    "layout": (("Convolution", "Deconvolution", "Pooling"), None),
    "sparse_grad": (("Embedding",), ("False", "0", "false")),
    "use_sequence_length": (("RNN",), ("False", "0", "false")),
    "output_size": (("Pooling",), ("None",)),  # 2.0's adaptive pooling; None: the plain pooling 1.x does
    "p_value": (("Pooling",), ("None",)),  # LP pooling's power; None: the pool_type's own pooling
    "count_include_pad": (("Pooling",), ("None",)),  # None: the release's default
    "cudnn_off": (("Convolution", "Deconvolution", "Pooling", "RNN"), ("0", "False", "false")),  # GPU only
}
_LAYOUTS = {1: "NCW", 2: "NCHW", 3: "NCDHW"}


def _is_default(attr, node):
    ops, values = DEFAULT_ATTRIBUTES[attr]
    value = node.get("attrs", {}).get(attr)
    if values is not None:
        return value in values
    if value in (None, "None"):
        return True
    kernel = node["attrs"].get("kernel")
    rank = len(re.findall(r"\d+", kernel)) if kernel else (2 if node["attrs"].get("global_pool") else None)
    return rank is not None and value == _LAYOUTS.get(rank)


@register
class DropDefaultAttributes(Remedy):
    """Forward: drop a graph attribute the older release does not know where its value is the default."""

    name = "drop_default_attributes"
    title = "delete graph attributes the older release does not know, where their value is its default"
    changes = GRAPH_EDIT
    directions = ("forward",)
    apis = ("export", "module_checkpoint", C_PREDICT_API, FOREIGN_API)
    error = r"Cannot find argument '([^']+)'"
    edits_artifact = True
    user_code = """
import json
graph = json.load(open("{symbol}"))
for node in graph["nodes"]:  # only where the value is what the older release does anyway
    if node.get("attrs", {{}}).get("layout") == "NCHW":
        del node["attrs"]["layout"]
json.dump(graph, open("{symbol}", "w"))
"""

    def apply(self, work, error_text):
        attr = re.search(self.error, error_text).group(1)
        if attr not in DEFAULT_ATTRIBUTES:
            raise Refused(
                "attribute %r is not one the kit knows to be a no-op at its default: dropping it could change "
                "the computation" % attr
            )
        symbol = work.path(work.files()[0])
        with open(symbol) as f:
            graph = json.load(f)
        ops = DEFAULT_ATTRIBUTES[attr][0]
        dropped, kept = 0, []
        for node in graph["nodes"]:
            attrs = node.get("attrs") or node.get("param") or {}
            if attr not in attrs:
                continue
            if node["op"] in ops and _is_default(attr, dict(node, attrs=attrs)):
                del attrs[attr]
                dropped += 1
            else:
                kept.append("%s(%s=%s)" % (node["name"], attr, attrs[attr]))
        if kept:
            raise Refused(
                "%s on %s is not the older release's default: dropping it would change the computation"
                % (attr, ", ".join(kept[:3]))
            )
        with open(symbol, "w") as f:
            json.dump(graph, f)
        return "dropped %s from %d node(s) (the default value)" % (attr, dropped)


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


#: failures no remedy answers, and why: (pattern, explanation with {0} for the match)
NO_REMEDY = [
    (
        r"Operator (_npi_\w+|_npx_\w+)",
        "operator {0} is one of MXNet's numpy operators, which arrived in 1.6: the graph needs 1.6 or newer "
        "(or a re-export from the model's 1.x code)",
    ),
    (
        r"Operator (_rnn_param_concat)",
        "operator {0} (the fused RNN's parameter concatenation, from 1.3 on) does not exist here: a hybridized "
        "1.3+ RNN graph needs 1.3 or newer",
    ),
    (
        r"Operator (_image_resize)",
        "operator {0} (gluon's Resize as a graph operator, from 1.5 on) does not exist here: the graph needs 1.5 or "
        "newer, or the resize done outside the model",
    ),
    (
        r"Operator (_image_to_tensor|_image_normalize)",
        "operator {0} (gluon's image transforms as graph operators, from 1.1 on) does not exist here: the graph "
        "needs 1.1 or newer",
    ),
    (r"Operator (\S+?):? is not registered", "operator {0} does not exist in the loading release"),
    (r"Cannot find argument '([^']+)'", "argument '{0}' is not known to be a no-op at its default"),
]


def no_remedy_reason(error_text, release):
    for pattern, why in NO_REMEDY:
        m = re.search(pattern, error_text or "")
        if m:
            return why.format(*m.groups())
    return None


def _probe(loaded, saved, api):
    probe = Work.__new__(Work)
    probe.loaded, probe.saved, probe.api, probe.direction = loaded, saved, api, direction(saved, loaded)
    return probe


def applies(loaded, saved, api, rec):
    """Whether any remedy answers the failed (or unsupported) cell ``rec``."""
    error_text = rec.get("error") or rec.get("reason") or ""
    return any(r.matches(_probe(loaded, saved, api), error_text, rec["verdict"]) for r in REMEDIES)


def retry(spec, adapter, loaded, saved, api, folder, manifest, rec, measure):
    """Every remedy that applies to the failed cell ``rec``, tried and measured; the record's ``remedy``.

    ``measure(predictor)`` runs the reference cases and returns ``{"verdict", "reason", "summary"}``;
    it raises what inference raised. Returns None when no remedy applies and the failure names no
    reason; else ``{"fixed", "name", "verdict", ..., "tried": [...]}`` (see :func:`_summarize`).
    """
    error_text = rec.get("error") or rec.get("reason") or ""
    tried = []
    probe = _probe(loaded, saved, api)
    for remedy in [r for r in REMEDIES if r.matches(probe, error_text, rec["verdict"])]:
        attempt = _attempt(remedy, spec, adapter, loaded, saved, api, folder, manifest, error_text, rec, measure)
        tried.append(attempt)
    return _summarize(tried, error_text, loaded)


@contextlib.contextmanager
def remedied(name, spec, adapter, loaded, saved, api, folder, manifest, error_text, measure):
    """Remedy ``name`` tried as :func:`retry` tries it (with the edits it chains), its work copy kept open.

    Yields ``(attempt, work, mode)``: the attempt as recorded; ``work.folder`` and ``work.manifest``, the
    edited artifact (``work.net``, the loaded model of a parameter mapping); ``mode()``, the context to
    load and run it in (legacy semantics for that remedy, else nothing). The copy is removed on exit.
    """
    kept = []
    attempt = _attempt(
        by_name(name), spec, adapter, loaded, saved, api, folder, manifest, error_text, None, measure, kept
    )
    work = kept[0]
    try:
        yield attempt, work, by_name(name).mode
    finally:
        work.close()


def _attempt(first, spec, adapter, loaded, saved, api, folder, manifest, error_text, rec, measure, keep=None):
    work = Work(spec, adapter, loaded, saved, api, folder, manifest)
    if keep is not None:
        keep.append(work)
    chain, changed, remedy, error, answered = [], [], first, error_text, set()
    try:
        while True:
            chain.append(remedy)
            answered.add((remedy.name, _gist(error)))
            try:
                changed.append(remedy.apply(work, error))
                predictor = first.load(work) if first.edits_artifact is False else remedy.load(work)
                result = measure(predictor)
            except Refused as e:
                return _record(chain, changed, work, verdicts.LOAD_ERROR, refused=str(e))
            except Exception as e:  # noqa: BLE001 - the remedy's own failure is evidence, kept verbatim
                error = "%s: %s" % (type(e).__name__, e)
                follow = [
                    r
                    for r in REMEDIES
                    if r.edits_artifact
                    and first.edits_artifact
                    and (r.name, _gist(error)) not in answered
                    and r.matches(work, error, None)
                ]
                if follow and len(chain) < MAX_CHAIN:
                    remedy = follow[0]
                    continue
                return _record(chain, changed, work, _failed_verdict(e), error=e, tb=traceback.format_exc())
            return _record(chain, changed, work, result["verdict"], result=result)
    finally:
        if keep is None:
            work.close()


def _gist(error_text):
    """What an error says, without what wraps it: a remedy answers one such fact once per attempt."""
    for pattern in (r"Cannot find argument '[^']+'", r"Operator \S+ is not registered", r"Invalid NDArray file format"):
        m = re.search(pattern, error_text or "")
        if m:
            return m.group(0)
    return (error_text or "")[:200]


def _failed_verdict(exc):
    return getattr(exc, "verdict", verdicts.LOAD_ERROR)


def _record(chain, changed, work, verdict, result=None, refused=None, error=None, tb=None):
    unique = [r for i, r in enumerate(chain) if r not in chain[:i]]
    out = {
        "name": "+".join(r.name for r in unique),
        "remedies": [r.name for r in chain],
        "title": "; then ".join(r.title for r in unique),
        "changes": [r.changes for r in chain],
        "changed": [c for c in changed if c],
        "verdict": verdict,
        "reason": None,
        "summary": None,
        "user_code": "\n\n".join(r.code(work) for r in unique),
    }
    if result is not None:
        out.update(reason=result.get("reason"), summary=result.get("summary"))
    if refused is not None:
        out.update(verdict="refused", reason=refused)
    if error is not None:
        out.update(error_type=type(error).__name__, error=str(error).strip(), reason=verdicts.headline(error))
        if tb:
            out["traceback"] = "\n".join(tb.strip().splitlines()[-8:])
    return out


def _summarize(tried, error_text, loaded):
    fixed = [t for t in tried if t["verdict"] in verdicts.PASSING]
    best = fixed[0] if fixed else None
    out = {
        "fixed": bool(best),
        "name": best["name"] if best else None,
        "title": best["title"] if best else None,
        "verdict": best["verdict"] if best else None,
        "summary": best["summary"] if best else None,
        "changed": best["changed"] if best else [],
        "user_code": best["user_code"] if best else None,
        "alternatives": [t["name"] for t in fixed[1:]],
        "tried": tried,
        "why_none": None,
    }
    if not best:
        why = no_remedy_reason(error_text, loaded)
        if tried:
            last = tried[-1]
            said = last.get("error") or last.get("reason") or ""
            why = "tried %s: %s" % (
                ", ".join(t["name"] for t in tried),
                no_remedy_reason(said, loaded) or (last.get("reason") or said or last["verdict"]),
            )
        out["why_none"] = why or "no known remedy for this failure"
    return out
