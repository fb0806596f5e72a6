"""The model zoo: small models that hit the operator families that regress.

Each model is built by the same code on every release, with an explicit name
prefix so its parameter names are the same in every kernel and every load.
``MODELS`` maps a name to its :class:`ModelSpec`; bump a spec's ``version``
whenever the code that builds it changes.
"""

import mxnet as mx
from mxnet import gluon
from mxnet.gluon import nn

from kit.common import data
from kit.common.capabilities import has_feature
from kit.kernel.models import layers, mbcc_models, vision_zoo, zoo_gluon2
from kit.kernel.models.modelspec import InputSpec, ModelSpec  # noqa: F401 (re-exported)
from kit.kernel.models.vision_zoo import MEAN, STD  # ImageNet's, as the model zoo uses them
from kit.kernel.mx import mxapi


# -- gluon building blocks ---------------------------------------------------------------------
class ResidualUnit(gluon.HybridBlock):
    """conv-BN-relu-conv-BN plus identity: BatchNorm's running statistics are saved as aux states."""

    def __init__(self, channels, **kwargs):
        super(ResidualUnit, self).__init__(**kwargs)
        with self.name_scope():
            self.conv1 = nn.Conv2D(channels, 3, padding=1, use_bias=False)
            self.bn1 = nn.BatchNorm()
            self.conv2 = nn.Conv2D(channels, 3, padding=1, use_bias=False)
            self.bn2 = nn.BatchNorm()

    def hybrid_forward(self, F, x):
        out = F.Activation(self.bn1(self.conv1(x)), act_type="relu")
        out = self.bn2(self.conv2(out))
        return F.Activation(out + x, act_type="relu")


class EmbeddingClassifier(gluon.HybridBlock):
    """Embedding, mean over time, Dense."""

    def __init__(self, vocab, dim, n_classes, **kwargs):
        super(EmbeddingClassifier, self).__init__(**kwargs)
        with self.name_scope():
            self.embedding = nn.Embedding(vocab, dim)
            self.output = nn.Dense(n_classes)

    def hybrid_forward(self, F, x):
        return self.output(F.mean(self.embedding(x), axis=1))


def _lstm_children(block, vocab, dim, hidden, n_classes):
    with block.name_scope():
        block.embedding = nn.Embedding(vocab, dim)
        block.lstm = gluon.rnn.LSTM(hidden, layout="NTC")
        block.output = nn.Dense(n_classes)


def _lstm_forward(block, F, x):
    return block.output(F.mean(block.lstm(block.embedding(x)), axis=1))


class LSTMClassifier(gluon.HybridBlock):
    """Embedding, LSTM, mean over time, Dense (releases whose LSTM is hybridizable: 1.3+)."""

    def __init__(self, vocab, dim, hidden, n_classes, **kwargs):
        super(LSTMClassifier, self).__init__(**kwargs)
        _lstm_children(self, vocab, dim, hidden, n_classes)

    def hybrid_forward(self, F, x):
        return _lstm_forward(self, F, x)


class ImperativeLSTMClassifier(gluon.Block):
    """The same network as :class:`LSTMClassifier`, same parameter names, for releases before 1.3."""

    def __init__(self, vocab, dim, hidden, n_classes, **kwargs):
        super(ImperativeLSTMClassifier, self).__init__(**kwargs)
        _lstm_children(self, vocab, dim, hidden, n_classes)

    def forward(self, x):
        return _lstm_forward(self, mx.nd, x)


class AddBatchAxis(gluon.HybridBlock):
    """(C, H, W) to (1, C, H, W), for releases whose image transforms take one image."""

    def hybrid_forward(self, F, x):
        return F.expand_dims(x, axis=0)


class EndToEnd(gluon.HybridBlock):
    """Raw HWC uint8 pixels in, class scores out: the data transforms are part of the graph.

    ``front`` holds the transforms (Resize where the release has a hybrid one, ToTensor,
    Normalize), ``classifier`` a small CNN; both in this block's name scope, so
    ``save_params`` can strip one common prefix.
    """

    def __init__(self, batched, **kwargs):
        super(EndToEnd, self).__init__(**kwargs)
        from mxnet.gluon.data.vision import transforms

        with self.name_scope():
            self.front = nn.HybridSequential()
            with self.front.name_scope():
                if batched:
                    self.front.add(transforms.Resize(E2E_NET_SIZE))
                mxapi.add(self.front, transforms.ToTensor(), transforms.Normalize(mean=MEAN, std=STD))
                if not batched:
                    self.front.add(AddBatchAxis())
            self.classifier = nn.HybridSequential()
            with self.classifier.name_scope():
                mxapi.add(self.classifier, *layers.e2e_classifier())

    def hybrid_forward(self, F, x):
        return self.classifier(self.front(x))


# -- builders ---------------------------------------------------------------------------------
def _sequential(prefix, make_layers):
    """A HybridSequential of the layers ``make_layers()`` creates in its name scope (which names them)."""
    net = nn.HybridSequential(prefix=prefix)
    with net.name_scope():
        mxapi.add(net, *make_layers())
    return net


def build_mlp(release, variant=None):
    return _sequential("mlp_", layers.mlp)


def build_lenet(release, variant=None):
    return _sequential("lenet_", layers.lenet)


def build_resnet_bn(release, variant=None):
    return _sequential("resnet_bn_", lambda: layers.resnet_bn(ResidualUnit))


def build_lstm(release, variant=None):
    cls = LSTMClassifier if has_feature(release, "hybrid_rnn")[0] else ImperativeLSTMClassifier
    return cls(40, 16, 24, 3, prefix="lstm_")


def build_embedding(release, variant=None):
    return EmbeddingClassifier(40, 16, 3, prefix="embedding_")


E2E_RAW_SIZE = 36
E2E_NET_SIZE = 32


def e2e_batched(release):
    """Whether ``release`` builds the end-to-end model with a batch axis and Resize (1.5+)."""
    return has_feature(release, "batched_image_transforms")[0]


def e2e_inputs(release):
    if e2e_batched(release):
        return [InputSpec("data", (E2E_RAW_SIZE, E2E_RAW_SIZE, 3), "uint8", "pixels")]
    # one image per call: the graph adds the batch axis itself
    return [InputSpec("data", (E2E_NET_SIZE, E2E_NET_SIZE, 3), "uint8", "pixels_single")]


def e2e_transform_names(release):
    names = ["ToTensor", "Normalize"]
    return (["Resize"] + names) if e2e_batched(release) else names + ["AddBatchAxis"]


def build_e2e(release, variant=None):
    """The variant ``release`` builds, or the one an artifact recorded (``{"batched": bool}``)."""
    batched = e2e_batched(release) if not variant else bool(variant.get("batched"))
    return EndToEnd(batched, prefix="e2e_")


def symbolic_body():
    """conv, BatchNorm, relu, pooling, FC: the Module model up to its head."""
    x = mx.sym.var("data")
    x = mx.sym.Convolution(x, num_filter=8, kernel=(3, 3), pad=(1, 1), name="conv1")
    x = mx.sym.BatchNorm(x, name="bn1")
    x = mx.sym.Activation(x, act_type="relu", name="relu1")
    x = mx.sym.Pooling(x, kernel=(2, 2), stride=(2, 2), pool_type="max", name="pool1")
    x = mx.sym.Flatten(x, name="flatten1")
    return mx.sym.FullyConnected(x, num_hidden=4, name="fc1")


def build_symbolic(release, variant=None):
    """A Module-API model: conv, BatchNorm, relu, pooling, FC and a SoftmaxOutput head."""
    return mx.sym.SoftmaxOutput(symbolic_body(), name="softmax")


class BiGRUClassifier(gluon.HybridBlock):
    """Embedding, a bidirectional GRU (the fused RNN op, hybridized, as OCR models carry it), mean over time,
    Dense."""

    def __init__(self, vocab, dim, hidden, n_classes, **kwargs):
        super(BiGRUClassifier, self).__init__(**kwargs)
        with self.name_scope():
            self.embedding = gluon.nn.Embedding(vocab, dim)
            self.gru = gluon.rnn.GRU(hidden, layout="NTC", bidirectional=True)
            self.output = gluon.nn.Dense(n_classes)

    def hybrid_forward(self, F, x):
        return self.output(F.mean(self.gru(self.embedding(x)), axis=1))


def build_bigru(release, variant=None):
    return BiGRUClassifier(40, 16, 12, 3, prefix="bigru_")


class LrnNet(gluon.HybridBlock):
    """Conv, relu, local response normalization called with knorm at its default (2), max-pool, global average
    pool, Dense: an AlexNet-era block as Gluon code writes it."""

    def __init__(self, **kwargs):
        super(LrnNet, self).__init__(**kwargs)
        with self.name_scope():
            self.conv = gluon.nn.Conv2D(8, 3, padding=1)
            self.pool = gluon.nn.MaxPool2D(2, 2)
            self.head = gluon.nn.GlobalAvgPool2D()
            self.output = gluon.nn.Dense(4)

    def hybrid_forward(self, F, x):
        x = F.LRN(F.relu(self.conv(x)), nsize=5)
        return self.output(self.head(self.pool(x)))


def build_lrn_net(release, variant=None):
    return LrnNet(prefix="lrnnet_")


def build_face_prelu(release, variant=None):
    """A face-attribute net as MXNet 1.x checkpoints have it: conv, BatchNorm, PReLU (a learned slope per
    channel, starting at 0.25), pooling, FC, a SoftmaxOutput head."""
    x = mx.sym.var("data")
    x = mx.sym.Convolution(x, num_filter=8, kernel=(3, 3), pad=(1, 1), name="conv1")
    x = mx.sym.BatchNorm(x, name="bn1")
    slope = mx.sym.var("prelu1_gamma", init=mx.init.Constant(0.25))
    x = mx.sym.LeakyReLU(x, gamma=slope, act_type="prelu", name="prelu1")
    x = mx.sym.Pooling(x, kernel=(2, 2), stride=(2, 2), pool_type="max", name="pool1")
    x = mx.sym.FullyConnected(mx.sym.Flatten(x), num_hidden=4, name="fc1")
    return mx.sym.SoftmaxOutput(x, name="softmax")


def build_detect_softmax(release, variant=None):
    """A detection head as MXNet 0.8-1.5 checkpoints have it: per-location class scores through
    SoftmaxActivation over channels, and an instance-mode SoftmaxActivation on pooled features."""
    x = mx.sym.var("data")
    x = mx.sym.Convolution(x, num_filter=8, kernel=(3, 3), pad=(1, 1), name="conv1")
    x = mx.sym.Activation(x, act_type="relu", name="relu1")
    scores = mx.sym.Convolution(x, num_filter=4, kernel=(1, 1), name="cls_score")
    x = mx.sym.SoftmaxActivation(scores, mode="channel", name="cls_prob")
    x = mx.sym.Pooling(x, kernel=(2, 2), stride=(2, 2), pool_type="avg", name="pool1")
    x = mx.sym.FullyConnected(mx.sym.Flatten(x), num_hidden=6, name="fc1")
    x = mx.sym.SoftmaxActivation(x, name="fc1_prob")  # mode "instance", the default
    x = mx.sym.FullyConnected(x, num_hidden=4, name="fc2")
    return mx.sym.SoftmaxOutput(x, name="softmax")


def build_converted_heads(release, variant=None):
    """A classifier as checkpoints converted from other frameworks carry it, with two outputs. BatchNorm is left
    at fix_gamma's default (True) with a gamma stored per channel (:func:`converted_gamma`), which MXNet
    ignores; LRN at knorm's default (2); a FullyConnected on globally pooled 4-D features at flatten's default
    (True); beside the SoftmaxOutput head, a nearest-UpSampled feature map as a second output through BlockGrad."""
    x = mx.sym.var("data")
    x = mx.sym.Convolution(x, num_filter=6, kernel=(3, 3), pad=(1, 1), name="conv1")
    x = mx.sym.BatchNorm(x, name="bn1")  # its stored gamma: converted_gamma
    x = mx.sym.Activation(x, act_type="relu", name="relu1")
    x = mx.sym.LRN(x, nsize=5, name="lrn1")
    x = mx.sym.Pooling(x, kernel=(2, 2), stride=(2, 2), pool_type="max", name="pool1")
    features = mx.sym.BlockGrad(mx.sym.UpSampling(x, scale=2, sample_type="nearest", name="up1"), name="features")
    pooled = mx.sym.Pooling(x, kernel=(1, 1), global_pool=True, pool_type="avg", name="gap")
    logits = mx.sym.FullyConnected(pooled, num_hidden=4, name="fc1")
    return mx.sym.Group([mx.sym.SoftmaxOutput(logits, name="softmax"), features])


def converted_gamma(arg_params):
    """The gamma a converter from another framework stores for converted_heads' BatchNorm (MXNet trains it as ones
    under fix_gamma, and ignores whatever is stored): a scale per channel."""
    arg_params["bn1_gamma"] = mx.nd.array([1.7, 0.6, 2.2, 1.3, 0.9, 1.9])


def port_e2e(release, variant=None):
    batched = e2e_batched(release) if not variant else bool(variant.get("batched"))
    return zoo_gluon2.EndToEnd(E2E_NET_SIZE if batched else None, MEAN, STD)


def port_symbolic(release, variant=None):
    return zoo_gluon2.symbolic_block(symbolic_body())


def port_lstm(release, variant=None):
    return zoo_gluon2.LSTMClassifier(40, 16, 24, 3)


def port_embedding(release, variant=None):
    return zoo_gluon2.EmbeddingClassifier(40, 16, 3)


def _port(make):
    return lambda release, variant=None: make()


# -- the spec table ----------------------------------------------------------------------------
def _spec(name, description, synthetic, build, port, kind="gluon", **options):
    """A version-1 spec; ``synthetic`` is the model's ``(inputs, n_classes, make_data)``."""
    inputs, n_classes, make_data = synthetic
    return ModelSpec(name, 1, kind, description, inputs, n_classes, make_data, build, port=port, **options)


def _tabular():
    return [InputSpec("data", (20,), "float32", "float")], 4, lambda n, seed, release: data.tabular(n, seed=seed)


def _images(channels, size):
    inputs = [InputSpec("data", (channels, size, size), "float32", "float")]
    return inputs, 4, lambda n, seed, release: data.images(n, channels=channels, size=size, seed=seed)


def _tokens():
    inputs = [InputSpec("data", (16,), "float32", "tokens", vocab=40)]
    return inputs, 3, lambda n, seed, release: data.tokens(n, seed=seed)


def _e2e_data(n, seed, release):
    return data.raw_images(n, size=E2E_RAW_SIZE if e2e_batched(release) else E2E_NET_SIZE, seed=seed)


MODELS = dict(
    (spec.name, spec)
    for spec in [
        _spec("mlp", "Dense-relu-Dense on tabular clusters", _tabular(), build_mlp, _port(zoo_gluon2.mlp)),
        _spec("lenet", "LeNet: conv, max-pool, dense", _images(1, 28), build_lenet, _port(zoo_gluon2.lenet)),
        _spec(
            "resnet_bn",
            "small residual CNN with BatchNorm (running statistics saved)",
            _images(3, 16),
            build_resnet_bn,
            _port(zoo_gluon2.resnet_bn),
        ),
        _spec(
            "lstm",
            "Embedding-LSTM-Dense sequence classifier (fused RNN op where hybrid)",
            _tokens(),
            build_lstm,
            port_lstm,
            epochs=6,
            graph_needs=("hybrid_rnn",),
            variant=lambda release: {"hybrid": has_feature(release, "hybrid_rnn")[0]},
        ),
        _spec(
            "embedding",
            "Embedding, mean over time, Dense text classifier",
            _tokens(),
            build_embedding,
            port_embedding,
            epochs=6,
        ),
        _spec(
            "symbolic",
            "mx.sym conv-BN-relu-pool-FC-SoftmaxOutput trained with Module",
            _images(1, 28),
            build_symbolic,
            port_symbolic,
            kind="symbol",
            label_names=("softmax_label",),
            port_initializer=zoo_gluon2.symbolic_initializer,
        ),
        _spec(
            "e2e",
            "end-to-end: raw HWC uint8 image, gluon transforms fused into the graph",
            (e2e_inputs, 4, _e2e_data),
            build_e2e,
            port_e2e,
            epochs=5,
            needs=("gluon_transforms",),
            fused_front=True,
            variant=lambda release: {"transforms": e2e_transform_names(release), "batched": e2e_batched(release)},
        ),
    ]
)
MODELS.update((spec.name, spec) for spec in vision_zoo.SPECS)  # after the hand-written ones, in their order
# MXNet's own backwards-compatibility checker's models (mxcompat store import-mbcc)
MODELS.update((spec.name, spec) for spec in mbcc_models.SPECS)


# operator families of third-party checkpoints (the group "families"), last: Module models, no Gluon 2.0 port
def _module_model(name, description, build, **options):
    return _spec(
        name, description, _images(3, 16), build, None, kind="symbol", label_names=("softmax_label",), **options
    )


FAMILY_SPECS = [
    _module_model("face_prelu", "mx.sym conv-BN-PReLU-pool-FC-SoftmaxOutput: a face net's PReLU", build_face_prelu),
    _module_model(
        "detect_softmax", "mx.sym conv-SoftmaxActivation (channel, instance)-FC: a detection head", build_detect_softmax
    ),
    _module_model(
        "converted_heads",
        "mx.sym BN (fix_gamma, a gamma stored)-LRN-pool-FC on 4-D, UpSampling/BlockGrad second output",
        build_converted_heads,
        stored=converted_gamma,
    ),
]
FAMILY_SPECS.append(
    _spec("lrn_net", "Gluon conv-LRN (knorm at its default)-pool-Dense", _images(3, 16), build_lrn_net, None)
)
FAMILY_SPECS.append(
    _spec(
        "bigru",
        "Embedding-bidirectional GRU-Dense, hybridized: an OCR net's BiGRU",
        _tokens(),
        build_bigru,
        None,
        epochs=6,
        needs=("hybrid_rnn",),
    )
)
MODELS.update((spec.name, spec) for spec in FAMILY_SPECS)


def get(name):
    try:
        return MODELS[name]
    except KeyError:
        raise KeyError("unknown model %r; known: %s" % (name, ", ".join(sorted(MODELS))))
