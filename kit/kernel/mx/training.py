"""Training a zoo model for a few epochs on its synthetic data, in the release the kernel runs."""

import time

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

from kit.common import data
from kit.kernel.mx import mxapi


def nd_input(array):
    """An NDArray that keeps the numpy dtype (uint8 pixels stay uint8)."""
    return mx.nd.array(array, dtype=array.dtype)


def gluon_input(array):
    """What a gluon block takes here: an NDArray in 1.x, an ``mx.np.ndarray`` in 2.0, with the numpy dtype."""
    return mxapi.array(array)


class Trained(object):
    """A trained model: a gluon block, or a symbol with its parameters; predicts in memory."""

    def __init__(
        self, spec, release, net=None, symbol=None, arg_params=None, aux_params=None, history=None, summary=None
    ):
        self.spec, self.release = spec, release
        self.net, self.symbol = net, symbol
        self.arg_params, self.aux_params = arg_params, aux_params
        self.history, self.summary = history or [], summary or {}

    @property
    def is_gluon(self):
        return self.net is not None

    def predict(self, inputs):
        """Outputs (a list of numpy arrays) for ``inputs``, a dict of input name to array."""
        names = [i.name for i in self.spec.input_specs(self.release)]
        if self.is_gluon:
            return mxapi.to_numpy(self.net(*[gluon_input(inputs[n]) for n in names]))
        return module_predict(self.symbol, self.arg_params, self.aux_params, names, self.spec.label_names, inputs)

    def symbol_and_params(self):
        """``(symbol, arg_params, aux_params)``: the graph a Module checkpoint or export holds."""
        if not self.is_gluon:
            return self.symbol, self.arg_params, self.aux_params
        names = [i.name for i in self.spec.input_specs(self.release)]
        sym = self.net(*[mx.sym.var(n) for n in names])
        if isinstance(sym, (list, tuple)):
            sym = mx.sym.Group(list(sym))
        args, auxs = set(sym.list_arguments()), set(sym.list_auxiliary_states())
        arg_params, aux_params = {}, {}
        for name, param in self.net.collect_params().items():
            if name in args:
                arg_params[name] = param.data()
            elif name in auxs:
                aux_params[name] = param.data()
        return sym, arg_params, aux_params

    def param_arrays(self):
        """Every trained parameter as numpy, by name (aux states included); copied out once, as the weights
        do not change after training (each API's manifest hashes and tabulates them)."""
        if getattr(self, "_param_arrays", None) is None:
            if self.is_gluon:
                out = dict((n, p.data().asnumpy()) for n, p in self.net.collect_params().items())
            else:
                out = dict((n, a.asnumpy()) for n, a in self.arg_params.items())
                out.update((n, a.asnumpy()) for n, a in self.aux_params.items())
            self._param_arrays = out
        return self._param_arrays


def module_predict(symbol, arg_params, aux_params, data_names, label_names, inputs):
    """Bind a Module for inference on ``inputs``' shapes and return its outputs as numpy.

    MXNet 2.0 has no Module: there the graph runs as a SymbolBlock whose label inputs get zeros.
    """
    arrays = [inputs[n] for n in data_names]
    batch = arrays[0].shape[0] if arrays[0].ndim else 1
    if not hasattr(mx, "mod"):
        block = mxapi.symbol_block(symbol, list(data_names) + list(label_names))
        values = dict(list(arg_params.items()) + list(aux_params.items()))
        block.load_dict(dict((k, mxapi.as_array(v)) for k, v in values.items()), mx.cpu())  # 2.0.0a0: ctx
        labels = [mxapi.zeros((batch,)) for _ in label_names]
        return mxapi.to_numpy(block(*([gluon_input(a) for a in arrays] + labels)))
    mod = mx.mod.Module(symbol, data_names=list(data_names), label_names=list(label_names) or None, context=mx.cpu())
    mod.bind(
        data_shapes=[mx.io.DataDesc(n, a.shape, dtype=a.dtype) for n, a in zip(data_names, arrays)],
        label_shapes=[(label, (batch,)) for label in label_names] or None,
        for_training=False,
    )
    mod.set_params(arg_params, aux_params)
    mod.forward(mx.io.DataBatch(data=[nd_input(a) for a in arrays], label=None), is_train=False)
    return [o.asnumpy() for o in mod.get_outputs()]


def _seed(seed):
    mx.random.seed(seed)
    np.random.seed(seed)


def _accuracy(scores, y):
    return float((np.argmax(scores, axis=1) == y).mean())


def train(spec, release, seed=0, epochs=None):
    """Train ``spec`` in this kernel's release; a :class:`Trained` with loss history and a summary."""
    epochs = spec.epochs if epochs is None else int(epochs)
    x, y = spec.data(spec.n_train, seed, release)
    xh, yh = spec.data(spec.n_heldout, seed + 1, release)
    started = time.time()
    if spec.kind_in(release) == "symbol":
        trained = _train_module(spec, release, x, y, xh, yh, epochs, seed)
    else:
        trained = _train_gluon(spec, release, x, y, xh, yh, epochs, seed)
    trained.summary.update(
        {
            "epochs": epochs,
            "seed": seed,
            "n_train": spec.n_train,
            "n_heldout": spec.n_heldout,
            "final_loss": float(np.mean(trained.history[-max(1, spec.n_train // spec.batch_size) :])),
            "chance_accuracy": 1.0 / spec.n_classes,
            "seconds": round(time.time() - started, 3),
        }
    )
    trained.heldout = (xh, yh)
    return trained


def _train_gluon(spec, release, x, y, xh, yh, epochs, seed):
    _seed(seed)
    net = spec.build(release)
    net.initialize(spec.initializer(release), mx.cpu())  # by position: 1.x calls it ctx, 2.0 device
    target = net
    if spec.fused_front:
        # the transforms have no parameters: train the classifier on what the fused front produces
        batched = spec.variant(release).get("batched", True)
        x, xh = _front_features(net, batched, x), _front_features(net, batched, xh)
        target = net.classifier
    if isinstance(target, gluon.HybridBlock):
        target.hybridize()
    trainer = gluon.Trainer(target.collect_params(), "adam", {"learning_rate": spec.lr})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    # the port of a Module model ends in softmax, as SoftmaxOutput does in inference: its loss takes log-probabilities
    probabilities = spec.kind == "symbol"
    if probabilities:
        loss_fn = gluon.loss.SoftmaxCrossEntropyLoss(from_logits=True)
    history = []
    for epoch in range(epochs):
        for xb, yb in data.batches(x, y, spec.batch_size, shuffle_seed=seed * 1000 + epoch):
            with autograd.record():
                out = target(gluon_input(xb))
                loss = loss_fn(mx.np.log(out + 1e-12) if probabilities else out, gluon_input(yb))
            loss.backward()
            trainer.step(len(xb))
            history.append(float(loss.asnumpy().mean()))  # NDArray.mean is newer than 0.11
    if spec.calibrate_batchnorm:
        calibrate_batchnorm(target, x)
    train_acc = _accuracy(target(gluon_input(x)).asnumpy(), y)
    heldout_acc = _accuracy(target(gluon_input(xh)).asnumpy(), yh)
    if isinstance(net, gluon.HybridBlock):
        net.hybridize()
    return Trained(
        spec, release, net=net, history=history, summary={"train_accuracy": train_acc, "heldout_accuracy": heldout_acc}
    )


def calibrate_batchnorm(net, x, n=64):
    """Set every BatchNorm's running statistics to those of ``x[:n]``: one recorded forward and backward pass.

    A few training steps leave running statistics mostly at their initial values
    (momentum 0.9): a deep network then answers the same for every input in
    inference, and no change in a later release could show. Momentum 0 for one pass
    makes the running statistics exactly the batch's; the weights do not change.
    """
    blocks, todo = [], [net]
    while todo:
        block = todo.pop()
        blocks.append(block)
        todo.extend(mxapi.children(block))
    found = [b for b in blocks if isinstance(b, gluon.nn.BatchNorm)]
    momenta = [b._kwargs["momentum"] for b in found]
    for b in found:
        b._kwargs["momentum"] = 0.0
    _drop_cached_graphs(blocks)  # they hold the old momentum
    with autograd.record():
        out = net(gluon_input(x[:n]))
    out.backward()  # MXNet updates running statistics in BatchNorm's backward pass; no optimizer step follows
    out.wait_to_read()
    for b, m in zip(found, momenta):
        b._kwargs["momentum"] = m
    _drop_cached_graphs(blocks)
    return len(found)


def _drop_cached_graphs(blocks):
    # hybridize() drops them only from MXNet 1.1 on; _clear_cached_op exists from 1.0, 0.11 has the bare fields
    for block in blocks:
        if hasattr(block, "_clear_cached_op"):
            block._clear_cached_op()
        elif hasattr(block, "_cached_op"):
            block._cached_graph, block._cached_op = (), None


def _front_features(net, batched, x):
    if batched:
        return np.concatenate([net.front(gluon_input(x[i : i + 16])).asnumpy() for i in range(0, len(x), 16)], axis=0)
    return np.concatenate([net.front(gluon_input(img)).asnumpy() for img in x], axis=0)


def _train_module(spec, release, x, y, xh, yh, epochs, seed):
    _seed(seed)
    names = [i.name for i in spec.input_specs(release)]
    bs = spec.batch_size
    mod = mx.mod.Module(spec.build(release), data_names=names, label_names=list(spec.label_names), context=mx.cpu())
    mod.bind(data_shapes=[(names[0], (bs,) + x.shape[1:])], label_shapes=[(spec.label_names[0], (bs,))])
    mod.init_params(initializer=mx.init.Xavier())
    mod.init_optimizer(optimizer="adam", optimizer_params={"learning_rate": spec.lr})
    history = []
    for epoch in range(epochs):
        for xb, yb in data.batches(x, y, bs, shuffle_seed=seed * 1000 + epoch):
            mod.forward(mx.io.DataBatch(data=[nd_input(xb)], label=[mx.nd.array(yb)]), is_train=True)
            mod.backward()
            mod.update()
            prob = mod.get_outputs()[0].asnumpy()
            history.append(float(-np.log(prob[np.arange(len(yb)), yb.astype(int)] + 1e-12).mean()))
    arg_params, aux_params = mod.get_params()
    if spec.stored is not None:
        spec.stored(arg_params)
    trained = Trained(
        spec, release, symbol=spec.build(release), arg_params=arg_params, aux_params=aux_params, history=history
    )
    trained.summary = {
        "train_accuracy": _accuracy(trained.predict({names[0]: x})[0], y),
        "heldout_accuracy": _accuracy(trained.predict({names[0]: xh})[0], yh),
    }
    return trained
