"""The C predict API through ctypes against the same graph run in Python (needs mxnet: runs in the environments)."""

import ctypes
import os
import shutil
import tempfile
from collections import OrderedDict

import mxnet as mx
import numpy as np
from mxnet import gluon

from kit.kernel.mx import mxapi
from kit.kernel.saving import c_predict


def _tmpdir():
    return tempfile.mkdtemp(prefix="kit-c-predict-")


def _read(prefix, epoch=0):
    with open("%s-symbol.json" % prefix) as f:
        symbol_json = f.read()
    with open("%s-%04d.params" % (prefix, epoch), "rb") as f:
        return symbol_json, f.read()


def _unavailable_says_why():
    """True (after checking the reason and that predict refuses) when this release has no C predict API."""
    ok, reason = c_predict.available()
    if ok:
        return False
    assert "MXPredCreate" in reason and mx.__version__ in reason, reason
    try:
        c_predict.predict("{}", b"", OrderedDict([("data", np.zeros((1, 2), np.float32))]))
    except c_predict.CPredictError as e:
        assert "MXPredCreate" in str(e)
    else:
        raise AssertionError("predict ran without a C predict API")
    return True


def test_available_matches_the_library():
    lib = ctypes.CDLL(c_predict.library_path())
    missing = [s for s in c_predict.REQUIRED_SYMBOLS if not hasattr(lib, s)]
    ok, reason = c_predict.available()
    assert ok == (not missing) and (reason is None) == ok, (missing, reason)
    for symbol in missing:
        assert symbol in reason, (symbol, reason)
    if mx.__version__.startswith("2."):  # MXNet 2.0 dropped include/mxnet/c_predict_api.h
        assert not ok and "has no MXPredCreate" in reason, reason
    else:  # 0.11 through 1.9 ship it
        assert ok, reason


def _export(net, x, folder):
    """``net.export`` (1.0+); in 0.11, which has no export, what export writes: the graph on ``data``
    and the parameters under ``arg:``/``aux:`` keys."""
    prefix = os.path.join(folder, "net")
    if hasattr(net, "export"):
        net.export(prefix)
        return prefix
    sym = net(mx.sym.var("data"))
    sym.save("%s-symbol.json" % prefix)
    args = set(sym.list_arguments())
    saved = dict(
        (("arg:" if name in args else "aux:") + name, p.data().copyto(mx.cpu()))
        for name, p in net.collect_params().items()
    )
    mx.nd.save("%s-0000.params" % prefix, saved)
    return prefix


def test_exported_hybrid_block_predicts_as_gluon():
    if _unavailable_says_why():
        return
    mxapi.prepare_kernel()
    mx.random.seed(7)
    net = gluon.nn.HybridSequential()
    mxapi.add(
        net,
        gluon.nn.Conv2D(4, 3, padding=1, activation="relu"),
        gluon.nn.BatchNorm(),
        gluon.nn.MaxPool2D(2),
        gluon.nn.Dense(6, activation="relu"),
        gluon.nn.Dense(3),
    )
    net.initialize(mx.init.Xavier(), mx.cpu())
    net.hybridize()
    x = np.random.RandomState(0).rand(2, 3, 8, 8).astype(np.float32)
    expected = mxapi.to_numpy(net(mxapi.array(x)))[0]
    folder = _tmpdir()
    try:
        prefix = _export(net, x, folder)
        symbol_json, param_bytes = _read(prefix)
        got = c_predict.predict(symbol_json, param_bytes, OrderedDict([("data", x)]))
        assert len(got) == 1 and got[0].shape == expected.shape == (2, 3) and got[0].dtype == np.float32
        assert np.allclose(got[0], expected, atol=1e-5), np.abs(got[0] - expected).max()
        again = c_predict.predict_files(prefix, 0, OrderedDict([("data", x[:1].astype(np.float64))]))
        assert again[0].shape == (1, 3) and np.allclose(again[0], expected[:1], atol=1e-5)
    finally:
        shutil.rmtree(folder)


def _mlp():
    data = mx.sym.var("data")
    hidden = mx.sym.Activation(mx.sym.FullyConnected(data, num_hidden=8, name="fc1"), act_type="relu", name="relu1")
    return mx.sym.SoftmaxOutput(mx.sym.FullyConnected(hidden, num_hidden=3, name="fc2"), name="softmax")


def test_module_checkpoint_with_softmax_head_predicts_as_module():
    if _unavailable_says_why():
        return
    mx.random.seed(3)
    sym = _mlp()
    x = np.random.RandomState(1).randn(5, 6).astype(np.float32)
    mod = mx.mod.Module(sym, data_names=["data"], label_names=["softmax_label"], context=mx.cpu())
    mod.bind(data_shapes=[("data", x.shape)], label_shapes=[("softmax_label", (5,))], for_training=False)
    mod.init_params(mx.init.Xavier())
    arg_params, aux_params = mod.get_params()
    expected = mod.predict(mx.io.NDArrayIter(x, None, batch_size=5)).asnumpy()
    folder = _tmpdir()
    try:
        prefix = os.path.join(folder, "mlp")
        mx.model.save_checkpoint(prefix, 0, sym, arg_params, aux_params)
        symbol_json, param_bytes = _read(prefix)
        assert c_predict.loss_labels(symbol_json) == ["softmax_label"]
        assert c_predict.unset_arguments(symbol_json, param_bytes, ["data"]) == []  # the label is no gap
        got = c_predict.predict(symbol_json, param_bytes, OrderedDict([("data", x)]))
        assert len(got) == 1 and got[0].shape == expected.shape == (5, 3)
        assert np.allclose(got[0], expected, atol=1e-5), np.abs(got[0] - expected).max()
        assert np.allclose(got[0].sum(axis=1), 1.0, atol=1e-5)  # the softmax head's probabilities
        # a label given explicitly is set like any input and changes nothing in inference
        labelled = OrderedDict([("data", x), ("softmax_label", np.array([0, 1, 2, 0, 1], np.float32))])
        assert np.allclose(c_predict.predict(symbol_json, param_bytes, labelled)[0], expected, atol=1e-5)
    finally:
        shutil.rmtree(folder)


def test_several_outputs_and_output_count():
    if _unavailable_says_why():
        return
    data = mx.sym.var("data")
    fc = mx.sym.FullyConnected(data, num_hidden=4, name="fc")
    sym = mx.sym.Group([fc, mx.sym.sigmoid(fc, name="sig"), mx.sym.sum(fc, axis=1, name="total")])
    rng = np.random.RandomState(2)
    params = {"fc_weight": rng.randn(4, 3).astype(np.float32), "fc_bias": rng.randn(4).astype(np.float32)}
    x = rng.randn(2, 3).astype(np.float32)
    args = dict((k, mx.nd.array(v)) for k, v in params.items())
    args["data"] = mx.nd.array(x)
    executor = mxapi.bind(sym, args, {})
    expected = [o.asnumpy() for o in executor.forward(is_train=False)]
    folder = _tmpdir()
    try:
        path = os.path.join(folder, "group-0000.params")
        mx.nd.save(path, dict(("arg:" + k, mx.nd.array(v)) for k, v in params.items()))
        with open(path, "rb") as f:
            param_bytes = f.read()
        got = c_predict.predict(sym.tojson(), param_bytes, OrderedDict([("data", x)]))
        assert [g.shape for g in got] == [(2, 4), (2, 4), (2,)]
        for g, e in zip(got, expected):
            assert np.allclose(g, e, atol=1e-5)
        assert len(c_predict.predict(sym.tojson(), param_bytes, OrderedDict([("data", x)]), output_count=1)) == 1
        # bare keys (save_parameters' layout) are skipped by MXPredCreate: strict mode names what would be unset
        mx.nd.save(path, dict((k, mx.nd.array(v)) for k, v in params.items()))
        with open(path, "rb") as f:
            bare = f.read()
        try:
            c_predict.predict(sym.tojson(), bare, OrderedDict([("data", x)]))
        except c_predict.CPredictError as e:
            assert "fc_weight" in str(e) and "fc_bias" in str(e) and e.mx_message is None, str(e)
        else:
            raise AssertionError("a parameter file without arg: keys ran")
        assert [g.shape for g in c_predict.predict(sym.tojson(), bare, OrderedDict([("data", x)]), strict=False)] == [
            (2, 4),
            (2, 4),
            (2,),
        ]
    finally:
        shutil.rmtree(folder)


def _error(symbol_json, param_bytes, inputs):
    try:
        c_predict.predict(symbol_json, param_bytes, inputs)
    except c_predict.CPredictError as e:
        assert e.mx_message and e.mx_message.strip() in str(e), str(e)
        assert isinstance(e, c_predict.KitError)
        return e
    raise AssertionError("no CPredictError")


def test_errors_carry_mxnets_message():
    if _unavailable_says_why():
        return
    x = OrderedDict([("data", np.zeros((2, 3), np.float32))])
    folder = _tmpdir()
    try:
        path = os.path.join(folder, "empty.params")
        mx.nd.save(path, {})
        with open(path, "rb") as f:
            empty = f.read()
    finally:
        shutil.rmtree(folder)
    broken = _error('{"nodes": [{"op": "null", "name": "data", broken', empty, x)
    assert str(broken).startswith("MXPredCreate failed"), str(broken)
    sym = mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=4, name="fc")
    # an input the graph does not have leaves "data" without a shape: MXNet's shape inference says so
    wrong = _error(sym.tojson(), empty, OrderedDict([("nope", np.zeros((2, 3), np.float32))]))
    assert "shape" in wrong.mx_message.lower(), wrong.mx_message
    bad_params = _error(sym.tojson(), b"not an ndarray file", x)
    assert str(bad_params).startswith("MXPredCreate failed"), str(bad_params)
