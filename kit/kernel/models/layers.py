"""The layer lists of the zoo's sequential models, shared by the 1.x builders (:mod:`kit.kernel.models.zoo`) and
their Gluon 2.0 ports (:mod:`kit.kernel.models.zoo_gluon2`).

Each function creates new layers in a fixed order: a 1.x builder calls it inside its network's
``name_scope()``, so the layers' names (``lenet_conv0_`` ...) come from their creation order there.
"""

from mxnet.gluon import nn


def mlp():
    return [nn.Dense(32, activation="relu"), nn.Dense(4)]


def lenet():
    return [
        nn.Conv2D(6, 5, activation="relu"),
        nn.MaxPool2D(2, 2),
        nn.Conv2D(16, 5, activation="relu"),
        nn.MaxPool2D(2, 2),
        nn.Flatten(),
        nn.Dense(64, activation="relu"),
        nn.Dense(4),
    ]


def resnet_bn(residual_unit):
    """``residual_unit(channels)`` makes the residual block of the caller's API."""
    return [
        nn.Conv2D(16, 3, padding=1, use_bias=False),
        nn.BatchNorm(),
        nn.Activation("relu"),
        residual_unit(16),
        residual_unit(16),
        nn.GlobalAvgPool2D(),
        nn.Dense(4),
    ]


def e2e_classifier():
    """The small CNN behind the end-to-end model's transforms."""
    return [
        nn.Conv2D(16, 3, padding=1, activation="relu"),
        nn.MaxPool2D(2, 2),
        nn.Conv2D(32, 3, padding=1, activation="relu"),
        nn.GlobalAvgPool2D(),
        nn.Dense(4),
    ]
