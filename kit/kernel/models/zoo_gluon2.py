"""The zoo as a user migrating to Gluon 2.0 writes it: ``forward`` instead of ``hybrid_forward``, no
``prefix=`` and no ``name_scope()``, numpy operators (``mx.np``/``mx.npx``).

Every port keeps its 1.x model's architecture and child names, so a 1.x
``save_parameters`` file (structural names such as ``0.weight``) loads into it where
the layers' own parameters did not change. The Module-API ``symbolic`` model becomes a
``SymbolBlock`` over the same graph with a softmax head, trained with a gluon Trainer
(the 2.0 migration guide's replacement for Module).
"""

import mxnet as mx
from mxnet import gluon
from mxnet.gluon import nn

from kit.kernel.models import layers


class ResidualUnit(gluon.HybridBlock):
    """conv-BN-relu-conv-BN plus identity (the port of ``zoo.ResidualUnit``)."""

    def __init__(self, channels):
        super(ResidualUnit, self).__init__()
        self.conv1 = nn.Conv2D(channels, 3, padding=1, use_bias=False)
        self.bn1 = nn.BatchNorm()
        self.conv2 = nn.Conv2D(channels, 3, padding=1, use_bias=False)
        self.bn2 = nn.BatchNorm()

    def forward(self, x):
        out = mx.npx.activation(self.bn1(self.conv1(x)), act_type="relu")
        out = self.bn2(self.conv2(out))
        return mx.npx.activation(out + x, act_type="relu")


class EmbeddingClassifier(gluon.HybridBlock):
    def __init__(self, vocab, dim, n_classes):
        super(EmbeddingClassifier, self).__init__()
        self.embedding = nn.Embedding(vocab, dim)
        self.output = nn.Dense(n_classes)

    def forward(self, x):
        return self.output(mx.np.mean(self.embedding(x), axis=1))


class LSTMClassifier(gluon.HybridBlock):
    """What the port needed, measured on 2.0.0b1:

    - 2.0's LSTM keeps every weight in one flat ``rnn_param``, which a global Xavier cannot
      initialize ("Xavier initializer cannot be applied to vector _i2h_weight_initializer"):
      the LSTM names its own initializers;
    - a hybridized LSTM that makes its own begin state bakes the first batch size into the graph
      ("Shape inconsistent, Provided = [1,32,24], inferred shape=(1,512,24)" on the next batch
      size): the port passes a zero state broadcast to the input's batch.
    """

    def __init__(self, vocab, dim, hidden, n_classes):
        super(LSTMClassifier, self).__init__()
        self.hidden = hidden
        self.embedding = nn.Embedding(vocab, dim)
        self.lstm = gluon.rnn.LSTM(
            hidden, layout="NTC", i2h_weight_initializer="uniform", h2h_weight_initializer="uniform"
        )
        self.output = nn.Dense(n_classes)

    def forward(self, x):
        embedded = self.embedding(x)
        zero = mx.npx.broadcast_like(mx.np.zeros((1, 1, self.hidden)), embedded, lhs_axes=(1,), rhs_axes=(0,))
        out, _ = self.lstm(embedded, [zero, zero])
        return self.output(mx.np.mean(out, axis=1))


class AddBatchAxis(gluon.HybridBlock):
    def forward(self, x):
        return mx.np.expand_dims(x, axis=0)


class EndToEnd(gluon.HybridBlock):
    """Raw HWC uint8 in: Resize, ToTensor, Normalize (``front``), then a small CNN (``classifier``).

    ``net_size`` None builds the variant of releases before 1.5: one image per call, no Resize.
    """

    def __init__(self, net_size, mean, std):
        super(EndToEnd, self).__init__()
        from mxnet.gluon.data.vision import transforms

        self.front = nn.HybridSequential()
        if net_size:
            self.front.add(transforms.Resize(net_size))
        self.front.add(transforms.ToTensor(), transforms.Normalize(mean=mean, std=std))
        if not net_size:
            self.front.add(AddBatchAxis())
        self.classifier = nn.HybridSequential()
        self.classifier.add(*layers.e2e_classifier())

    def forward(self, x):
        return self.classifier(self.front(x))


class FusedResNet18(gluon.HybridBlock):
    """The port of ``vision_zoo.FusedResNet18``: transforms in front of 2.0's own model-zoo ResNet-18 v1."""

    def __init__(self, front_blocks, classifier):
        super(FusedResNet18, self).__init__()
        self.front = nn.HybridSequential()
        self.front.add(*front_blocks)
        self.classifier = classifier

    def forward(self, x):
        return self.classifier(self.front(x))


def _sequential(blocks):
    net = nn.HybridSequential()
    net.add(*blocks)
    return net


def mlp():
    return _sequential(layers.mlp())


def lenet():
    return _sequential(layers.lenet())


def resnet_bn():
    return _sequential(layers.resnet_bn(ResidualUnit))


def symbolic_block(body):
    """The Module model's ``body`` (up to its last FullyConnected) with a plain softmax head, as a SymbolBlock:
    SoftmaxOutput is gone from 2.0.0a0's ``mx.sym``, and a SymbolBlock takes no label input."""
    from kit.kernel.mx import mxapi

    return mxapi.symbol_block(mx.sym.softmax(body, name="softmax"), ["data"])


class ModuleInitializer(mx.init.Xavier):
    """What ``Module.init_params(Xavier())`` does, by parameter name, for a SymbolBlock (2.0 gives its
    parameters no hints): zero biases, betas and means, one gammas and variances, Xavier weights."""

    def __call__(self, desc, arr):
        name = str(desc)
        if name.endswith(("_bias", "_beta", "_moving_mean")):
            self._init_zero(desc, arr)
        elif name.endswith(("_gamma", "_moving_var")):
            self._init_one(desc, arr)
        else:
            self._init_weight(desc, arr)


def symbolic_initializer():
    return ModuleInitializer()
