"""Write the layout MXNet's nightly model backwards-compatibility checker (MBCC) writes, in this release.

A re-implementation of apache/mxnet ``tests/nightly/model_backwards_compatibility_check/``
``model_backwards_compat_train.py`` with its ``common.py`` (the 1.x branches, identical from 1.2.1 to
1.9.1): the same models, built by the same code (so their parameter names are the checker's), the same
seeds, the same test data and the same files, under ``OUT/<mx.__version__>/<model_name>/``::

    module_checkpoint_api/          -symbol.json, -0001.params (Module.save_checkpoint, epoch 1), -data, -inference
    lenet_gluon_save_params_api/    -params (Block.save_params), -data, -inference
    lenet_gluon_hybrid_export_api/  -symbol.json, -0000.params (HybridBlock.export), -data, -inference
    lstm_gluon_save_parameters_api/ -params (Block.save_parameters, MXNet 1.2.1+), -data, -inference

Like the checker, nothing is trained: each model is initialized (Xavier, magnitude 2.57) and its outputs on
uniform(-1, 1) data are saved beside it. Run it with a release's interpreter (Python 3.6 for MXNet 1.0):
``<env>/bin/python tests/mbcc_layout.py OUT``. Needs no boto3 (the checker uploads to S3 afterwards).
"""

import os
import re
import sys

os.environ.setdefault("MXNET_ENFORCE_DETERMINISM", "1")  # what train_mxnet_legacy_models.sh exports

import mxnet as mx  # noqa: E402
import mxnet.ndarray as F  # noqa: E402
import numpy as np  # noqa: E402
from mxnet import gluon  # noqa: E402
from mxnet.gluon import nn  # noqa: E402

mx.random.seed(7)
np.random.seed(7)

mxnet_version = mx.__version__
ctx = mx.cpu(0)
ROOT = None  # the folder that holds the version folders (the checker's ./models)


def cmp(x, y):
    return (x > y) - (x < y)


def compare_versions(version1, version2):
    def normalize(v):
        return [int(x) for x in re.sub(r"(\.0+)*$", "", v).split(".")]

    return cmp(normalize(version1), normalize(version2))


def get_model_path(model_name):
    return os.path.join(ROOT, str(mxnet_version), model_name)


def create_model_folder(model_name):
    path = get_model_path(model_name)
    if not os.path.exists(path):
        os.makedirs(path)


def get_module_api_model_definition():
    input = mx.symbol.Variable("data")
    input = mx.symbol.Flatten(data=input)
    fc1 = mx.symbol.FullyConnected(data=input, name="fc1", num_hidden=128)
    act1 = mx.sym.Activation(data=fc1, name="relu1", act_type="relu")
    fc2 = mx.symbol.FullyConnected(data=act1, name="fc2", num_hidden=2)
    op = mx.symbol.SoftmaxOutput(data=fc2, name="softmax")
    return mx.mod.Module(symbol=op, context=ctx, data_names=["data"], label_names=["softmax_label"])


def save_inference_results(inference_results, model_name):
    assert isinstance(inference_results, mx.ndarray.ndarray.NDArray)
    save_path = os.path.join(get_model_path(model_name), "".join([model_name, "-inference"]))
    mx.nd.save(save_path, {"inference": inference_results})


def save_data_and_labels(test_data, test_labels, model_name):
    save_path = os.path.join(get_model_path(model_name), "".join([model_name, "-data"]))
    mx.nd.save(save_path, {"data": test_data, "labels": test_labels})


class Net(gluon.Block):
    def __init__(self, **kwargs):
        super(Net, self).__init__(**kwargs)
        with self.name_scope():
            self.conv1 = nn.Conv2D(20, kernel_size=(5, 5))
            self.pool1 = nn.MaxPool2D(pool_size=(2, 2), strides=(2, 2))
            self.conv2 = nn.Conv2D(50, kernel_size=(5, 5))
            self.pool2 = nn.MaxPool2D(pool_size=(2, 2), strides=(2, 2))
            self.fc1 = nn.Dense(500)
            self.fc2 = nn.Dense(2)

    def forward(self, x):
        x = self.pool1(F.tanh(self.conv1(x)))
        x = self.pool2(F.tanh(self.conv2(x)))
        x = x.reshape((0, -1))
        x = F.tanh(self.fc1(x))
        x = F.tanh(self.fc2(x))
        return x


class HybridNet(gluon.HybridBlock):
    def __init__(self, **kwargs):
        super(HybridNet, self).__init__(**kwargs)
        with self.name_scope():
            self.conv1 = nn.Conv2D(20, kernel_size=(5, 5))
            self.pool1 = nn.MaxPool2D(pool_size=(2, 2), strides=(2, 2))
            self.conv2 = nn.Conv2D(50, kernel_size=(5, 5))
            self.pool2 = nn.MaxPool2D(pool_size=(2, 2), strides=(2, 2))
            self.fc1 = nn.Dense(500)
            self.fc2 = nn.Dense(2)

    def hybrid_forward(self, F, x):
        x = self.pool1(F.tanh(self.conv1(x)))
        x = self.pool2(F.tanh(self.conv2(x)))
        x = x.reshape((0, -1))
        x = F.tanh(self.fc1(x))
        x = F.tanh(self.fc2(x))
        return x


class SimpleLSTMModel(gluon.Block):
    def __init__(self, **kwargs):
        super(SimpleLSTMModel, self).__init__(**kwargs)
        with self.name_scope():
            self.model = mx.gluon.nn.Sequential(prefix="")
            with self.model.name_scope():
                self.model.add(mx.gluon.nn.Embedding(30, 10))
                self.model.add(mx.gluon.rnn.LSTM(20))
                self.model.add(mx.gluon.nn.Dense(100))
                self.model.add(mx.gluon.nn.Dropout(0.5))
                self.model.add(mx.gluon.nn.Dense(2, flatten=True, activation="tanh"))

    def forward(self, x):
        return self.model(x)


def train_module_checkpoint_api():
    model_name = "module_checkpoint_api"
    create_model_folder(model_name)
    test_data = mx.nd.array(np.random.uniform(-1, 1, size=(20, 1)))
    test_label = mx.nd.array(np.random.randint(0, 2, size=(20,)), dtype="float32")
    data_iter = mx.io.NDArrayIter(test_data, test_label, batch_size=10)
    mod = get_module_api_model_definition()
    mod.bind(data_shapes=data_iter.provide_data, label_shapes=data_iter.provide_label)
    mod.init_params(mx.initializer.Xavier(magnitude=2.57))
    mod.save_checkpoint(os.path.join(get_model_path(model_name), model_name), 1)
    inference_results = mod.predict(data_iter)
    save_data_and_labels(test_data, test_label, model_name)
    save_inference_results(inference_results, model_name)


def train_lenet_gluon_save_params_api():
    model_name = "lenet_gluon_save_params_api"
    create_model_folder(model_name)
    net = Net()
    net.initialize(mx.initializer.Xavier(magnitude=2.57), ctx=[mx.cpu(0)])
    test_data = mx.nd.array(np.random.uniform(-1, 1, size=(20, 1, 30, 30)))
    output = net(test_data)
    mx.nd.save(os.path.join(get_model_path(model_name), "".join([model_name, "-data"])), {"data": test_data})
    save_inference_results(output, model_name)
    net.save_params(os.path.join(get_model_path(model_name), "".join([model_name, "-params"])))


def train_lenet_gluon_hybrid_export_api():
    model_name = "lenet_gluon_hybrid_export_api"
    create_model_folder(model_name)
    net = HybridNet()
    net.initialize(mx.initializer.Xavier(magnitude=2.57), ctx=[mx.cpu(0)])
    net.hybridize()
    test_data = mx.nd.array(np.random.uniform(-1, 1, size=(20, 1, 30, 30)))
    output = net(test_data)
    mx.nd.save(os.path.join(get_model_path(model_name), "".join([model_name, "-data"])), {"data": test_data})
    save_inference_results(output, model_name)
    if compare_versions(str(mxnet_version), "1.1.0") < 0:
        net.export(os.path.join(get_model_path(model_name), model_name))  # 1.0: export takes no epoch
    else:
        net.export(os.path.join(get_model_path(model_name), model_name), epoch=0)


def train_lstm_gluon_save_parameters_api():
    if compare_versions(str(mxnet_version), "1.2.1") < 0:
        return  # no save_parameters before 1.2.1: the checker skips the model
    model_name = "lstm_gluon_save_parameters_api"
    create_model_folder(model_name)
    net = SimpleLSTMModel()
    net.initialize(mx.initializer.Xavier(magnitude=2.57), ctx=[mx.cpu(0)])
    test_data = mx.nd.array(np.random.uniform(-1, 1, size=(10, 30)))
    output = net(test_data)
    mx.nd.save(os.path.join(get_model_path(model_name), "".join([model_name, "-data"])), {"data": test_data})
    save_inference_results(output, model_name)
    net.save_parameters(os.path.join(get_model_path(model_name), "".join([model_name, "-params"])))


def main(argv):
    global ROOT
    ROOT = os.path.abspath(argv[0] if argv else "models")
    if not os.path.exists(ROOT):
        os.makedirs(ROOT)
    train_module_checkpoint_api()
    train_lenet_gluon_save_params_api()
    train_lenet_gluon_hybrid_export_api()
    train_lstm_gluon_save_parameters_api()
    print(os.path.join(ROOT, str(mxnet_version)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
