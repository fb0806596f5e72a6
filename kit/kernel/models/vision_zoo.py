"""Real architectures from ``mxnet.gluon.model_zoo.vision``, built by each release's own model-zoo code.

No pretrained weights: every network starts from a fixed-seed He initialization
and is trained briefly on synthetic 32x32 images (4 classes), so a whole matrix
stays cheap. ``save_parameters``/``save_params`` artifacts are rebuilt on load by
the *loading* release's model-zoo code (MXNet 2.0's own Gluon 2.0 model zoo there),
exactly as a user's script would; when that code changed (MobileNetV2 moved from relu to relu6
and changed its strides after 1.2) the verdict shows it.

SqueezeNet 1.1 and DenseNet-121 end in a fixed-size average pool (13x13 and 7x7,
sized for 224x224 input). At 32x32 the feature map there is 1x1, so while those two
are built the 13/7 pool is replaced by a global average pool (the same operation at
224x224); every other layer is the package's. ``e2e_resnet18`` is ResNet-18 v1 at
224x224 with Resize, ToTensor and Normalize fused in front of it.
"""

from contextlib import contextmanager

from mxnet import gluon
from mxnet.gluon import nn

from kit.common import data
from kit.kernel.models.modelspec import InputSpec, ModelSpec
from kit.kernel.mx import mxapi

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
SIZE = 32
N_CLASSES = 4
E2E_RAW_SIZE = 300
E2E_NET_SIZE = 224
_HEAD_POOLS = (7, 13)


def _vision():
    from mxnet.gluon.model_zoo import vision

    return vision


@contextmanager
def global_head_pool():
    """While building: ``nn.AvgPool2D(7)``/``nn.AvgPool2D(13)`` (fixed-size heads) become global pools."""
    original = nn.AvgPool2D

    def avg_pool(pool_size=2, *args, **kwargs):  # 1.x passes the size by position, 2.0's DenseNet by name
        if pool_size in _HEAD_POOLS and not args and not kwargs:
            return nn.GlobalAvgPool2D()
        return original(pool_size, *args, **kwargs)

    nn.AvgPool2D = avg_pool
    try:
        yield
    finally:
        nn.AvgPool2D = original


def _zoo_builder(name, constructor, head_pool=False, port=False):
    """The release's own model-zoo constructor; the Gluon 2.0 model zoo (``port``) takes no ``prefix``."""

    def build(release, variant=None):
        make = getattr(_vision(), constructor)
        kwargs = {"classes": N_CLASSES} if port else {"classes": N_CLASSES, "prefix": name + "_"}
        if head_pool:
            with global_head_pool():
                return make(**kwargs)
        return make(**kwargs)

    return build


def _front_blocks():
    from mxnet.gluon.data.vision import transforms

    return [
        transforms.Resize((E2E_NET_SIZE, E2E_NET_SIZE)),
        transforms.ToTensor(),
        transforms.Normalize(mean=MEAN, std=STD),
    ]


def eager_front():
    """The transforms of ``e2e_resnet18`` as a plain Sequential that is never hybridized (run op by op).

    Not ``transforms.Compose``: it hybridizes runs of HybridBlocks itself.
    """
    front = nn.Sequential()
    mxapi.add(front, *_front_blocks())
    return front


class FusedResNet18(gluon.HybridBlock):
    """Raw HWC uint8 batches in, class scores out: Resize(224, 224), ToTensor, Normalize, ResNet-18 v1."""

    def __init__(self, **kwargs):
        super(FusedResNet18, self).__init__(**kwargs)
        with self.name_scope():
            self.front = nn.HybridSequential()
            with self.front.name_scope():
                mxapi.add(self.front, *_front_blocks())
            self.classifier = _vision().resnet18_v1(classes=N_CLASSES, prefix="net_")

    def hybrid_forward(self, F, x):
        return self.classifier(self.front(x))


def build_e2e_resnet18(release, variant=None):
    return FusedResNet18(prefix="e2e_resnet18_")


def port_e2e_resnet18(release, variant=None):
    from kit.kernel.models import zoo_gluon2

    return zoo_gluon2.FusedResNet18(_front_blocks(), _vision().resnet18_v1(classes=N_CLASSES))


def front_transforms():
    """The names of ``e2e_resnet18``'s transforms, in order."""
    return [type(b).__name__ for b in _front_blocks()]


def _images(n, seed, release):
    return data.images(n, channels=3, size=SIZE, n_classes=N_CLASSES, seed=seed)


def _raw_images(n, seed, release):
    return data.raw_images(n, size=E2E_RAW_SIZE, n_classes=N_CLASSES, seed=seed)


#: float rounding in a network 20-400 layers deep accumulates at the scale of its largest activations:
#: an element may move by 1e-4 of the output's largest magnitude (the core models' default is 1e-5).
#: At 1e-5, MobileNetV2 artifacts of 1.3-1.6 were flagged as drift in the MKLDNN builds 1.7-1.9
#: (worst: 8.2e-5 on an output of 0.075, top-1 and cosine unchanged).
DEEP_TOLERANCE = {"float32": {"scaled_atol": 1e-4}}
#: MobileNetV2 (depthwise convolutions, relu6) on the inputs x1000 moves further: one 1.5.1 artifact in 1.9.1
#: moved by 2.0e-4 of the output's largest magnitude, and 1.9.1's own backends disagree on it by up to 2.3e-4
#: (MKLDNN off vs on, AVX-512 / AVX2 / SSE4.1): noise of valid implementations, not a regression.
MOBILENET_V2_TOLERANCE = {"float32": {"scaled_atol": 5e-4}}


def he_normal():
    """He (MSRA) initialization, the usual start for deep ReLU networks: activations keep their scale."""
    import mxnet as mx

    return mx.init.Xavier(rnd_type="gaussian", factor_type="in", magnitude=2)


def _deep_spec(name, description, inputs, make_data, build, port, **options):
    """A version-1 spec of a deep network: He-initialized, BatchNorm calibrated after training, deep tolerance."""
    deep = dict(lr=0.001, n_heldout=64, calibrate_batchnorm=True, initializer=he_normal, tolerance=DEEP_TOLERANCE)
    deep.update(options)
    return ModelSpec(name, 1, "gluon", description, inputs, N_CLASSES, make_data, build, port=port, **deep)


def _spec(name, constructor, description, head_pool=False, epochs=2, n_train=128, **options):
    """A model-zoo network on float 32x32 images."""
    return _deep_spec(
        name,
        description,
        [InputSpec("data", (3, SIZE, SIZE), "float32", "float")],
        _images,
        _zoo_builder(name, constructor, head_pool),
        _zoo_builder(name, constructor, head_pool, port=True),
        epochs=epochs,
        n_train=n_train,
        **options,
    )


SPECS = [
    _spec("resnet18_v1", "resnet18_v1", "model_zoo ResNet-18 v1: conv-BN-relu residual stages, max pool"),
    _spec("resnet18_v2", "resnet18_v2", "model_zoo ResNet-18 v2: pre-activation BN-relu-conv residual stages"),
    _spec(
        "mobilenet_v1",
        "mobilenet1_0",
        "model_zoo MobileNet 1.0: depthwise-separable convolutions",
        needs=("mobilenet_v1",),
    ),
    _spec(
        "mobilenet_v2",
        "mobilenet_v2_1_0",
        "model_zoo MobileNetV2 1.0: inverted residuals, relu6 (1.2+)",
        needs=("mobilenet_v2",),
        tolerance=MOBILENET_V2_TOLERANCE,
    ),
    _spec(
        "squeezenet1_1",
        "squeezenet1_1",
        "model_zoo SqueezeNet 1.1: fire modules (concat), dropout, global head pool",
        head_pool=True,
        n_train=256,
        epochs=4,
        lr=0.0001,
    ),  # its ReLU head dies at higher rates
    _spec(
        "densenet121",
        "densenet121",
        "model_zoo DenseNet-121: concat-heavy dense blocks, global head pool",
        head_pool=True,
    ),
    _spec("vgg11_bn", "vgg11_bn", "model_zoo VGG-11 with BatchNorm: 3x3 conv stacks, 4096-wide dense, dropout"),
    _deep_spec(
        "e2e_resnet18",
        "end-to-end ResNet-18 v1: raw 300x300 HWC uint8 in, Resize(224), ToTensor and Normalize fused into the graph",
        [InputSpec("data", (E2E_RAW_SIZE, E2E_RAW_SIZE, 3), "uint8", "pixels")],
        _raw_images,
        build_e2e_resnet18,
        port_e2e_resnet18,
        epochs=1,
        batch_size=16,
        needs=("batched_image_transforms",),
        n_train=32,
        n_heldout=16,
        internals_samples=1,
        fused_front=True,
        variant=lambda release: {"transforms": front_transforms(), "batched": True},
    ),
]
