"""A plain-script peer of MXNet's nightly model backwards-compatibility checker, for the benchmark.

Written from the checker's published description (apache/mxnet tests/nightly/
model_backwards_compatibility_check): per release, train its four cases and save them with the API each
case names, beside the inputs and the outputs they gave; then in each release, reload every older (and
the same) release's artifacts and compare the outputs. It imports nothing of the kit: one interpreter and
one ``import mxnet`` per release and phase, the floor a matrix cannot go under. The models, data sizes,
epochs and optimizer are those of the kit's zoo models it is compared with (mlp, lenet, lstm), so both do
the same compute::

    mlp    Dense(32, relu)-Dense(4) on 20 features   saved as a Module checkpoint   (case mlp:module_checkpoint)
    lenet  conv-pool-conv-pool-dense-dense, 1x28x28  Block.save_params, and export  (lenet:save_params, lenet:export)
    lstm   Embedding-LSTM-Dense, 16 tokens           Block.save_parameters (1.2+)   (lstm:save_parameters)

    <env>/bin/python bench/peer_checker.py train OUT     # writes OUT/<release>/<case>/
    <env>/bin/python bench/peer_checker.py check OUT     # prints one JSON line: the verdict counts

Kept Python 3.6 / MXNet 1.0 clean, like the kit's kernel side.
"""

import json
import os
import sys
import time

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon
from mxnet.gluon import nn

CASES = ("mlp:module_checkpoint", "lenet:save_params", "lenet:export", "lstm:save_parameters")
N_TRAIN, BATCH, LR, REFERENCE = 512, 32, 0.01, 8


def _rng(salt):
    return np.random.RandomState(salt)


def data(model, n, salt):
    rng = _rng(salt)
    if model == "mlp":
        centres = _rng(11).randn(4, 20).astype(np.float32) * 1.5
        y = rng.randint(0, 4, size=n)
        return (centres[y] + rng.randn(n, 20)).astype(np.float32), y.astype(np.float32)
    if model == "lenet":
        templates = _rng(21).rand(4, 1, 28, 28).astype(np.float32)
        y = rng.randint(0, 4, size=n)
        return np.clip(templates[y] + rng.randn(n, 1, 28, 28) * 0.25, 0, 1).astype(np.float32), y.astype(np.float32)
    y = rng.randint(0, 3, size=n)
    x = np.where(rng.rand(n, 16) < 0.6, y[:, None] * 13 + rng.randint(0, 13, (n, 16)), rng.randint(0, 40, (n, 16)))
    return x.astype(np.float32), y.astype(np.float32)


class LSTMNet(gluon.Block):
    def __init__(self, **kwargs):
        super(LSTMNet, self).__init__(**kwargs)
        with self.name_scope():
            self.embedding = nn.Embedding(40, 16)
            self.lstm = gluon.rnn.LSTM(24, layout="NTC")
            self.output = nn.Dense(3)

    def forward(self, x):
        return self.output(mx.nd.mean(self.lstm(self.embedding(x)), axis=1))


def build(model):
    if model == "lstm":
        return LSTMNet(prefix="lstm_")
    net = nn.HybridSequential(prefix=model + "_")
    with net.name_scope():
        if model == "mlp":
            layers = [nn.Dense(32, activation="relu"), nn.Dense(4)]
        else:
            layers = [
                nn.Conv2D(6, 5, activation="relu"),
                nn.MaxPool2D(2, 2),
                nn.Conv2D(16, 5, activation="relu"),
                nn.MaxPool2D(2, 2),
                nn.Flatten(),
                nn.Dense(64, activation="relu"),
                nn.Dense(4),
            ]
        for layer in layers:  # Sequential.add takes one block in 1.0
            net.add(layer)
    return net


def train(model):
    mx.random.seed(0)
    np.random.seed(0)
    x, y = data(model, N_TRAIN, 1)
    net = build(model)
    net.initialize(mx.init.Xavier(), mx.cpu())
    if isinstance(net, gluon.HybridBlock):
        net.hybridize()
    trainer = gluon.Trainer(net.collect_params(), "adam", {"learning_rate": LR})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    for epoch in range(6 if model == "lstm" else 4):
        order = _rng(epoch).permutation(N_TRAIN)
        for start in range(0, N_TRAIN, BATCH):
            idx = order[start : start + BATCH]
            with autograd.record():
                loss = loss_fn(net(mx.nd.array(x[idx])), mx.nd.array(y[idx]))
            loss.backward()
            trainer.step(len(idx))
    return net


def has_api(api):
    if api == "save_parameters":
        return hasattr(gluon.Block, "save_parameters")
    return True


def save(net, api, folder):
    prefix = os.path.join(folder, "model")
    if api == "module_checkpoint":
        sym = net(mx.sym.var("data"))
        params = dict((n, p.data()) for n, p in net.collect_params().items())
        mx.model.save_checkpoint(prefix, 0, sym, params, {})
    elif api == "export":
        net.export(prefix)
    else:
        getattr(net, api)(prefix + ".params")


def load_and_predict(model, api, folder, x):
    prefix = os.path.join(folder, "model")
    if api in ("module_checkpoint", "export") and (
        api == "module_checkpoint" or not hasattr(gluon.SymbolBlock, "imports")
    ):
        sym, arg, aux = mx.model.load_checkpoint(prefix, 0)
        mod = mx.mod.Module(sym, data_names=["data"], label_names=None, context=mx.cpu())
        mod.bind(data_shapes=[("data", x.shape)], for_training=False)
        mod.set_params(arg, aux)
        mod.forward(mx.io.DataBatch(data=[mx.nd.array(x)], label=None), is_train=False)
        return mod.get_outputs()[0].asnumpy()
    if api == "export":
        block = gluon.SymbolBlock.imports(prefix + "-symbol.json", ["data"], prefix + "-0000.params", mx.cpu())
        return block(mx.nd.array(x)).asnumpy()
    net = build(model)
    getattr(net, "load_parameters" if api == "save_parameters" else "load_params")(prefix + ".params", mx.cpu())
    return net(mx.nd.array(x)).asnumpy()


def version_key(name):
    return [int(p) if p.isdigit() else -1 for p in name.replace("post", "").split(".")]


def train_phase(out):
    root = os.path.join(out, mx.__version__)
    models = {}
    saved = 0
    for case in CASES:
        model, api = case.split(":")
        if not has_api(api):
            continue
        if model not in models:
            models[model] = train(model)
        folder = os.path.join(root, model + "_" + api)
        if not os.path.isdir(folder):
            os.makedirs(folder)
        save(models[model], api, folder)
        x, _ = data(model, REFERENCE, 2)
        np.save(os.path.join(folder, "data.npy"), x)
        np.save(os.path.join(folder, "inference.npy"), models[model](mx.nd.array(x)).asnumpy())
        saved += 1
    return {"saved": saved}


def check_phase(out):
    counts = {"identical": 0, "close": 0, "mismatch": 0, "error": 0}
    mine = version_key(mx.__version__)
    for release in sorted(os.listdir(out), key=version_key):
        if version_key(release) > mine:
            continue
        for case in CASES:
            model, api = case.split(":")
            folder = os.path.join(out, release, model + "_" + api)
            if not os.path.isdir(folder):
                continue
            try:
                got = load_and_predict(model, api, folder, np.load(os.path.join(folder, "data.npy")))
            except Exception:  # noqa: BLE001 - a load that fails is the checker's finding
                counts["error"] += 1
                continue
            ref = np.load(os.path.join(folder, "inference.npy"))
            if np.array_equal(got, ref):
                counts["identical"] += 1
            elif got.shape == ref.shape and np.allclose(got, ref, rtol=1e-5, atol=1e-6):
                counts["close"] += 1
            else:
                counts["mismatch"] += 1
    return counts


def main(argv):
    if len(argv) != 3 or argv[1] not in ("train", "check"):
        sys.stderr.write(__doc__)
        return 2
    started = time.time()
    result = (train_phase if argv[1] == "train" else check_phase)(argv[2])
    result.update({"phase": argv[1], "mxnet": mx.__version__, "seconds": round(time.time() - started, 3)})
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
