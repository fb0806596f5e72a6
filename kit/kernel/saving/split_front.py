"""Transforms split off: an end-to-end artifact's network checked alone, fed by the loading release's eager transforms.

An end-to-end model (``spec.fused_front``: ``e2e``, ``e2e_resnet18``) has its data transforms
(Resize, ToTensor, Normalize, a batch axis) fused into the saved graph, so a difference in its
outputs may come from the transforms or from the network. ``check_network_only`` tells them apart:

- ``cut_network`` cuts the artifact's graph where the transforms end: every node up to and
  including the last transform becomes one new input variable (``transformed_data``);
- the loading release builds the model from its own code and runs its ``front`` eagerly
  (not hybridized) on each reference case's raw pixels;
- the network alone, bound with the artifact's weights, runs on that and is compared with
  the reference outputs (the saving release's full graph), as ``reload_run.check_artifact`` does;
- ``transforms`` compares the graph's own fused transforms (the cut node's output of the full
  graph, through ``get_internals``) with the eager transforms' output.

The graph JSON is edited as text so that every release's format loads back: 1.1's ``attr`` and
later ``attrs`` pass through untouched, ``node_row_ptr`` is dropped (the loader rebuilds it).
"""

import json
import traceback

import mxnet as mx

from kit.common import metrics, tolerance, verdicts
from kit.common.capabilities import C_PREDICT_API, FOREIGN_API
from kit.kernel.mx import mxapi
from kit.kernel.mx.internals import GraphUnavailable
from kit.kernel.mx.training import gluon_input, module_predict

#: the ops the fused transforms leave in an exported graph, as 1.1-1.9 and 2.0 write them
#: (Resize is in the graph from 1.5 on; ``expand_dims`` is AddBatchAxis of the single-image variant)
TRANSFORM_OPS = ("_image_resize", "_image_to_tensor", "_image_normalize", "expand_dims")
#: the name of the network's new input: what the transforms produce
INPUT_NAME = "transformed_data"


def cut_graph(graph, input_names=("data",), transform_ops=TRANSFORM_OPS, input_name=INPUT_NAME):
    """Cut a symbol's JSON (a dict) where the transforms that read ``input_names`` end.

    The front is every node whose op is in ``transform_ops`` and whose inputs are raw inputs or
    front nodes; it must end in one node (the cut), read by the rest of the graph through its
    first output only. Returns ``(graph, input_name, cut_name, front_ops)``: a new dict whose
    nodes are those reachable from the heads, the cut node replaced by a variable ``input_name``
    (a suffix added if the graph has that name), inputs, ``arg_nodes`` and heads re-indexed;
    ``front_ops`` the ops of the nodes cut off, in order. Raises ``ValueError`` for a graph
    without such a front, or whose network still reads a raw input.
    """
    nodes, wanted = graph["nodes"], set(input_names)
    raw = set(i for i, n in enumerate(nodes) if n["op"] == "null" and n["name"] in wanted)
    if not raw:
        raise ValueError("the graph has no input named %s" % " or ".join(repr(n) for n in input_names))
    in_front = set()
    for i, n in enumerate(nodes):  # in topological order: a node's inputs come before it
        if n["op"] in transform_ops and n["inputs"] and all(e[0] in raw or e[0] in in_front for e in n["inputs"]):
            in_front.add(i)
    if not in_front:
        raise ValueError(
            "no fused transform (%s) reads the input %s" % (", ".join(transform_ops), ", ".join(sorted(input_names)))
        )
    heads = graph["heads"]
    exits = set(e[0] for e in heads if e[0] in in_front)
    for i, n in enumerate(nodes):
        if i not in in_front:
            exits.update(e[0] for e in n["inputs"] if e[0] in in_front)
    if len(exits) != 1:
        raise ValueError(
            "the transforms end in %d nodes (%s), not one"
            % (len(exits), ", ".join(nodes[i]["name"] for i in sorted(exits)) or "none read by the network")
        )
    cut = exits.pop()
    for i, n in enumerate(nodes):
        if i not in in_front and any(e[0] == cut and len(e) > 1 and e[1] != 0 for e in n["inputs"]):
            raise ValueError("node %r reads an output of %r other than its first" % (n["name"], nodes[cut]["name"]))
    keep, todo = set(), [e[0] for e in heads]
    while todo:
        i = todo.pop()
        if i in keep:
            continue
        keep.add(i)
        if i != cut:
            todo.extend(e[0] for e in nodes[i]["inputs"])
            todo.extend(nodes[i].get("control_deps") or [])
    still = sorted(nodes[i]["name"] for i in keep & raw)
    if still:
        raise ValueError("the network reads the raw input %s besides the transforms' output" % ", ".join(still))
    names = set(nodes[i]["name"] for i in keep if i != cut)
    name, k = input_name, 0
    while name in names:
        k += 1
        name = "%s_%d" % (input_name, k)
    order = sorted(keep)
    index = dict((old, new) for new, old in enumerate(order))
    new_nodes = []
    for old in order:
        if old == cut:
            new_nodes.append({"op": "null", "name": name, "inputs": []})
            continue
        node = dict(nodes[old])
        node["inputs"] = [[index[e[0]]] + list(e[1:]) for e in node["inputs"]]
        if node.get("control_deps"):
            node["control_deps"] = [index[d] for d in node["control_deps"]]
        new_nodes.append(node)
    out = dict((k, v) for k, v in graph.items() if k not in ("nodes", "arg_nodes", "heads", "node_row_ptr"))
    out["nodes"] = new_nodes
    out["arg_nodes"] = [i for i, n in enumerate(new_nodes) if n["op"] == "null"]
    out["heads"] = [[index[e[0]]] + list(e[1:]) for e in heads]
    cut_off = _ancestors(nodes, cut) & in_front
    return out, name, nodes[cut]["name"], [nodes[i]["op"] for i in sorted(cut_off)]


def _ancestors(nodes, i):
    """``i`` and every node it reads, directly or not."""
    seen, todo = set(), [i]
    while todo:
        j = todo.pop()
        if j not in seen:
            seen.add(j)
            todo.extend(e[0] for e in nodes[j]["inputs"])
    return seen


def load_json(text):
    """A symbol from its JSON: ``mx.sym.load_json`` in 1.x, ``fromjson`` in 2.0."""
    loader = getattr(mx.sym, "load_json", None) or getattr(mx.sym, "fromjson")
    return loader(text)


def cut_network(symbol, input_names=("data",)):
    """``(network_symbol, input_name, cut_node_name)``: ``symbol`` without its fused transforms.

    The network reads one new variable (``input_name``, normally ``transformed_data``) where the
    transforms' last node was; its other arguments are the network's parameters.
    """
    graph, name, cut, _ = cut_graph(json.loads(symbol.tojson()), input_names)
    return load_json(json.dumps(graph)), name, cut


def front_ops(symbol, input_names=("data",)):
    """The ops of the fused transforms in ``symbol``, in order (what :func:`cut_network` cuts off)."""
    return cut_graph(json.loads(symbol.tojson()), input_names)[3]


def fused_front(symbol, cut_name):
    """The full graph's output at node ``cut_name`` (what its own fused transforms produce)."""
    internals = symbol.get_internals()
    outputs = internals.list_outputs()
    wanted = cut_name + "_output"
    if wanted not in outputs:
        wanted = next((o for o in outputs if o.startswith(cut_name + "_output")), None)
        if wanted is None:
            raise KeyError("the graph has no output of node %r" % cut_name)
    return internals[outputs.index(wanted)]


def eager_front(spec, release, variant=None):
    """The transforms as ``release`` builds the model (in the artifact's ``variant``), never hybridized."""
    return spec.build(release, variant or None).front


#: APIs whose artifacts the kit runs through a bound Module (1.x); the others through a SymbolBlock
MODULE_APIS = ("module_checkpoint", FOREIGN_API)


def runner(sym, arg_params, aux_params, names, label_names=(), api=None):
    """``(path, run)``: ``run(inputs)`` gives ``sym``'s outputs (numpy) on a dict of named inputs, as the
    artifact's API loads it. 1.x: a bound Module for Module checkpoints, else a SymbolBlock (export and
    SymbolBlock.imports run a CachedOp, which fuses differently from a Module's executor under MKLDNN);
    2.0 has no Module: a SymbolBlock either way."""
    names, label_names = list(names), list(label_names)
    if api in MODULE_APIS or not hasattr(mx, "mod"):

        def run(inputs):
            return module_predict(sym, arg_params, aux_params, names, label_names, inputs)

        return ("module" if hasattr(mx, "mod") else "symbol_block"), run
    block = mxapi.symbol_block(sym, names + label_names)
    values = dict(arg_params)
    values.update(aux_params)
    for name, param in block.collect_params().items():
        param._load_init(values[name], mx.cpu())  # 1.0-1.9: what ParameterDict.load does per parameter

    def run(inputs):
        batch = inputs[names[0]].shape[0] if inputs[names[0]].ndim else 1
        labels = [mx.nd.zeros((batch,)) for _ in label_names]
        return mxapi.to_numpy(block(*([gluon_input(inputs[n]) for n in names] + labels)))

    return "symbol_block", run


def _failure(verdict, reason, exc, tb=None, **extra):
    out = {
        "verdict": verdict,
        "reason": (reason or "") + "%s: %s" % (type(exc).__name__, verdicts.headline(exc)),
        "error": str(exc),
        "error_type": type(exc).__name__,
    }
    if tb:
        out["traceback"] = "\n".join(tb.strip().splitlines()[-12:])
    out.update(extra)
    return out


def _compared(pairs, tol_for):
    """``{"verdict", "reason", "summary", "cases"}`` of ``pairs``: case -> (actual outputs, expected outputs)."""
    cases, everything = {}, []
    for case in sorted(pairs):
        got, expected = pairs[case]
        if len(got) != len(expected):
            return {
                "verdict": verdicts.MISMATCH,
                "reason": "case %r: %d outputs, reference has %d" % (case, len(got), len(expected)),
                "summary": None,
                "cases": cases,
            }
        cases[case] = [metrics.compare(a, e, tol_for(e.dtype)) for a, e in zip(got, expected)]
        everything.extend(cases[case])
    verdict, reason = verdicts.from_metrics(everything)
    return {"verdict": verdict, "reason": reason, "summary": metrics.summarize(everything), "cases": cases}


def check_network_only(spec, release, folder, manifest, adapter, reference, overrides=None):
    """The end-to-end artifact in ``folder``: its network alone, fed by ``release``'s eager transforms.

    ``reference`` is ``artifacts.load_reference``'s dict, ``adapter`` the artifact's API's adapter.
    Returns None for a model without fused transforms; else a dict: ``verdict``, ``reason``,
    ``summary``, ``cases`` (case -> metrics of each output against the reference) of the network
    alone; ``cut_after`` (the graph's last transform node), ``front_ops``, ``input_name``,
    ``network_path`` (``module`` or ``symbol_block``: how the network alone ran, see :func:`runner`); and
    ``transforms``, the same form, of the graph's fused transforms (the cut node's output) against
    the eager ones. Loading or running failures give ``load-error``/``infer-error`` with ``reason``
    and ``error``; a release that cannot build the model, ``unsupported``. ``overrides`` come checked
    (``reload_run.reload_all`` validates the notebook's tolerance once).
    """
    if spec is None or not getattr(spec, "fused_front", False):
        return None
    model = manifest.get("model") or spec.name
    own = getattr(spec, "tolerance", None)

    def tol_for(dtype):
        return tolerance.resolve(dtype, model, overrides, own)

    variant = manifest.get("variant") or None
    ok, reason = spec.supported(release, variant)
    if not ok:
        return {"verdict": verdicts.UNSUPPORTED, "reason": "loading release: %s" % reason}
    names = [i["name"] for i in manifest.get("inputs") or []] or ["data"]
    labels = list((manifest.get("load") or {}).get("label_names") or [])
    try:
        front = eager_front(spec, release, variant)
    except Exception as e:  # noqa: BLE001 - every failure is a verdict
        return _failure(verdicts.LOAD_ERROR, "building the eager transforms: ", e, traceback.format_exc())
    try:
        sym, arg, aux = adapter.load_graph(spec, release, folder, manifest)
    except GraphUnavailable as e:
        return {"verdict": verdicts.UNSUPPORTED, "reason": "loading release: %s" % e}
    except Exception as e:  # noqa: BLE001
        return _failure(verdicts.LOAD_ERROR, "loading the graph: ", e, traceback.format_exc())
    try:
        graph, input_name, cut, ops = cut_graph(json.loads(sym.tojson()), names)
        network = load_json(json.dumps(graph))
        transforms_sym = fused_front(sym, cut)
        params = [a for a in network.list_arguments() if a != input_name and a not in labels]
        missing = [a for a in params if a not in arg]
        if missing:
            raise KeyError("the artifact has no value for the network's parameters %s" % ", ".join(missing))
        missing = [a for a in network.list_auxiliary_states() if a not in aux]
        if missing:
            raise KeyError("the artifact has no value for the network's aux states %s" % ", ".join(missing))
        net_arg = dict((a, arg[a]) for a in params)
        net_aux = dict((a, aux[a]) for a in network.list_auxiliary_states())
    except Exception as e:  # noqa: BLE001
        return _failure(verdicts.LOAD_ERROR, "cutting the graph where the transforms end: ", e, traceback.format_exc())
    out = {"cut_after": cut, "front_ops": ops, "input_name": input_name}
    api = manifest.get("api") if adapter.name == C_PREDICT_API else adapter.name
    try:
        out["network_path"], run_network = runner(network, net_arg, net_aux, [input_name], labels, api)
    except Exception as e:  # noqa: BLE001
        return _failure(verdicts.LOAD_ERROR, "binding the network alone: ", e, traceback.format_exc(), **out)
    transforms_error = None
    try:
        run_transforms = runner(transforms_sym, {}, {}, names, (), api)[1]
    except Exception as e:  # noqa: BLE001 - the network's comparison does not need it
        transforms_error = _failure(verdicts.LOAD_ERROR, "binding the fused transforms: ", e, traceback.format_exc())
    eager, fused, network_out = {}, {}, {}
    for case in sorted(reference):
        raw = reference[case]["input"]
        step = "the eager transforms"
        try:
            transformed = mxapi.to_numpy(front(*[gluon_input(raw[n]) for n in names]))[0]
            eager[case] = [transformed]
            step = "the network alone"
            network_out[case] = run_network({input_name: transformed})
        except Exception as e:  # noqa: BLE001
            return _failure(verdicts.INFER_ERROR, "%s, case %r: " % (step, case), e, traceback.format_exc(), **out)
        if transforms_error is None:
            try:
                fused[case] = run_transforms(raw)
            except Exception as e:  # noqa: BLE001 - the network's comparison does not need it
                transforms_error = _failure(
                    verdicts.INFER_ERROR, "the fused transforms, case %r: " % case, e, traceback.format_exc()
                )
    pairs = dict((case, (network_out[case], reference[case]["output"])) for case in reference)
    out.update(_compared(pairs, tol_for))
    # the graph's transforms are the reference here: "does this release's eager code compute what the graph does?"
    out["transforms"] = transforms_error or _compared(
        dict((case, (eager[case], fused[case])) for case in reference), tol_for
    )
    return out
