"""The remedies' own rules (needs mxnet: runs inside the environments, 1.0 to 2.0)."""

import json
import os
import shutil
import tempfile

import mxnet as mx
import numpy as np

from kit.common.remedy_reasons import no_remedy_reason
from kit.kernel.mx import mxapi
from kit.kernel.remedies import attempts, base, graph, params


def _nd(shape, start):
    return mx.nd.array(np.arange(start, start + int(np.prod(shape)), dtype=np.float32).reshape(shape))


def test_rnn_gates_fold_into_the_fused_order_and_unfold_back():
    # a bidirectional one-layer RNN as 1.x save_parameters names it, biases before weights on purpose
    names = ["embedding.weight"]
    for d in ("l", "r"):
        for g, t, shape in (
            ("i2h", "bias", (8,)),
            ("h2h", "bias", (8,)),
            ("i2h", "weight", (8, 3)),
            ("h2h", "weight", (8, 2)),
        ):
            names.append(("rnn._unfused.0.%s_cell.%s_%s" % (d, g, t), shape))
    arrays, start = {"embedding.weight": _nd((5, 3), 0)}, 1000
    for name, shape in names[1:]:
        arrays[name] = _nd(shape, start)
        start += 1000
    named, folded = params.fold_rnn_params(arrays)
    assert [n for n, _ in named] == ["embedding.weight", "rnn.rnn_param"] and len(folded) == 1
    flat = named[1][1].asnumpy()
    assert flat.size == 2 * (8 + 8 + 24 + 16)
    # weights first (l: i2h, h2h; r: i2h, h2h), then biases in the same order
    firsts = [flat[0], flat[24], flat[40], flat[64], flat[80], flat[88], flat[96], flat[104]]

    def key(d, g, t):
        return arrays["rnn._unfused.0.%s_cell.%s_%s" % (d, g, t)].asnumpy().reshape(-1)[0]

    assert firsts == [
        key("l", "i2h", "weight"),
        key("l", "h2h", "weight"),
        key("r", "i2h", "weight"),
        key("r", "h2h", "weight"),
        key("l", "i2h", "bias"),
        key("l", "h2h", "bias"),
        key("r", "i2h", "bias"),
        key("r", "h2h", "bias"),
    ]
    targets = dict((n, s) for n, s in names[1:])
    back, unfolded = params.unfold_rnn_params({"rnn.rnn_param": named[1][1]}, targets)
    assert len(unfolded) == 1
    for name in targets:
        assert np.array_equal(back[name].asnumpy(), arrays[name].asnumpy()), name


def test_fused_1x_names_fold_too_and_a_projection_is_refused():
    arrays = {"lstm0_l0_i2h_weight": _nd((8, 3), 0), "lstm0_l0_h2h_weight": _nd((8, 2), 100)}
    named, folded = params.fold_rnn_params(arrays, separator="_")
    assert [n for n, _ in named] == ["lstm0_rnn_param"] and named[0][1].shape == (40,)
    try:
        params.fold_rnn_params({"lstm0_l0_h2r_weight": _nd((2, 2), 0)})
        raise AssertionError("a projection must be refused")
    except base.Refused as e:
        assert "projection" in str(e)


def test_names_map_by_structure_only_where_unambiguous():
    saved = [("conv0_weight", (6, 1, 5, 5)), ("conv0_bias", (6,)), ("dense0_weight", (4, 64)), ("dense0_bias", (4,))]
    wanted = [("0.weight", (6, 1, 5, 5)), ("0.bias", (6,)), ("3.weight", (4, 64)), ("3.bias", (4,))]
    assert params.map_by_structure(saved, wanted) == {
        "conv0_weight": "0.weight",
        "conv0_bias": "0.bias",
        "dense0_weight": "3.weight",
        "dense0_bias": "3.bias",
    }
    shuffled = [saved[2], saved[0], saved[3], saved[1]]  # order lost, but every (kind, shape) is unique
    assert params.map_by_structure(shuffled, wanted)["dense0_bias"] == "3.bias"
    twins = [("a.weight", (4, 4)), ("c.bias", (4,)), ("b.weight", (4, 4))]
    cases = (
        (saved[:3], wanted, "no one-to-one"),
        ([("y_bias", (4,)), ("x_weight", (4, 4)), ("z_weight", (4, 4))], twins, "ambiguous"),
    )
    for bad, target, why in cases:
        try:
            params.map_by_structure(bad, target)
            raise AssertionError("must refuse: " + why)
        except base.Refused as e:
            assert why in str(e), str(e)


def test_graph_attributes_drop_only_at_their_default():
    conv = {"op": "Convolution", "name": "c", "attrs": {"kernel": "(5, 5)", "layout": "NCHW"}}
    assert graph._is_default("layout", conv)
    assert not graph._is_default("layout", dict(conv, attrs={"kernel": "(5, 5)", "layout": "NHWC"}))
    assert graph._is_default("layout", dict(conv, attrs={"kernel": "(3,)", "layout": "NCW"}))
    assert not graph._is_default("sparse_grad", {"op": "Embedding", "attrs": {"sparse_grad": "True"}})


def _work(graph):
    folder = tempfile.mkdtemp()
    with open(os.path.join(folder, "model-symbol.json"), "w") as f:
        json.dump(graph, f)
    manifest = {"load": {"symbol_file": "model-symbol.json", "param_file": "model-0000.params"}, "inputs": []}
    work = base.Work(None, None, "1.4.1", "1.9.1", "export", folder, manifest)
    shutil.rmtree(folder)
    return work


def test_a_non_default_attribute_is_refused_not_dropped():
    node = {"op": "Convolution", "name": "conv0", "inputs": [], "attrs": {"kernel": "(5, 5)", "layout": "NHWC"}}
    work = _work({"nodes": [node]})
    try:
        base.by_name("drop_default_attributes").apply(work, "Cannot find argument 'layout'")
        raise AssertionError("NHWC changes the computation")
    except base.Refused as e:
        assert "conv0(layout=NHWC)" in str(e)
    finally:
        work.close()
    work = _work({"nodes": [dict(node, attrs={"kernel": "(5, 5)", "layout": "NCHW"})]})
    try:
        said = base.by_name("drop_default_attributes").apply(work, "Cannot find argument 'layout'")
        assert said == "dropped layout from 1 node(s) (the default value)"
        with open(work.path("model-symbol.json")) as f:
            assert "layout" not in json.load(f)["nodes"][0]["attrs"]
    finally:
        work.close()


def test_unknown_begin_state_dims_become_minus_one_and_nothing_else_moves():
    nodes = [
        {"op": "_zeros", "name": "h0", "inputs": [], "attrs": {"shape": "(1, 0, 24)"}},
        {"op": "_zeros", "name": "big", "inputs": [], "attrs": {"shape": "(10, 20)"}},
        {"op": "Reshape", "name": "r", "inputs": [], "attrs": {"shape": "(0, -1)"}},  # 0 means "copy": kept
    ]
    work = _work({"nodes": nodes})
    try:
        said = base.by_name("np_shape_unknown_dims").apply(work, "")
        assert said == "shapes rewritten: h0 (1, 0, 24) -> (1, -1, 24)"
        with open(work.path("model-symbol.json")) as f:
            shapes = [n["attrs"]["shape"] for n in json.load(f)["nodes"]]
        assert shapes == ["(1, -1, 24)", "(10, 20)", "(0, -1)"]
    finally:
        work.close()


def test_the_registry_names_each_remedy_once_with_code_a_user_can_run():
    names = [r.name for r in attempts.in_order()]
    assert len(names) == len(set(names)) and "legacy_shape_semantics" in names
    for remedy in attempts.in_order():
        assert remedy.title and remedy.changes and remedy.user_code.strip(), remedy.name
        assert remedy.changes in (
            base.LOADING_MODE,
            base.PARAMETER_MAPPING,
            base.GRAPH_EDIT,
            base.RESAVE,
            base.EXPORT_SETTING,
        )
    assert no_remedy_reason("Operator _npi_add is not registered").startswith(
        "operator _npi_add is one of MXNet's numpy operators"
    )


def test_a_remedys_private_copy_never_follows_a_name_out_of_the_artifact():
    """A manifest whose load names leave the artifact: the copy is refused before anything is copied, so
    nothing is read from outside or written outside the private folder (none is even made)."""

    root = tempfile.mkdtemp()
    folder = os.path.join(root, "store", "1.4.1", "m", "export")
    os.makedirs(folder)
    with open(os.path.join(root, "secret.params"), "w") as f:
        f.write("not the artifact's")
    made = []
    real_mkdtemp = base.tempfile.mkdtemp
    base.tempfile.mkdtemp = lambda *a, **k: made.append(a) or real_mkdtemp(*a, **k)
    try:
        for load in (
            {"symbol_file": "model-symbol.json", "param_file": "../../../../secret.params"},
            {"prefix": "../../../../secret", "epoch": 0},
            {"symbol_file": "/etc/hostname", "param_file": None},
        ):
            try:
                base.Work(None, None, "1.9.1", "1.4.1", "export", folder, {"load": load, "inputs": []})
            except ValueError as e:
                assert "manifest refused" in str(e) and "not a plain relative name" in str(e), e
            else:
                raise AssertionError("a traversing name was taken: %r" % (load,))
        assert made == []
    finally:
        base.tempfile.mkdtemp = real_mkdtemp
        shutil.rmtree(root)


def _forward(sym, arrays, x):
    args = dict(arrays, data=mx.nd.array(x))
    exe = mxapi.bind(
        sym,
        dict((k, v) for k, v in args.items() if k in sym.list_arguments()),
        dict((k, v) for k, v in args.items() if k in sym.list_auxiliary_states()),
    )
    return exe.forward(is_train=False)[0].asnumpy()


def test_the_export_rewrites_compute_what_mxnet_computes_from_the_same_stored_values():
    """PReLU as relu(x) - slope * relu(-x) and SoftmaxActivation as softmax (both modes), rebuilt node by node:
    MXNet computes the same outputs from the unchanged parameters (the slope per channel, not broadcast)."""
    if not (hasattr(mx.sym, "SoftmaxActivation") and hasattr(mx.sym, "LeakyReLU")):
        return  # a release without the legacy operators has no such checkpoints
    from kit.kernel.remedies import export_ops

    x = mx.sym.var("data")
    y = mx.sym.Convolution(x, num_filter=4, kernel=(3, 3), pad=(1, 1), name="conv1")
    y = mx.sym.BatchNorm(y, name="bn1")
    y = mx.sym.LeakyReLU(y, act_type="prelu", name="prelu1")
    y = mx.sym.SoftmaxActivation(y, mode="channel", name="cls_prob")
    y = mx.sym.FullyConnected(mx.sym.Flatten(y), num_hidden=5, name="fc1")
    sym = mx.sym.SoftmaxActivation(y, name="fc1_prob")
    shapes = {"data": (2, 3, 6, 6)}
    arg_shapes, _, aux_shapes = sym.infer_shape(**shapes)
    rng = np.random.RandomState(0)
    arrays = dict(
        (n, mx.nd.array(rng.uniform(-1, 1, s)))
        for n, s in list(zip(sym.list_arguments(), arg_shapes)) + list(zip(sym.list_auxiliary_states(), aux_shapes))
        if n != "data"
    )
    arrays["prelu1_gamma"] = mx.nd.array([0.1, 0.5, -0.3, 2.0])  # a slope per channel, none of them alike
    arrays["bn1_moving_var"] = mx.nd.array([1.0, 2.0, 0.5, 1.5])
    x_value = rng.uniform(-2, 2, shapes["data"]).astype(np.float32)
    expected = _forward(sym, arrays, x_value)

    def replace(node, inputs, attrs, shape):  # both rewrites, as a user who pastes both would combine them
        prelu = export_ops.prelu_on_channels(node, inputs, attrs, shape)
        return prelu if prelu is not None else export_ops.softmax_by_mode(node, inputs, attrs, shape)

    rebuilt = export_ops.rebuild(sym, replace, shapes)
    ops = set(n["op"] for n in json.loads(rebuilt.tojson())["nodes"])
    assert "LeakyReLU" not in ops and "SoftmaxActivation" not in ops and "softmax" in ops, ops
    assert sorted(rebuilt.list_arguments()) == sorted(sym.list_arguments())  # the saved parameters still bind
    got = _forward(rebuilt, arrays, x_value)
    assert got.shape == expected.shape and np.abs(got - expected).max() < 1e-5, np.abs(got - expected).max()
    unchanged = export_ops.rebuild(sym, lambda node, inputs, attrs, shape: None)
    assert np.abs(_forward(unchanged, arrays, x_value) - expected).max() == 0.0


def test_preflight_names_what_the_exporter_misreads_and_each_trap_names_a_registered_remedy():
    """A graph with BatchNorm at fix_gamma's default and a stored gamma of 2, LRN without knorm and a
    FullyConnected on a 4-D input: three wrong-number findings with their remedies; the same graph with its
    attributes written out, gamma ones and the input flattened, none."""
    from kit.kernel.exits import preflight

    names = [r.name for r in attempts.in_order()]
    assert all(t.remedy in names for t in preflight.TRAPS if t.remedy), [t.remedy for t in preflight.TRAPS]
    root = tempfile.mkdtemp()
    try:
        found = {}
        for case, explicit in (("as_converted", False), ("spelled_out", True)):
            x = mx.sym.Convolution(mx.sym.var("data"), num_filter=3, kernel=(3, 3), pad=(1, 1), name="conv")
            x = mx.sym.BatchNorm(x, name="bn", **({"fix_gamma": False} if explicit else {}))
            x = mx.sym.LRN(x, nsize=3, name="lrn", **({"knorm": 2.0} if explicit else {}))
            x = mx.sym.FullyConnected(mx.sym.Flatten(x) if explicit else x, num_hidden=2, name="fc")
            sym_path, params_path = os.path.join(root, case + "-symbol.json"), os.path.join(root, case + ".params")
            x.save(sym_path)
            gamma = mx.nd.ones((3,)) * (1 if explicit else 2)
            mx.nd.save(params_path, {"arg:bn_gamma": gamma, "arg:bn_beta": mx.nd.zeros((3,))})
            found[case] = preflight.check(sym_path, params_path, {"data": (2, 3, 8, 8)}, ["onnx", "torch"])
        said = dict((f["op"], (f["effect"], f["remedy"], f["exits"])) for f in found["as_converted"]["findings"])
        assert said == {
            "BatchNorm": ("wrong numbers", "fix_gamma_as_stored_ones", ["onnx", "torch"]),
            "LRN": ("wrong numbers", "mxnet_defaults_spelled_out", ["onnx", "torch"]),
            "FullyConnected": ("wrong numbers", "mxnet_defaults_spelled_out", ["onnx", "torch"]),
        }, said
        assert found["spelled_out"]["findings"] == [], found["spelled_out"]["findings"]
        ops = dict((o["op"], o) for o in found["as_converted"]["operators"])
        assert ops["LRN"]["attrs"] == {"nsize": ["3"]} and ops["Convolution"]["count"] == 1
    finally:
        shutil.rmtree(root, ignore_errors=True)
