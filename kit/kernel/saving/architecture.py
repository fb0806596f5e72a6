"""A model's architecture as a release builds it: the "model version" beside the weights' "param version".

``describe(net, inputs)`` reads the graph a release built for a model and turns it
into a JSON-able description that no release's naming enters:

- ``nodes``: the operators in topological order, each ``{"op", "attrs", "inputs"}``.
  ``inputs`` are edges by position: ``"in0"`` (the model's first input), ``"label0"``
  (a loss head's label), ``"p3"`` (the fourth parameter), ``"n5"`` / ``"n5.1"`` (the
  first / second output of the sixth operator);
- ``params``: the parameters in order of first use, each ``{"role", "shape", "aux"}``
  (role: weight, bias, gamma, beta, running_mean, running_var ...), without names;
- ``inputs`` (per-sample shape and dtype), ``labels`` (how many) and ``outputs`` (edges).

Those parts are what :func:`model_version` hashes. Beside them, ``names`` holds the
parameter, input and label names (1.x gluon prefixes them, 2.0 names them by structure)
and ``source`` the release and the graph's own operator names; neither is hashed.

Normalized so that one architecture reads the same in every release from 0.11 to 2.0:

- attribute values: ``"(3, 3)"``, ``"(3,3)"`` and ``"[3,3]"`` are ``[3, 3]``; ``"True"``/``"1"``
  are ``1``; numbers are numbers (floats to 7 significant digits); ``"None"`` is dropped;
- attributes that do not define the computation are dropped: MXNet's hidden ``__x__`` ones
  (``__init__``, ``__lr_mult__``, ``__shape__``, ``__profiler_scope__`` ...), ``ctx_group``,
  ``lr_mult``/``wd_mult``, the device (``ctx``) and the kernel choice (``cudnn_off``,
  ``cudnn_tune``, ``workspace``);
- attributes an operator takes by default are filled in where a release leaves them out
  (2.0.0b1 writes every parameter, 0.11 only those given): ``stride``/``dilate``/``pad``
  of the kernel's rank, ``layout`` of that rank, BatchNorm's ``use_global_stats`` ...
  (:data:`DEFAULTS`);
- operator names that changed: 2.0's numpy operators (``_npi_add``, ``_npi_concatenate``,
  ``_npi_mean``, ``_np_reshape``) read as their 1.x operators (``elemwise_add``, ``Concat``
  with ``dim``, ``mean``, ``Reshape``), ``_plus``/``broadcast_add`` as ``elemwise_add``,
  ``Reshape(shape=(0, -1))`` (gluon's Flatten before 1.1) as ``Flatten``, the ``relu``/``tanh``
  ... operators as ``Activation`` (:data:`OP_ALIASES`).

What stays different is a real difference in the graph: 0.11's ResNet-18 v1 flattens
before its Dense, 2.0's LSTM port makes its zero state with ``broadcast_like``, the
Module model's 2.0 port ends in ``softmax`` instead of ``SoftmaxOutput``.

A 1.x HybridBlock is traced by calling it on symbols (no parameter needs initializing
and the block is left as it was); a Gluon 2.0 block cannot be, so it is hybridized, run
once on zeros and exported (:func:`kit.kernel.saving.adapters.traced_graph`), with parameters
that are not initialized yet initialized to zeros first. A Module model is given as its
symbol. Runs on MXNet 0.11 to 2.0 and Python 3.6.
"""

import ast
import difflib
import hashlib
import json
import math
import warnings

#: bump when what a description holds, or how it is normalized, changes (model versions change with it)
FORMAT = 1
#: the file in an artifact folder that holds the architecture its saving release built
FILE = "architecture.json"
#: the parts of a description :func:`model_version` hashes (no names, no release)
HASHED = ("format", "inputs", "labels", "nodes", "params", "outputs")

#: attributes that do not define what a node computes: where it runs and which kernel runs it
COSMETIC = frozenset(
    ["ctx_group", "lr_mult", "wd_mult", "ctx", "cudnn_off", "cudnn_tune", "workspace", "force_mirroring"]
)
#: attributes whose value is a shape/tuple also where a release writes one number
TUPLE_ATTRS = frozenset(
    ["kernel", "stride", "pad", "dilate", "adj", "target_shape", "shape", "newshape", "axes", "lhs_axes", "rhs_axes"]
)
REDUCTIONS = frozenset(["mean", "sum", "prod", "nansum", "nanprod", "max", "min"])

#: graph operator -> the operator it is read as (2.0's numpy operators, renamed 1.x ones)
OP_ALIASES = {
    "_plus": "elemwise_add",
    "_Plus": "elemwise_add",
    "_add": "elemwise_add",
    "_npi_add": "elemwise_add",
    "broadcast_add": "elemwise_add",
    "broadcast_plus": "elemwise_add",
    "_minus": "elemwise_sub",
    "_Minus": "elemwise_sub",
    "_sub": "elemwise_sub",
    "_npi_subtract": "elemwise_sub",
    "broadcast_sub": "elemwise_sub",
    "broadcast_minus": "elemwise_sub",
    "_mul": "elemwise_mul",
    "_Mul": "elemwise_mul",
    "_npi_multiply": "elemwise_mul",
    "broadcast_mul": "elemwise_mul",
    "_div": "elemwise_div",
    "_Div": "elemwise_div",
    "_npi_true_divide": "elemwise_div",
    "broadcast_div": "elemwise_div",
    "_npi_concatenate": "Concat",
    "concat": "Concat",
    "_npi_mean": "mean",
    "_np_sum": "sum",
    "_npi_sum": "sum",
    "_np_prod": "prod",
    "_npi_prod": "prod",
    "_np_max": "max",
    "_np_min": "min",
    "flatten": "Flatten",
    "swapaxes": "SwapAxis",
    "_npi_clip": "clip",
    "_np_clip": "clip",
    "_npi_zeros": "_zeros",
    "_npi_ones": "_ones",
    "_npi_expand_dims": "expand_dims",
    "_np_transpose": "transpose",
    "_npx_relu": "relu",
    "_npx_sigmoid": "sigmoid",
    "_npi_tanh": "tanh",
    "_npx_softmax": "softmax",
    "_npx_log_softmax": "log_softmax",
    "_npx_dropout": "Dropout",
}
#: attribute renames of an operator read as another (2.0's concatenate has ``axis``, Concat ``dim``)
ATTR_RENAMES = {("_npi_concatenate", "axis"): "dim", ("concat", "axis"): "dim"}
#: operators that are one act_type of Activation
ACTIVATION_OPS = {"relu": "relu", "sigmoid": "sigmoid", "tanh": "tanh", "softrelu": "softrelu", "softsign": "softsign"}
_LAYOUTS = {1: "NCW", 2: "NCHW", 3: "NCDHW"}

#: what an operator takes when a release leaves the attribute out (canonical values)
DEFAULTS = {
    "Convolution": {"num_group": 1, "no_bias": 0},
    "Deconvolution": {"num_group": 1, "no_bias": 1},
    "Pooling": {"global_pool": 0, "pool_type": "max", "pooling_convention": "valid", "count_include_pad": 1},
    "FullyConnected": {"flatten": 1, "no_bias": 0},
    "BatchNorm": {
        "eps": 0.001,
        "momentum": 0.9,
        "fix_gamma": 1,
        "use_global_stats": 0,
        "output_mean_var": 0,
        "axis": 1,
    },
    "LayerNorm": {"axis": -1, "eps": 1e-05, "output_mean_var": 0},
    "InstanceNorm": {"eps": 0.001},
    "Dropout": {"p": 0.5, "mode": "training", "axes": []},
    "Embedding": {"dtype": "float32", "sparse_grad": 0},
    "RNN": {"bidirectional": 0, "state_outputs": 0, "p": 0, "lstm_state_clip_nan": 0, "use_sequence_length": 0},
    "Concat": {"dim": 1},
    "Reshape": {"reverse": 0},
    "SwapAxis": {"dim1": 0, "dim2": 0},
    "LeakyReLU": {"act_type": "leaky", "slope": 0.25, "lower_bound": 0.125, "upper_bound": 0.334},
    "softmax": {"axis": -1, "use_length": 0},
    "log_softmax": {"axis": -1, "use_length": 0},
    "SoftmaxOutput": {
        "grad_scale": 1,
        "ignore_label": -1,
        "multi_output": 0,
        "use_ignore": 0,
        "preserve_shape": 0,
        "normalization": "null",
        "out_grad": 0,
        "smooth_alpha": 0,
    },
    "_image_resize": {"keep_ratio": 0, "interp": 1},
}
for _op in REDUCTIONS:
    DEFAULTS.setdefault(_op, {}).update({"keepdims": 0, "exclude": 0})

#: parameter name endings -> role, longest first (1.x Module models say moving_, gluon running_)
ROLES = (
    ("i2h_weight", "i2h_weight"),
    ("h2h_weight", "h2h_weight"),
    ("i2h_bias", "i2h_bias"),
    ("h2h_bias", "h2h_bias"),
    ("running_mean", "running_mean"),
    ("moving_mean", "running_mean"),
    ("running_var", "running_var"),
    ("moving_var", "running_var"),
    ("rnn_param", "rnn_param"),
    ("parameters", "rnn_param"),
    ("weight", "weight"),
    ("bias", "bias"),
    ("gamma", "gamma"),
    ("beta", "beta"),
    ("alpha", "alpha"),
)
#: MXNet's dtype codes (a variable's ``__dtype__``)
_DTYPE_CODES = {"0": "float32", "1": "float64", "2": "float16", "3": "uint8", "4": "int32", "5": "int8", "6": "int64"}
#: operators whose output has their ``dtype`` attribute, or a fixed dtype
_DTYPE_SETTERS = frozenset(["Embedding", "Cast", "amp_cast", "_zeros", "_ones", "_full", "_arange"])
_FIXED_DTYPES = {"_image_to_tensor": "float32"}


# -- describing a graph ----------------------------------------------------------------------------------------
def describe(net, inputs, release=None):
    """The architecture ``net`` has in this release, as a JSON-able dict (see the module docstring).

    ``net``: a gluon HybridBlock (1.x or 2.0, a SymbolBlock too) or a Module model's symbol.
    ``inputs``: the model's inputs, each an :class:`kit.kernel.models.modelspec.InputSpec`, a dict with
    ``name``, ``shape`` (per sample), optional ``dtype``/``kind`` (``kind`` ``pixels_single``: no
    batch axis), or a ``(name, shape)`` pair. Raises
    :class:`kit.kernel.mx.internals.GraphUnavailable` for a block that has no graph (a plain gluon Block).
    """
    import mxnet as mx

    specs = [_input_dict(i) for i in inputs]
    sym = graph_of(net, specs)
    return describe_symbol(sym, specs, release or mx.__version__)


def describe_zoo(name, release=None, variant=None):
    """:func:`describe` of the zoo model ``name`` as this kernel's release builds it (``release``: the name the
    kit knows it by, e.g. ``1.7.0.post2``, which ``mx.__version__`` cannot tell apart)."""
    import mxnet as mx

    from kit.kernel.models import zoo

    release = release or mx.__version__
    spec = zoo.get(name)
    return describe(spec.build(release, variant), spec.input_specs(release), release)


def graph_of(net, inputs):
    """The symbol of ``net``: itself (a symbol), traced on symbols (1.x), or exported after one run (2.0)."""
    import mxnet as mx
    from mxnet import gluon

    from kit.kernel.mx import mxapi
    from kit.kernel.mx.internals import GraphUnavailable

    specs = [_input_dict(i) for i in inputs]
    if isinstance(net, mx.sym.Symbol):
        return net
    if not isinstance(net, gluon.HybridBlock):
        raise GraphUnavailable("%s is not a HybridBlock: it has no symbol graph" % type(net).__name__)
    if mxapi.gluon2():
        from kit.kernel.saving.adapters import traced_graph

        with warnings.catch_warnings():  # parameters already initialized keep their values (and warn)
            warnings.simplefilter("ignore")
            net.initialize(mx.init.Zero())
        return traced_graph(net, specs)[0]
    out = net(*[mx.sym.var(i["name"]) for i in specs])
    return mx.sym.Group(list(out)) if isinstance(out, (list, tuple)) else out


def describe_symbol(sym, inputs, release=None):
    """:func:`describe` of a symbol whose data inputs are ``inputs`` (names, per-sample shapes)."""
    specs = [_input_dict(i) for i in inputs]
    graph = json.loads(sym.tojson())
    shapes = _param_shapes(sym, specs)
    input_index = dict((s["name"], k) for k, s in enumerate(specs))
    refs, dtypes = {}, {}  # JSON node id -> edge prefix; -> output dtype (what reductions' dtype is)
    nodes, params, labels, param_names, raw_ops = [], [], [], [], []
    for nid, node in enumerate(graph["nodes"]):
        raw = _raw_attrs(node)
        name = node.get("name")
        if node["op"] == "null":
            if name in input_index:
                refs[nid] = "in%d" % input_index[name]
                dtypes[nid] = specs[input_index[name]]["dtype"]
            elif name.endswith("label"):
                refs[nid] = "label%d" % len(labels)
                labels.append(name)
            else:
                refs[nid] = "p%d" % len(params)
                shape, aux = shapes.get(name, (None, False))
                params.append({"role": _role(name), "shape": shape, "aux": aux})
                param_names.append(name)
                dtypes[nid] = _DTYPE_CODES.get(str(raw.get("__dtype__", "0")), "float32")
            continue
        edges = [_edge(refs, entry) for entry in node.get("inputs", [])]
        in_dtype = dtypes.get(node["inputs"][0][0]) if node.get("inputs") else None
        op, attrs = canonical_node(node["op"], raw, in_dtype)
        refs[nid] = "n%d" % len(nodes)
        dtypes[nid] = _FIXED_DTYPES.get(op) or (attrs.get("dtype") if op in _DTYPE_SETTERS else in_dtype)
        nodes.append({"op": op, "attrs": attrs, "inputs": edges})
        raw_ops.append(node["op"])
    outputs = [_edge(refs, entry) for entry in graph.get("heads", [])]
    return {
        "format": FORMAT,
        "inputs": [{"shape": list(s["shape"]), "dtype": s["dtype"]} for s in specs],
        "labels": len(labels),
        "nodes": nodes,
        "params": params,
        "outputs": outputs,
        "names": {"inputs": [s["name"] for s in specs], "labels": labels, "params": param_names},
        "source": {"release": release, "ops": raw_ops},
    }


def _input_dict(spec):
    if isinstance(spec, dict):
        out = dict(spec)
    elif isinstance(spec, (list, tuple)):
        out = {"name": spec[0], "shape": spec[1]}
    else:  # an InputSpec
        out = spec.to_dict()
    out["shape"] = [int(d) for d in out["shape"]]
    out.setdefault("dtype", "float32")
    out.setdefault("kind", "float")
    return out


def _raw_attrs(node):
    """A node's attributes; the JSON key was ``param`` (0.x), ``attr`` (1.0) or ``attrs`` (1.x, 2.0)."""
    return dict(node.get("attrs") or node.get("attr") or node.get("param") or {})


def _edge(refs, entry):
    ref = refs[entry[0]]
    index = entry[1] if len(entry) > 1 else 0
    return ref if not index else "%s.%d" % (ref, index)


def _role(name):
    for ending, role in ROLES:
        if name.endswith(ending):
            return role
    return name.replace(".", "_").rsplit("_", 1)[-1]


def _param_shapes(sym, specs):
    """parameter name -> (shape or None, is an aux state), inferred from the inputs' shapes (batch 1)."""
    import mxnet as mx

    util = getattr(mx, "util", None)  # an unknown dimension is -1 under numpy shape semantics (2.0), else 0
    unknown = -1 if util is not None and hasattr(util, "is_np_shape") and util.is_np_shape() else 0
    given = dict(
        (s["name"], tuple(([] if s.get("kind") == "pixels_single" else [1]) + list(s["shape"]))) for s in specs
    )
    arg_names, aux_names = sym.list_arguments(), sym.list_auxiliary_states()
    arg_shapes = aux_shapes = None
    for method in ("infer_shape", "infer_shape_partial"):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                arg_shapes, _, aux_shapes = getattr(sym, method)(**given)
        except Exception:  # noqa: BLE001 - a graph this release cannot infer: shapes stay unknown
            continue
        if arg_shapes is not None:
            break
    out = {}
    for names, shapes, aux in ((arg_names, arg_shapes, False), (aux_names, aux_shapes, True)):
        for k, name in enumerate(names):
            shape = shapes[k] if shapes is not None and k < len(shapes) else None
            if shape is not None:
                shape = [int(d) if int(d) != unknown else None for d in shape] if len(shape) else None
            out[name] = (shape, aux)
    return out


# -- normalizing a node ----------------------------------------------------------------------------------------
def canonical_node(op, attrs, input_dtype=None):
    """``(op, attrs)`` of a graph node as every release reads it: values normalized, cosmetic attributes
    dropped, defaults filled in, renamed operators under one name (see the module docstring)."""
    values = {}
    for key, text in attrs.items():
        key = str(key)
        if key.startswith("__") or key in COSMETIC:
            continue
        value = canonical_value(text)
        if value is None:
            continue
        if key in TUPLE_ATTRS and not isinstance(value, list):
            value = [value]
        values[ATTR_RENAMES.get((op, key), key)] = value
    op = OP_ALIASES.get(op, op)
    if op in ("_np_reshape", "_npx_reshape"):
        shape = values.get("newshape")
        plain = isinstance(shape, list) and all(isinstance(d, int) and (d > 0 or d == -1) for d in shape)
        if plain and values.get("order", "C") == "C" and shape.count(-1) <= 1:
            op, values = "Reshape", {"shape": shape}  # the numpy reshape of a shape both read alike
    if op == "Reshape" and values.get("shape") == [0, -1] and not values.get("reverse"):
        op, values = "Flatten", {}  # gluon's Flatten before 1.1
    if op in ACTIVATION_OPS:
        op, values = "Activation", {"act_type": ACTIVATION_OPS[op]}
    if op in REDUCTIONS:
        if "axis" in values and not isinstance(values["axis"], list):
            values["axis"] = [values["axis"]]
        if values.get("dtype") is not None and values.get("dtype") == input_dtype:
            del values["dtype"]  # 2.0's mean writes its input's dtype; 1.x's has no dtype
    out = dict(DEFAULTS.get(op, {}))
    out.update(values)
    kernel = out.get("kernel")
    if op in ("Convolution", "Deconvolution", "Pooling") and isinstance(kernel, list) and kernel:
        rank = len(kernel)
        for key, fill in (("stride", 1), ("pad", 0), ("dilate", 1), ("adj", 0)):
            if key == "dilate" and op == "Pooling" or key == "adj" and op != "Deconvolution":
                continue
            if not out.get(key):
                out[key] = [fill] * rank
        if "layout" not in out and rank in _LAYOUTS:
            out["layout"] = _LAYOUTS[rank]
    return op, out


def canonical_value(text):
    """An attribute's value as JSON: numbers, lists of them, 0/1 for booleans, strings; None for ``None``."""
    if isinstance(text, bool):
        return int(text)
    if isinstance(text, (int, float)):
        return _number(text)
    if isinstance(text, (list, tuple)):
        return [canonical_value(v) for v in text]
    s = str(text).strip()
    if s in ("None", "none", ""):
        return None
    if s in ("True", "true"):
        return 1
    if s in ("False", "false"):
        return 0
    if s[:1] in "([" and s[-1:] in ")]":
        try:
            parsed = ast.literal_eval(s)
        except (ValueError, SyntaxError):
            parsed = [p for p in (q.strip() for q in s[1:-1].split(",")) if p]
        if isinstance(parsed, (list, tuple)):
            return [canonical_value(v) for v in parsed]
    try:
        return int(s)
    except ValueError:
        pass
    try:
        return _number(float(s))
    except ValueError:
        return s


def _number(value):
    if isinstance(value, int):
        return value
    if math.isnan(value) or math.isinf(value):
        return str(value)
    value = float("%.7g" % value)
    return int(value) if value.is_integer() and abs(value) < 1e15 else value


# -- model versions and differences ------------------------------------------------------------------------------
def structure(description):
    """The hashed part of a description: no parameter, input or node names, no release."""
    return dict((k, description[k]) for k in HASHED if k in description)


def canonical_json(description):
    return json.dumps(structure(description), sort_keys=True, separators=(",", ":"))


def model_version(description):
    """16 hex digits of the SHA-256 of the description's structure (:func:`structure`) as canonical JSON."""
    return hashlib.sha256(canonical_json(description).encode("utf-8")).hexdigest()[:16]


def diff(a, b, limit=10):
    """Short sentences on how architecture ``b`` differs from ``a``; ``[]`` when their model versions are equal.

    Nodes are aligned by the longest matching runs of their operator names (difflib), then compared
    pair by pair: operator, attributes, parameter shapes and edges. The same change at several
    nodes is one sentence naming them. At most ``limit`` sentences, the last saying how many more there are.
    """
    if model_version(a) == model_version(b):
        return []
    out = []
    if a.get("format") != b.get("format"):
        out.append("description format %s -> %s" % (a.get("format"), b.get("format")))
    if a["inputs"] != b["inputs"]:
        out.append("inputs %s -> %s" % (_inputs_text(a["inputs"]), _inputs_text(b["inputs"])))
    if a.get("labels") != b.get("labels"):
        out.append("label inputs %s -> %s" % (a.get("labels"), b.get("labels")))
    na, nb = a["nodes"], b["nodes"]
    if len(na) != len(nb):
        out.append("%d nodes -> %d" % (len(na), len(nb)))
    if len(a["params"]) != len(b["params"]) or _size(a) != _size(b):
        out.append("%d parameters (%s values) -> %d (%s)" % (len(a["params"]), _size(a), len(b["params"]), _size(b)))
    ops_a, ops_b = [n["op"] for n in na], [n["op"] for n in nb]
    opcodes = difflib.SequenceMatcher(None, ops_a, ops_b, autojunk=False).get_opcodes()
    to_b = {}
    for tag, i1, i2, j1, j2 in opcodes:
        if tag == "equal" or tag == "replace" and i2 - i1 == j2 - j1:
            to_b.update(zip(range(i1, i2), range(j1, j2)))
    groups = []  # [sentence, side ("" or " of the second"), node indexes] in order of first occurrence
    index = {}

    def note(text, node, side=""):
        if (text, side) not in index:
            index[(text, side)] = len(groups)
            groups.append((text, side, []))
        groups[index[(text, side)]][2].append(node)

    for tag, i1, i2, j1, j2 in opcodes:
        if tag == "equal" or tag == "replace" and i2 - i1 == j2 - j1:
            for i, j in zip(range(i1, i2), range(j1, j2)):
                for text in _node_changes(a, b, i, j, to_b):
                    note(text, i)
            continue
        for i in range(i1, i2):  # delete, or a replace of runs of different lengths
            note("%s: removed" % _node_text(na[i]), i)
        for j in range(j1, j2):
            note("%s: added" % _node_text(nb[j]), j, " of the second")
    for text, side, nodes in groups:
        out.append("%s %s" % (_nodes_text(nodes, side), text))
    mapped = [_map_edge(e, to_b) for e in a["outputs"]]
    if mapped != [_b_edge(e) for e in b["outputs"]]:
        out.append("outputs %s -> %s" % (", ".join(a["outputs"]), ", ".join(b["outputs"])))
    if not out:
        out.append("model versions differ: %s -> %s" % (model_version(a), model_version(b)))
    if len(out) > limit:  # the last line says how many were left out
        out = out[: max(limit - 1, 0)] + ["... %d more differences" % (len(out) - max(limit - 1, 0))]
    return out


def _node_changes(a, b, i, j, to_b):
    """Sentences (without the node's number) on how node ``i`` of ``a`` differs from node ``j`` of ``b``."""
    x, y = a["nodes"][i], b["nodes"][j]
    if x["op"] != y["op"]:
        return ["%s -> %s" % (_node_text(x), _node_text(y))]
    out = []
    for key in sorted(set(x["attrs"]) | set(y["attrs"])):
        if x["attrs"].get(key) != y["attrs"].get(key):
            out.append(
                "%s: %s %s -> %s" % (x["op"], key, _value_text(x["attrs"].get(key)), _value_text(y["attrs"].get(key)))
            )
    px, py = _node_params(a, x), _node_params(b, y)
    if [r for r, _ in px] != [r for r, _ in py]:
        out.append("%s: parameters %s -> %s" % (x["op"], _roles_text(px), _roles_text(py)))
    else:
        for (role, sx), (_, sy) in zip(px, py):
            if sx != sy:
                out.append("%s: %s shape %s -> %s" % (x["op"], role, _value_text(sx), _value_text(sy)))
    ex = [_map_edge(e, to_b) for e in x["inputs"]]
    ey = [_b_edge(e) for e in y["inputs"]]
    if len(ex) != len(ey):
        shown = [", ".join(_edge_text(d, e) for e in n["inputs"]) for d, n in ((a, x), (b, y))]
        out.append("%s: inputs %s -> %s" % (x["op"], shown[0], shown[1]))
    else:
        for k, (ea, eb) in enumerate(zip(ex, ey)):
            if ea != eb:
                shown = (_edge_text(a, x["inputs"][k]), _edge_text(b, y["inputs"][k]))
                out.append("%s: input %d %s -> %s" % ((x["op"], k) + shown))
    return out


def _edge_text(desc, edge):
    """An edge with what it comes from: ``n7 (_zeros)``, ``p3 (weight)``, ``in0``."""
    ref = edge.partition(".")[0]
    if ref.startswith("n"):
        return "%s (%s)" % (edge, desc["nodes"][int(ref[1:])]["op"])
    if ref.startswith("p"):
        return "%s (%s)" % (edge, desc["params"][int(ref[1:])]["role"])
    return edge


def _node_params(desc, node):
    out = []
    for edge in node["inputs"]:
        if edge.startswith("p"):
            param = desc["params"][int(edge[1:].split(".")[0])]
            out.append((param["role"], param["shape"]))
    return out


def _map_edge(edge, to_b):
    """An edge of the first description as the second would name it (parameters by role: shapes are compared apart)."""
    ref, _, out = edge.partition(".")
    if ref.startswith("n"):
        j = to_b.get(int(ref[1:]))
        return ("n", j if j is not None else "?%s" % ref, out)
    if ref.startswith("p"):
        return ("p", None, out)
    return (ref, None, out)


def _b_edge(edge):
    ref, _, out = edge.partition(".")
    if ref.startswith("n"):
        return ("n", int(ref[1:]), out)
    if ref.startswith("p"):
        return ("p", None, out)
    return (ref, None, out)


def _size(desc):
    total = 0
    for p in desc["params"]:
        if p["shape"] is None or None in p["shape"]:
            return "?"
        n = 1
        for d in p["shape"]:
            n *= d
        total += n
    return total


def _value_text(value):
    if value is None:
        return "-"
    if isinstance(value, list):
        return "(%s)" % ", ".join(_value_text(v) for v in value) if len(value) != 1 else "(%s,)" % _value_text(value[0])
    return str(value)


def _node_text(node, keys=("act_type", "pool_type", "kernel", "stride", "num_filter", "num_hidden", "a_min", "a_max")):
    shown = ["%s=%s" % (k, _value_text(node["attrs"][k])) for k in keys if k in node["attrs"]]
    return "%s(%s)" % (node["op"], ", ".join(shown)) if shown else node["op"]


def _roles_text(params):
    return "[%s]" % ", ".join(r for r, _ in params)


def _inputs_text(inputs):
    return ", ".join("%s %s" % (_value_text(i["shape"]), i["dtype"]) for i in inputs)


def _nodes_text(nodes, side=""):
    if len(nodes) == 1:
        return "node %d%s" % (nodes[0], side)
    shown = ", ".join(str(n) for n in nodes[:4]) + (", ..." if len(nodes) > 4 else "")
    return "%d nodes%s (%s)" % (len(nodes), side, shown)
