"""The models of MXNet's own nightly backwards-compatibility checker (MBCC), built as its code builds them.

apache/mxnet ``tests/nightly/model_backwards_compatibility_check/common.py`` (1.x branches, the same
from 1.2.1 to 1.9.1) defines the models ``model_backwards_compat_train.py`` saves and
``model_backwards_compat_inference.py`` reloads; ``mxcompat store import-mbcc`` turns its files into
kit artifacts of these models:

- ``mbcc_mlp``: ``get_module_api_model_definition`` (Flatten, fc1 128, relu1, fc2 2, SoftmaxOutput
  ``softmax``), saved as a Module checkpoint (``module_checkpoint_api``);
- ``mbcc_lenet``: ``Net`` (a ``gluon.Block``, saved with ``save_params``: ``lenet_gluon_save_params_api``)
  and ``HybridNet`` (the same layers as a hybridized ``HybridBlock``, exported:
  ``lenet_gluon_hybrid_export_api``); conv 20/5x5, max-pool, conv 50/5x5, max-pool, tanh after each
  conv and dense, dense 500, dense 2 on 1x30x30 inputs;
- ``mbcc_lstm``: ``SimpleLSTMModel`` (a ``gluon.Block``: Embedding(30, 10), LSTM(20) in TNC layout,
  Dense(100), Dropout(0.5), Dense(2, tanh) in a prefix-less Sequential called ``model``), saved with
  ``save_parameters`` from MXNet 1.2.1 on (``lstm_gluon_save_parameters_api``).

The classes keep the checker's structure, attribute names and name scopes, so ``save_params`` files
(block-prefix-stripped names: ``conv0_weight``, ``dense1_bias``) and ``save_parameters`` files
(structural names: ``model.0.weight``, ``model.1._unfused.0.i2h_weight``) of the checker load into
them by name. Which LeNet class rebuilds a ``save_params`` artifact is the manifest's variant
(``{"block": "Net"}`` for the checker's files). The checker has a MXNet 2.0 version of its own that
1.x files do not load into, so there is no Gluon 2.0 port: 2.0 says unsupported, with that reason.
"""

import mxnet as mx
from mxnet import gluon
from mxnet.gluon import nn

from kit.common import data
from kit.common.capabilities import has_feature
from kit.kernel.models.modelspec import InputSpec, ModelSpec
from kit.kernel.mx import mxapi

SOURCE = "apache/mxnet tests/nightly/model_backwards_compatibility_check/common.py"
NO_PORT = (
    "no Gluon 2.0 port of the MBCC checker's 1.x models (MXNet 2.0's checker defines models of its own, "
    "with structural names and numpy semantics)"
)
NO_GRAPH = "the checker's SimpleLSTMModel is a gluon.Block: it has no symbol graph to export or checkpoint"


def _dense(units, **kwargs):
    """``nn.Dense``; MXNet 0.11's Dense takes no ``flatten`` (it always flattens, as ``flatten=True`` does)."""
    try:
        return nn.Dense(units, **kwargs)
    except TypeError:
        if kwargs.pop("flatten", True) is not True:
            raise
        return nn.Dense(units, **kwargs)


def _lenet_layers(block):
    with block.name_scope():
        block.conv1 = nn.Conv2D(20, kernel_size=(5, 5))
        block.pool1 = nn.MaxPool2D(pool_size=(2, 2), strides=(2, 2))
        block.conv2 = nn.Conv2D(50, kernel_size=(5, 5))
        block.pool2 = nn.MaxPool2D(pool_size=(2, 2), strides=(2, 2))
        block.fc1 = nn.Dense(500)
        block.fc2 = nn.Dense(2)


def _lenet_forward(block, F, x):
    x = block.pool1(F.tanh(block.conv1(x)))
    x = block.pool2(F.tanh(block.conv2(x)))
    x = x.reshape((0, -1))  # 0 copies the batch axis, -1 flattens the rest
    x = F.tanh(block.fc1(x))
    return F.tanh(block.fc2(x))


class Net(gluon.Block):
    """The checker's ``Net``: LeNet as an imperative block (its ``save_params`` model)."""

    def __init__(self, **kwargs):
        super(Net, self).__init__(**kwargs)
        _lenet_layers(self)

    def forward(self, x):
        return _lenet_forward(self, mx.nd, x)


class HybridNet(gluon.HybridBlock):
    """The checker's ``HybridNet``: the same LeNet as a HybridBlock (its ``export`` model)."""

    def __init__(self, **kwargs):
        super(HybridNet, self).__init__(**kwargs)
        _lenet_layers(self)

    def hybrid_forward(self, F, x):
        return _lenet_forward(self, F, x)


class SimpleLSTMModel(gluon.Block):
    """The checker's ``SimpleLSTMModel`` (its ``save_parameters`` model)."""

    def __init__(self, **kwargs):
        super(SimpleLSTMModel, self).__init__(**kwargs)
        with self.name_scope():
            self.model = nn.Sequential(prefix="")
            with self.model.name_scope():
                mxapi.add(
                    self.model,
                    nn.Embedding(30, 10),
                    gluon.rnn.LSTM(20),
                    nn.Dense(100),
                    nn.Dropout(0.5),
                    _dense(2, flatten=True, activation="tanh"),
                )

    def forward(self, x):
        return self.model(x)


def mlp_symbol():
    """``get_module_api_model_definition``'s graph: Flatten, fc1 (128), relu1, fc2 (2), SoftmaxOutput."""
    x = mx.symbol.Flatten(data=mx.symbol.Variable("data"))
    fc1 = mx.symbol.FullyConnected(data=x, name="fc1", num_hidden=128)
    act1 = mx.sym.Activation(data=fc1, name="relu1", act_type="relu")
    fc2 = mx.symbol.FullyConnected(data=act1, name="fc2", num_hidden=2)
    return mx.symbol.SoftmaxOutput(data=fc2, name="softmax")


def build_mlp(release, variant=None):
    return mlp_symbol()


def build_lenet(release, variant=None):
    """``Net`` where the artifact says so (the checker's ``save_params`` files), ``HybridNet`` otherwise."""
    if (variant or {}).get("block") == "Net":
        return Net(prefix="net0_")
    return HybridNet(prefix="hybridnet0_")


def build_lstm(release, variant=None):
    return SimpleLSTMModel(prefix="simplelstmmodel0_")


class CheckerSpec(ModelSpec):
    """A checker model: like any zoo model, except that a graph-less one (an imperative Block) says so."""

    def __init__(self, *args, **kwargs):
        self._no_graph = kwargs.pop("no_graph", None)
        super(CheckerSpec, self).__init__(*args, **kwargs)

    def supported(self, release, variant=None):
        if has_feature(release, "gluon2")[0]:
            return False, NO_PORT
        return super(CheckerSpec, self).supported(release, variant)

    def has_graph(self, release):
        if self._no_graph:
            return False, self._no_graph
        return super(CheckerSpec, self).has_graph(release)


def _spec(name, description, inputs, make_data, build, **options):
    """A version-1 spec of a two-class checker model (the checker's models have no Gluon 2.0 port)."""
    return CheckerSpec(name, 1, options.pop("kind", "gluon"), description, inputs, 2, make_data, build, **options)


SPECS = [
    _spec(
        "mbcc_mlp",
        "MBCC module_checkpoint_api: mx.sym Flatten-FC(128)-relu-FC(2)-SoftmaxOutput trained with Module (%s)" % SOURCE,
        [InputSpec("data", (1,), "float32", "float")],
        lambda n, seed, release: data.tabular(n, n_features=1, n_classes=2, seed=seed),
        build_mlp,
        kind="symbol",
        label_names=("softmax_label",),
        epochs=2,
        n_train=256,
        n_heldout=64,
    ),
    _spec(
        "mbcc_lenet",
        "MBCC lenet_gluon_*: LeNet with tanh, conv 20/50, dense 500/2 on 1x30x30 (%s Net / HybridNet)" % SOURCE,
        [InputSpec("data", (1, 30, 30), "float32", "float")],
        lambda n, seed, release: data.images(n, channels=1, size=30, n_classes=2, seed=seed),
        build_lenet,
        epochs=1,
        n_train=128,
        n_heldout=64,
        variant=lambda release: {"block": "HybridNet"},
    ),
    _spec(
        "mbcc_lstm",
        "MBCC lstm_gluon_save_parameters_api: Embedding(30,10)-LSTM(20, TNC)-Dense(100)-Dropout-Dense(2, tanh) "
        "(%s SimpleLSTMModel)" % SOURCE,
        [InputSpec("data", (30,), "float32", "tokens", vocab=30)],
        lambda n, seed, release: data.tokens(n, seq_len=30, vocab=30, n_classes=2, seed=seed),
        build_lstm,
        epochs=1,
        n_train=128,
        n_heldout=64,
        no_graph=NO_GRAPH,
    ),
]
