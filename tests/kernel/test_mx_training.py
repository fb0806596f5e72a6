"""Training helpers and the vision zoo's rules (needs mxnet: runs inside the environments)."""

import mxnet as mx
import numpy as np
from mxnet import gluon

from kit.common.capabilities import APIS, VISION_MODELS
from kit.kernel.models import vision_zoo, zoo
from kit.kernel.mx import mxapi
from kit.kernel.mx.training import calibrate_batchnorm
from kit.kernel.mx.training import gluon_input as nd_input
from kit.kernel.saving import adapters


def test_calibrated_batchnorm_holds_the_batch_statistics_and_weights_stay():
    mxapi.prepare_kernel()
    mx.random.seed(0)
    net = gluon.nn.HybridSequential()  # no prefix= in Gluon 2.0, and 1.x needs none here
    mxapi.add(net, gluon.nn.Conv2D(4, 3), gluon.nn.BatchNorm(), gluon.nn.Activation("relu"))
    net.initialize(mx.init.Xavier())
    net.hybridize()
    x = np.random.RandomState(0).rand(16, 3, 8, 8).astype(np.float32) * 3 + 1
    net(nd_input(x[:2]))  # deferred shapes; the cached graph now holds momentum 0.9
    weight = net[0].weight.data().asnumpy().copy()
    assert calibrate_batchnorm(net, x, n=16) == 1
    conv = net[0](nd_input(x)).asnumpy()
    bn = net[1]
    np.testing.assert_allclose(bn.running_mean.data().asnumpy(), conv.mean(axis=(0, 2, 3)), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(bn.running_var.data().asnumpy(), conv.var(axis=(0, 2, 3)), rtol=1e-3, atol=1e-5)
    np.testing.assert_array_equal(net[0].weight.data().asnumpy(), weight)
    assert bn._kwargs["momentum"] == 0.9


def test_vision_models_per_release():
    def supported(release, model):
        spec = zoo.get(model)
        return [api for api in APIS if spec.supported(release)[0] and adapters.get(api).supports(release, spec)[0]]

    assert tuple(m for m in zoo.MODELS if m in VISION_MODELS) == VISION_MODELS
    assert supported("1.0.0.post4", "densenet121") == ["export", "save_params", "module_checkpoint"]
    assert supported("1.0.0.post4", "mobilenet_v2") == []
    assert supported("1.2.1", "mobilenet_v2") == list(APIS)
    assert supported("1.4.1", "e2e_resnet18") == []
    assert supported("1.5.1", "e2e_resnet18") == list(APIS)
    assert supported("2.0.0b1", "densenet121") == ["export", "save_parameters"]
    assert supported("2.0.0a0", "e2e_resnet18") == ["export", "save_parameters"]
    assert "Resize is not a HybridBlock" in zoo.get("e2e_resnet18").supported("1.4.1")[1]


def test_global_head_pool_only_while_building():
    with vision_zoo.global_head_pool():
        assert isinstance(gluon.nn.AvgPool2D(7), gluon.nn.GlobalAvgPool2D)
        assert not isinstance(gluon.nn.AvgPool2D(pool_size=2, strides=2), gluon.nn.GlobalAvgPool2D)
    assert not isinstance(gluon.nn.AvgPool2D(7), gluon.nn.GlobalAvgPool2D)
