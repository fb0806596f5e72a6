"""Architecture descriptions, fingerprints and diffs (needs mxnet: runs inside the environments)."""

import json

from kit.common.capabilities import CORE_MODELS
from kit.kernel.models import zoo
from kit.kernel.saving import architecture


def _running():
    import mxnet as mx

    return mx.__version__


def _core_descriptions():
    """name -> description of each core model this release builds and can trace to a graph."""
    from kit.kernel.mx.internals import GraphUnavailable

    running, out = _running(), {}
    for name in CORE_MODELS:
        spec = zoo.get(name)
        if not spec.supported(running)[0]:
            continue
        try:
            out[name] = architecture.describe_zoo(name)
        except GraphUnavailable:
            assert not spec.has_graph(running)[0], name  # only a model without a graph here (1.x LSTM before 1.3)
    return out


def _net(activation="relu", stride=1, clip=False):
    """conv(4, 3x3) + activation + dense(2): the hand-built net the diffs below vary."""
    from mxnet.gluon import nn

    from kit.kernel.mx import mxapi

    net = nn.HybridSequential()
    mxapi.add(net, nn.Conv2D(4, 3, strides=stride), _ReLU6() if clip else nn.Activation(activation), nn.Dense(2))
    return net


def _ReLU6():
    """The block MobileNetV2 uses for relu6 since MXNet 1.3: ``clip(x, 0, 6)``."""
    import mxnet as mx
    from mxnet import gluon

    from kit.kernel.mx import mxapi

    if mxapi.gluon2():

        class ReLU6(gluon.HybridBlock):
            def forward(self, x):
                return mx.np.clip(x, 0, 6)

    else:

        class ReLU6(gluon.HybridBlock):
            def hybrid_forward(self, F, x):
                return F.clip(x, 0, 6)

    return ReLU6()


def _describe(net):
    return architecture.describe(net, [("data", (3, 8, 8))])


def test_describe_and_fingerprint_are_deterministic_for_the_core_models():
    first = _core_descriptions()
    assert {"mlp", "lenet", "resnet_bn", "embedding", "symbolic"} <= set(first), sorted(first)
    again = _core_descriptions()
    assert sorted(again) == sorted(first)
    for name, description in first.items():
        fp = architecture.model_version(description)
        assert len(fp) == 16 and int(fp, 16) >= 0, name
        assert architecture.model_version(again[name]) == fp, name
        assert architecture.structure(again[name]) == architecture.structure(description), name
        # JSON-able, and the fingerprint survives the round trip
        assert architecture.model_version(json.loads(json.dumps(description))) == fp, name
        assert description["source"]["release"] == _running()
        assert len(description["source"]["ops"]) == len(description["nodes"]), name


def test_fingerprints_differ_between_models():
    descriptions = _core_descriptions()
    fingerprints = dict((name, architecture.model_version(d)) for name, d in descriptions.items())
    assert len(set(fingerprints.values())) == len(fingerprints), fingerprints


def test_diff_of_a_model_with_itself_is_empty():
    descriptions = _core_descriptions()
    for name, description in descriptions.items():
        assert architecture.diff(description, description) == [], name
        assert architecture.diff(description, architecture.describe_zoo(name)) == [], name
    assert architecture.diff(descriptions["mlp"], descriptions["lenet"]) != []


def test_the_description_holds_the_graph_by_position():
    lenet = architecture.describe_zoo("lenet")
    ops = [n["op"] for n in lenet["nodes"]]
    # gluon's Flatten was Reshape(0, -1) before 1.1: it reads as Flatten in every release
    conv_pool = ["Convolution", "Activation", "Pooling"]
    assert ops == conv_pool + conv_pool + ["Flatten", "FullyConnected", "Activation", "FullyConnected"], ops
    conv = lenet["nodes"][0]
    assert conv["inputs"] == ["in0", "p0", "p1"]
    assert conv["attrs"]["kernel"] == [5, 5] and conv["attrs"]["stride"] == [1, 1] and conv["attrs"]["no_bias"] == 0
    assert conv["attrs"]["num_filter"] == 6 and conv["attrs"]["layout"] == "NCHW"
    assert lenet["nodes"][1] == {"op": "Activation", "attrs": {"act_type": "relu"}, "inputs": ["n0"]}
    assert lenet["outputs"] == ["n%d" % (len(ops) - 1)]
    assert lenet["inputs"] == [{"shape": [1, 28, 28], "dtype": "float32"}] and lenet["labels"] == 0
    params = lenet["params"]
    assert [p["role"] for p in params] == ["weight", "bias"] * 4
    assert params[0]["shape"] == [6, 1, 5, 5] and params[-1]["shape"] == [4] and not any(p["aux"] for p in params)
    resnet = architecture.describe_zoo("resnet_bn")
    roles = [p["role"] for p in resnet["params"]]
    assert roles[:5] == ["weight", "gamma", "beta", "running_mean", "running_var"], roles
    assert [p["aux"] for p in resnet["params"][:5]] == [False, False, False, True, True]
    assert all(p["shape"] and None not in p["shape"] for p in resnet["params"])


def test_a_module_model_is_described_as_its_symbol():
    symbolic = architecture.describe_zoo("symbolic")
    roles = [p["role"] for p in symbolic["params"]]
    assert "running_mean" in roles and "running_var" in roles  # the Module model's moving_mean/moving_var
    if zoo.get("symbolic").kind_in(_running()) == "symbol":
        assert symbolic["labels"] == 1 and symbolic["names"]["labels"] == ["softmax_label"]
        assert symbolic["nodes"][-1]["op"] == "SoftmaxOutput"


def test_no_parameter_names_in_the_hashed_part():
    from kit.kernel.mx import mxapi

    for name, description in _core_descriptions().items():
        names = description["names"]["params"]
        assert names and len(names) == len(description["params"]), name
        hashed = architecture.canonical_json(description)
        assert not [n for n in names if n in hashed], name
        assert "names" not in architecture.structure(description) and "source" not in architecture.structure(
            description
        )
    if not mxapi.gluon2():  # 1.x names parameters by prefix: two prefixes, one fingerprint
        a, b = zoo.build_lenet(_running()), zoo._sequential("other_", zoo.layers.lenet)
        da, db = (architecture.describe(n, zoo.get("lenet").input_specs(_running())) for n in (a, b))
        assert da["names"]["params"] != db["names"]["params"]
        assert architecture.model_version(da) == architecture.model_version(db)
        assert architecture.diff(da, db) == []


def test_diff_names_a_changed_activation():
    relu, tanh = _describe(_net("relu")), _describe(_net("tanh"))
    assert architecture.model_version(relu) != architecture.model_version(tanh)
    assert architecture.diff(relu, tanh) == ["node 1 Activation: act_type relu -> tanh"]
    assert architecture.diff(relu, _describe(_net("relu"))) == []
    # MobileNetV2's change in 1.3: relu became relu6, a clip(0, 6) node
    assert architecture.diff(relu, _describe(_net(clip=True))) == [
        "node 1 Activation(act_type=relu) -> clip(a_min=0, a_max=6)"
    ]


def test_diff_names_a_changed_stride():
    one, two = _describe(_net(stride=1)), _describe(_net(stride=2))
    assert architecture.diff(one, two) == [
        "4 parameters (402 values) -> 4 (186)",
        "node 0 Convolution: stride (1, 1) -> (2, 2)",
        # the dense layer after it sees fewer inputs: its weight has another shape
        "node 2 FullyConnected: weight shape (2, 144) -> (2, 36)",
    ]
    assert architecture.model_version(one) != architecture.model_version(two)


def test_diff_aligns_inserted_nodes_and_stops_at_the_limit():
    from mxnet.gluon import nn

    from kit.kernel.mx import mxapi

    deeper = nn.HybridSequential()
    mxapi.add(deeper, nn.Conv2D(4, 3), nn.Activation("relu"), nn.BatchNorm(), nn.Dense(2))
    lines = architecture.diff(_describe(_net()), _describe(deeper))
    assert lines == [
        "3 nodes -> 4",
        "4 parameters (402 values) -> 8 (418)",
        "node 2 of the second BatchNorm: added",
        "node 2 FullyConnected: input 0 n1 (Activation) -> n2 (BatchNorm)",
    ], lines
    mlp, lenet = architecture.describe_zoo("mlp"), architecture.describe_zoo("lenet")
    short = architecture.diff(mlp, lenet, limit=2)
    assert len(short) == 2 and short[-1].startswith("... ") and short[-1].endswith(" more differences"), short


def test_attribute_values_and_operators_read_alike_in_every_release():
    canonical = architecture.canonical_node
    old = canonical("Convolution", {"kernel": "(3, 3)", "stride": "(1, 1)", "num_filter": "8", "no_bias": "False"})
    new = canonical(
        "Convolution",
        {
            "kernel": "[3,3]",
            "num_filter": "8",
            "no_bias": "0",
            "pad": "[0,0]",
            "dilate": "[1,1]",
            "layout": "NCHW",
            "cudnn_off": "0",
            "cudnn_tune": "None",
            "workspace": "1024",
            "__profiler_scope__": "<unk>:",
        },
    )
    assert old == new == ("Convolution", dict(new[1], stride=[1, 1]))
    assert new[1]["pad"] == [0, 0] and new[1]["num_group"] == 1 and "workspace" not in new[1]
    assert canonical("Pooling", {"kernel": "(2, 2)", "pool_type": "max", "global_pool": "False"}) == canonical(
        "Pooling",
        {"kernel": "[2,2]", "pool_type": "max", "global_pool": "0", "layout": "NCHW", "count_include_pad": "None"},
    )
    assert canonical("BatchNorm", {"eps": "1e-05", "fix_gamma": "False"}) == canonical(
        "BatchNorm", {"eps": "9.99999975e-06", "fix_gamma": "0", "use_global_stats": "0", "min_calib_range": "None"}
    )
    assert canonical("Reshape", {"shape": "(0, -1)"}) == ("Flatten", {})
    assert canonical("_npi_add", {}) == canonical("elemwise_add", {}) == canonical("_plus", {})
    assert canonical("_npi_concatenate", {"axis": "1", "num_args": "2"}) == canonical(
        "Concat", {"dim": "1", "num_args": "2"}
    )
    assert canonical("_npi_mean", {"axis": "[1]", "dtype": "float32", "keepdims": "0"}, "float32") == canonical(
        "mean", {"axis": "1"}, "float32"
    )
    assert canonical("_np_reshape", {"newshape": "(-1,)", "order": "C"}) == canonical("Reshape", {"shape": "-1"})
    assert canonical("tanh", {}) == canonical("Activation", {"act_type": "tanh"})
    assert architecture.canonical_value("(0.485, 0.456, 0.406)") == [0.485, 0.456, 0.406]
    assert architecture.canonical_value("True") == architecture.canonical_value("1") == 1
    assert architecture.canonical_value("relu") == "relu" and architecture.canonical_value("None") is None


#: the core models' fingerprints, measured the same in MXNet 0.11.0, 1.0.0.post4, 1.4.1, 1.9.1, 2.0.0a0 and 2.0.0b1
#: (the 2.0 ports included); they change only with architecture.FORMAT or the zoo's code
SAME_IN_EVERY_RELEASE = {
    "mlp": "83155a206b1f33ff",
    "lenet": "5bc5ec0e44dd50c8",
    "resnet_bn": "1fc953b6b9c34491",
    "embedding": "93e09230699f28b1",
}
#: the Module model: SoftmaxOutput with a label input in 1.x, its 2.0 port a SymbolBlock ending in softmax
SYMBOLIC = {"symbol": "446e9e811b1b41df", "gluon": "13eedebf4415501d"}


def test_core_fingerprints_are_the_same_in_every_release():
    assert architecture.FORMAT == 1  # a new format measures these again
    descriptions = _core_descriptions()
    for name, expected in SAME_IN_EVERY_RELEASE.items():
        assert architecture.model_version(descriptions[name]) == expected, (name, descriptions[name])
    kind = zoo.get("symbolic").kind_in(_running())
    assert architecture.model_version(descriptions["symbolic"]) == SYMBOLIC[kind], descriptions["symbolic"]
