"""Does MXNet import in this environment, and what does it compute: ``python -m kit.kernel.entry.runtime_check REQ``.

The request is ``{"aliases": {name: expression} | null, "battery": bool}``. ``aliases`` (a runtime remedy
being tried, :mod:`kit.kernel.runtime.fix`) are given back before ``import mxnet``; null applies what the
environment recorded. The answer: ``ok``; on failure the error verbatim (the traceback's tail) with the
NumPy name or module it was missing and NumPy's advice for it; with ``battery``, the outputs of a fixed set
of operators on fixed inputs (the operator families that move between runtimes: dense, convolution, pooling,
batch norm, activations, softmax, embedding, LSTM, dtype round trips, an ``nd.save``/``nd.load`` round trip),
each a flat list of floats or the error it raised, for the host to compare with the canonical environment's.
"""

import os
import shutil
import sys
import tempfile
import traceback

from kit.common import numpy_names, verdicts
from kit.common.main_protocol import serve
from kit.kernel.runtime import fix as runtime_fix


def check(request):
    aliases = request.get("aliases")
    given = runtime_fix.give_back(aliases) if aliases is not None else runtime_fix.apply()
    answer = {"given_back": given}
    try:
        import mxnet as mx
    except BaseException as e:  # noqa: B036 - SystemExit from a broken import is an answer too
        text = traceback.format_exc()
        name = numpy_names.missing_name(text)
        answer.update(ok=False, error="\n".join(text.strip().splitlines()[-12:]), error_type=type(e).__name__)
        answer["headline"] = "%s: %s" % (type(e).__name__, str(e).strip().splitlines()[0] if str(e).strip() else "")
        if name is not None:
            answer["missing_name"] = name
            answer["equivalent"] = numpy_names.equivalent_for(name, text)
        else:
            answer["missing_module"] = numpy_names.missing_module(text) if isinstance(e, ImportError) else None
        return answer
    answer.update(ok=True, mxnet=mx.__version__)
    if request.get("battery"):
        answer["outputs"] = battery(mx)
    return answer


def _inputs(seed):
    """Uniform float32 arrays from a generator of its own for each operator: one that fails leaves the
    others' inputs as they were."""
    import numpy as np

    rng = np.random.RandomState(seed)
    return lambda *shape: rng.uniform(-1, 1, shape).astype(np.float32)


def _lstm(mx, rand):
    """A one-layer LSTM through the fused RNN operator, parameters flattened in MXNet's own layout."""
    seq, batch, features, hidden = 5, 2, 4, 3
    size = 4 * hidden * (features + hidden) + 2 * 4 * hidden
    out = mx.nd.RNN(
        mx.nd.array(rand(seq, batch, features)),
        mx.nd.array(rand(size)),
        mx.nd.zeros((1, batch, hidden)),
        mx.nd.zeros((1, batch, hidden)),
        state_size=hidden,
        num_layers=1,
        mode="lstm",
    )
    return out


def _save_load(mx, rand):
    folder = tempfile.mkdtemp(prefix="mxcompat-runtime-")
    try:
        path = os.path.join(folder, "arrays.params")
        mx.nd.save(path, {"a": mx.nd.array(rand(3, 4)), "b": mx.nd.array(rand(5))})
        loaded = mx.nd.load(path)
        return mx.nd.concat(loaded["a"].reshape((-1,)), loaded["b"], dim=0)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def battery(mx):
    """``{name: {"values": [...]}}`` or ``{name: {"error": "..."}}`` for every operator in the battery."""
    import numpy as np

    nd = mx.nd
    cases = [
        ("dense", lambda r: nd.FullyConnected(nd.array(r(4, 8)), nd.array(r(5, 8)), nd.array(r(5)), num_hidden=5)),
        (
            "convolution",
            lambda r: nd.Convolution(
                nd.array(r(2, 3, 8, 8)), nd.array(r(4, 3, 3, 3)), nd.array(r(4)), kernel=(3, 3), num_filter=4
            ),
        ),
        ("max_pooling", lambda r: nd.Pooling(nd.array(r(2, 3, 8, 8)), kernel=(2, 2), stride=(2, 2), pool_type="max")),
        ("avg_pooling", lambda r: nd.Pooling(nd.array(r(2, 3, 8, 8)), kernel=(2, 2), stride=(2, 2), pool_type="avg")),
        (
            "batch_norm",
            lambda r: nd.BatchNorm(
                nd.array(r(2, 3, 8, 8)),
                nd.array(r(3) + 1.5),
                nd.array(r(3)),
                nd.array(r(3)),
                nd.array(r(3) + 1.5),
                use_global_stats=True,
                fix_gamma=False,
            ),
        ),
        ("relu", lambda r: nd.Activation(nd.array(r(16)), act_type="relu")),
        ("tanh", lambda r: nd.Activation(nd.array(r(16)), act_type="tanh")),
        ("sigmoid", lambda r: nd.Activation(nd.array(r(16)), act_type="sigmoid")),
        ("softmax", lambda r: nd.softmax(nd.array(r(4, 6) * 4))),
        ("embedding", lambda r: nd.Embedding(nd.array([[0, 3], [2, 1]]), nd.array(r(4, 5)), input_dim=4, output_dim=5)),
        ("lstm", lambda r: _lstm(mx, r)),
        ("dtypes", lambda r: nd.array(r(6), dtype=np.float64).astype(np.float16).astype("int32").astype(np.float32)),
        ("bool_mask", lambda r: nd.array(np.array([True, False, True]).astype(np.float32)) * 2),
        ("save_load", lambda r: _save_load(mx, r)),
    ]
    outputs = {}
    for seed, (name, compute) in enumerate(cases):
        try:
            value = compute(_inputs(seed)).asnumpy()
            outputs[name] = {"values": [float(v) for v in np.asarray(value, dtype=np.float64).ravel()]}
        except Exception as e:  # an operator that does not run here is an answer, not a crash
            said = verdicts.headline(e)
            named = said.startswith(type(e).__name__ + ":")
            outputs[name] = {"error": said if named else "%s: %s" % (type(e).__name__, said)}
    return outputs


if __name__ == "__main__":
    sys.exit(serve(check))
