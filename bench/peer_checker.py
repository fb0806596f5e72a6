"""A faithful peer of MXNet's nightly model backwards-compatibility checker, for the benchmark.

Its scripts are apache/mxnet tests/nightly/model_backwards_compatibility_check at tag 1.9.1 (common.py,
model_backwards_compat_train.py, model_backwards_compat_inference.py, train_mxnet_legacy_models.sh,
model_backward_compat_checker.sh). What was checked to keep this file faithful to them:

- the four cases, their models, data and sizes, copied: ``module_checkpoint_api`` (Module: Flatten, FC 128,
  relu, FC 2, SoftmaxOutput; data uniform(-1, 1, (20, 1)) with labels, NDArrayIter batch 10, ``mod.predict``),
  ``lenet_gluon_save_params_api`` (Block: conv 20, conv 50, dense 500, dense 2, tanh; (20, 1, 30, 30)),
  ``lenet_gluon_hybrid_export_api`` (the same as a HybridBlock, hybridized, ``export(epoch=0)``; no epoch
  before 1.1) and ``lstm_gluon_save_parameters_api`` (Embedding(30, 10), LSTM(20), Dense(100), Dropout(0.5),
  Dense(2, tanh); (10, 30); 1.2.1 and newer);
- no training: every case is Xavier(magnitude=2.57) initialization and one forward (or predict), seeds 7;
- files as the checker writes them: ``mx.nd.save`` for the data (and labels) and the outputs,
  ``save_checkpoint(prefix, 1)``, ``save_params``, ``export``, ``save_parameters``;
- imports: mxnet, numpy, logging, re, ``mxnet.test_utils.assert_almost_equal`` (boto3 is left out: the S3 bucket
  is a local folder, as when the checker's scripts are run offline);
- ``MXNET_ENFORCE_DETERMINISM=1`` in the train phase, as train_mxnet_legacy_models.sh exports it;
- one interpreter per release per phase: ``train`` writes OUT/<mx.__version__>/<case>/; ``check`` (the
  checker's inference script) loads every release's folder at or below its own, older releases' artifacts in
  each newer one, rebuilding the model from its code (``load_checkpoint`` + ``bind`` + ``set_params`` +
  ``predict``, ``Net().load_params``, ``SymbolBlock.imports``, ``load_parameters``) and compares with
  ``assert_almost_equal(rtol=1e-5, atol=1e-5)``.

Different on purpose, and said so: a failing assert is counted and the check goes on (the checker stops at the
first), and the files are read where they lie (the checker downloads each case into its working directory and
deletes it afterwards).

    <env>/bin/python bench/peer_checker.py train OUT     # writes OUT/<version>/<case>/
    <env>/bin/python bench/peer_checker.py check OUT     # prints one JSON line: the verdict counts

Kept Python 3.6 / MXNet 1.0 clean, like the kit's kernel side.
"""

import json
import logging
import os
import re
import sys
import time

import mxnet as mx
import numpy as np
from mxnet import gluon
from mxnet.gluon import nn
from mxnet.test_utils import assert_almost_equal

mx.random.seed(7)
np.random.seed(7)
logging.basicConfig(level=logging.WARNING)

ctx = mx.cpu(0)
atol_default = 1e-5
rtol_default = 1e-5
CASES = (
    "module_checkpoint_api",
    "lenet_gluon_save_params_api",
    "lenet_gluon_hybrid_export_api",
    "lstm_gluon_save_parameters_api",
)


def compare_versions(version1, version2):
    def normalize(v):
        return [int(x) for x in re.sub(r"(\.0+)*$", "", v).split(".")]

    a, b = normalize(version1), normalize(version2)
    return (a > b) - (a < b)


def get_module_api_model_definition():
    data = mx.symbol.Flatten(data=mx.symbol.Variable("data"))
    fc1 = mx.symbol.FullyConnected(data=data, name="fc1", num_hidden=128)
    act1 = mx.sym.Activation(data=fc1, name="relu1", act_type="relu")
    fc2 = mx.symbol.FullyConnected(data=act1, name="fc2", num_hidden=2)
    op = mx.symbol.SoftmaxOutput(data=fc2, name="softmax")
    return mx.mod.Module(symbol=op, context=ctx, data_names=["data"], label_names=["softmax_label"])


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
        x = self.pool1(mx.nd.tanh(self.conv1(x)))
        x = self.pool2(mx.nd.tanh(self.conv2(x)))
        x = x.reshape((0, -1))
        x = mx.nd.tanh(self.fc1(x))
        return mx.nd.tanh(self.fc2(x))


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
        return F.tanh(self.fc2(x))


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


# -- train phase: model_backwards_compat_train.py, with the bucket a local folder ----------------------------


def _folder(out, model_name):
    path = os.path.join(out, str(mx.__version__), model_name)
    if not os.path.exists(path):
        os.makedirs(path)
    return path


def train_module_checkpoint_api(out):
    model_name = "module_checkpoint_api"
    path = _folder(out, model_name)
    test_data = mx.nd.array(np.random.uniform(-1, 1, size=(20, 1)))
    test_label = mx.nd.array(np.random.randint(0, 2, size=(20,)), dtype="float32")
    data_iter = mx.io.NDArrayIter(test_data, test_label, batch_size=10)
    mod = get_module_api_model_definition()
    mod.bind(data_shapes=data_iter.provide_data, label_shapes=data_iter.provide_label)
    mod.init_params(mx.initializer.Xavier(magnitude=2.57))
    mod.save_checkpoint(os.path.join(path, model_name), 1)
    inference_results = mod.predict(data_iter)
    mx.nd.save(os.path.join(path, model_name + "-data"), {"data": test_data, "labels": test_label})
    mx.nd.save(os.path.join(path, model_name + "-inference"), {"inference": inference_results})


def train_lenet_gluon_save_params_api(out):
    model_name = "lenet_gluon_save_params_api"
    path = _folder(out, model_name)
    net = Net()
    net.initialize(mx.initializer.Xavier(magnitude=2.57), ctx=[mx.cpu(0)])
    test_data = mx.nd.array(np.random.uniform(-1, 1, size=(20, 1, 30, 30)))
    output = net(test_data)
    mx.nd.save(os.path.join(path, model_name + "-data"), {"data": test_data})
    mx.nd.save(os.path.join(path, model_name + "-inference"), {"inference": output})
    net.save_params(os.path.join(path, model_name + "-params"))


def train_lenet_gluon_hybrid_export_api(out):
    model_name = "lenet_gluon_hybrid_export_api"
    path = _folder(out, model_name)
    net = HybridNet()
    net.initialize(mx.initializer.Xavier(magnitude=2.57), ctx=[mx.cpu(0)])
    net.hybridize()
    test_data = mx.nd.array(np.random.uniform(-1, 1, size=(20, 1, 30, 30)))
    output = net(test_data)
    mx.nd.save(os.path.join(path, model_name + "-data"), {"data": test_data})
    mx.nd.save(os.path.join(path, model_name + "-inference"), {"inference": output})
    if compare_versions(str(mx.__version__), "1.1.0") < 0:
        net.export(os.path.join(path, model_name))  # 1.0 has no epoch parameter
    else:
        net.export(os.path.join(path, model_name), epoch=0)


def train_lstm_gluon_save_parameters_api(out):
    if compare_versions(str(mx.__version__), "1.2.1") < 0:
        return
    model_name = "lstm_gluon_save_parameters_api"
    path = _folder(out, model_name)
    net = SimpleLSTMModel()
    net.initialize(mx.initializer.Xavier(magnitude=2.57), ctx=[mx.cpu(0)])
    test_data = mx.nd.array(np.random.uniform(-1, 1, size=(10, 30)))
    output = net(test_data)
    mx.nd.save(os.path.join(path, model_name + "-data"), {"data": test_data})
    mx.nd.save(os.path.join(path, model_name + "-inference"), {"inference": output})
    net.save_parameters(os.path.join(path, model_name + "-params"))


def train_phase(out):
    train_module_checkpoint_api(out)
    train_lenet_gluon_save_params_api(out)
    train_lenet_gluon_hybrid_export_api(out)
    train_lstm_gluon_save_parameters_api(out)
    return {"saved": len(os.listdir(os.path.join(out, str(mx.__version__))))}


# -- check phase: model_backwards_compat_inference.py, each release's folder read where it lies --------------


def check_module_checkpoint_api(folder, model_name):
    prefix = os.path.join(folder, model_name)
    data = mx.nd.load(prefix + "-data")
    data_iter = mx.io.NDArrayIter(data["data"], data["labels"], batch_size=10)
    loaded_model = get_module_api_model_definition()
    sym, arg_params, aux_params = mx.model.load_checkpoint(prefix, 1)
    loaded_model.bind(data_shapes=data_iter.provide_data, label_shapes=data_iter.provide_label)
    loaded_model.set_params(arg_params, aux_params)
    old = mx.nd.load(prefix + "-inference")["inference"]
    inference_results = loaded_model.predict(data_iter)
    assert_almost_equal(inference_results.asnumpy(), old.asnumpy(), rtol=rtol_default, atol=atol_default)


def check_lenet_gluon_save_params_api(folder, model_name):
    prefix = os.path.join(folder, model_name)
    test_data = mx.nd.load(prefix + "-data")["data"]
    loaded_model = Net()
    loaded_model.load_params(prefix + "-params")
    output = loaded_model(test_data)
    old = mx.nd.load(prefix + "-inference")["inference"]
    assert_almost_equal(old.asnumpy(), output.asnumpy(), rtol=rtol_default, atol=atol_default)


def check_lenet_gluon_hybrid_export_api(folder, model_name):
    prefix = os.path.join(folder, model_name)
    test_data = mx.nd.load(prefix + "-data")["data"]
    loaded_model = gluon.SymbolBlock.imports(prefix + "-symbol.json", ["data"], prefix + "-0000.params")
    output = loaded_model(test_data)
    old = mx.nd.load(prefix + "-inference")["inference"]
    assert_almost_equal(old.asnumpy(), output.asnumpy(), rtol=rtol_default, atol=atol_default)


def check_lstm_gluon_save_parameters_api(folder, model_name):
    prefix = os.path.join(folder, model_name)
    test_data = mx.nd.load(prefix + "-data")["data"]
    loaded_model = SimpleLSTMModel()
    loaded_model.load_parameters(prefix + "-params")
    output = loaded_model(test_data)
    old = mx.nd.load(prefix + "-inference")["inference"]
    assert_almost_equal(old.asnumpy(), output.asnumpy(), rtol=rtol_default, atol=atol_default)


CHECKS = {
    "module_checkpoint_api": check_module_checkpoint_api,
    "lenet_gluon_save_params_api": check_lenet_gluon_save_params_api,
    "lenet_gluon_hybrid_export_api": check_lenet_gluon_hybrid_export_api,
    "lstm_gluon_save_parameters_api": check_lstm_gluon_save_parameters_api,
}


def check_phase(out):
    counts = {"passed": 0, "failed": 0, "error": 0}
    mine = str(mx.__version__)
    cases = CASES if compare_versions(mine, "1.2.1") >= 0 else CASES[:3]  # no LSTM case below 1.2.1
    for case in cases:
        for release in sorted(os.listdir(out)):
            if compare_versions(release, mine) > 0:
                continue
            folder = os.path.join(out, release, case)
            if not os.path.isdir(folder):
                continue
            try:
                CHECKS[case](folder, case)
                counts["passed"] += 1
            except AssertionError:
                counts["failed"] += 1
            except Exception:  # noqa: BLE001 - a load that fails is the checker's finding too
                counts["error"] += 1
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
