"""Adapter and zoo rules by release (needs mxnet: runs inside the environments)."""

from kit.common.capabilities import APIS
from kit.kernel.models import zoo
from kit.kernel.saving import adapters


def _supported(release, model):
    spec = zoo.get(model)
    ok, _ = spec.supported(release)
    return [api for api in APIS if ok and adapters.get(api).supports(release, spec)[0]]


def test_apis_per_release_and_model():
    assert _supported("1.0.0.post4", "mlp") == ["export", "save_params", "module_checkpoint"]
    assert _supported("1.9.1", "mlp") == list(APIS)
    assert _supported("1.0.0.post4", "lstm") == ["save_params"]
    assert _supported("1.2.1", "lstm") == ["save_parameters", "save_params"]
    assert _supported("1.3.1", "lstm") == list(APIS)
    assert _supported("1.0.0.post4", "symbolic") == ["module_checkpoint"]
    assert _supported("1.9.1", "symbolic") == ["module_checkpoint"]
    assert _supported("1.0.0.post4", "e2e") == []
    assert _supported("1.1.0", "e2e") == ["export", "save_params", "module_checkpoint"]
    # MXNet 2.0 saves the ports with the two APIs it kept; the Module model is a SymbolBlock there
    for model in ("mlp", "lstm", "symbolic", "e2e", "resnet18_v1"):
        assert _supported("2.0.0b1", model) == ["export", "save_parameters"], model


def test_unsupported_says_why():
    spec = zoo.get("e2e")
    assert "1.1" in spec.supported("1.0.0.post4")[1]
    ok, reason = adapters.get("export").supports("1.2.1", zoo.get("lstm"))
    assert not ok and "HybridBlock" in reason
    ok, reason = adapters.get("save_params").supports("1.9.1", zoo.get("symbolic"))
    assert not ok and "symbolic" in reason


def test_e2e_variant_by_release():
    assert zoo.e2e_transform_names("1.4.1") == ["ToTensor", "Normalize", "AddBatchAxis"]
    assert zoo.e2e_transform_names("1.5.1") == ["Resize", "ToTensor", "Normalize"]
    assert [i.shape for i in zoo.get("e2e").input_specs("1.9.1")] == [(36, 36, 3)]


def test_capabilities_match_the_running_release():
    """The table's claims, checked against what this kernel's MXNet really has."""
    import mxnet as mx
    from mxnet import gluon

    from kit.common.capabilities import has_api, has_feature

    release = mx.__version__
    assert has_api(release, "save_parameters")[0] == hasattr(gluon.Block, "save_parameters")
    assert has_api(release, "save_params")[0] == hasattr(gluon.Block, "save_params")
    assert has_feature(release, "module_api")[0] == hasattr(mx, "mod")
    assert has_api(release, "module_checkpoint")[0] == hasattr(mx, "mod")
    assert has_feature(release, "symbolblock_imports")[0] == hasattr(gluon.SymbolBlock, "imports")
    assert has_feature(release, "hybrid_rnn")[0] == issubclass(gluon.rnn.LSTM, gluon.HybridBlock)
    try:
        from mxnet.gluon.data.vision import transforms
    except ImportError:
        transforms = None
    assert has_feature(release, "gluon_transforms")[0] == (transforms is not None)
    if transforms is not None:
        assert has_feature(release, "batched_image_transforms")[0] == issubclass(transforms.Resize, gluon.HybridBlock)


def test_model_names_known_to_the_host_match_the_zoo():
    from kit.common.capabilities import MODEL_NAMES

    assert tuple(zoo.MODELS) == MODEL_NAMES


def test_an_artifact_variant_is_rebuilt_as_saved():
    """The parameter-file adapters rebuild the variant the artifact recorded, where this release can."""
    import mxnet as mx

    from kit.common.capabilities import has_feature
    from kit.kernel.mx.mxapi import children

    running = mx.__version__
    spec = zoo.get("e2e")
    ok, reason = spec.supported("1.4.1", {"batched": True})
    assert not ok and "1.5" in reason
    if has_feature(running, "gluon_transforms")[0]:
        single = spec.build(running, {"transforms": ["ToTensor", "Normalize", "AddBatchAxis"], "batched": False})
        assert [type(b).__name__ for b in children(single.front)] == ["ToTensor", "Normalize", "AddBatchAxis"]
    if has_feature(running, "batched_image_transforms")[0]:
        own = spec.build(running)
        assert [type(b).__name__ for b in children(own.front)] == ["Resize", "ToTensor", "Normalize"]


def test_every_model_builds_and_runs_in_this_release():
    """The zoo as this release builds it (its Gluon 2.0 port from 2.0 on) initializes and infers."""
    import mxnet as mx
    import numpy as np

    from kit.kernel.mx import mxapi
    from kit.kernel.mx.training import module_predict

    mxapi.prepare_kernel()
    running = mx.__version__
    for name in ("mlp", "lenet", "resnet_bn", "lstm", "embedding", "symbolic", "e2e"):
        spec = zoo.get(name)
        if not spec.supported(running)[0]:
            continue
        x, _ = spec.data(3, 0, running)
        if spec.kind_in(running) == "symbol":
            sym = spec.build(running)
            shapes = {"data": (3,) + x.shape[1:], "softmax_label": (3,)}
            arg_shapes, _, aux_shapes = sym.infer_shape(**shapes)
            arg = dict((n, mx.nd.ones(s) * 0.01) for n, s in zip(sym.list_arguments(), arg_shapes) if n not in shapes)
            aux = dict((n, mx.nd.ones(s)) for n, s in zip(sym.list_auxiliary_states(), aux_shapes))
            out = module_predict(sym, arg, aux, ["data"], ["softmax_label"], {"data": x})[0]
        else:
            net = spec.build(running)
            net.initialize(spec.initializer(running), mx.cpu())
            out = mxapi.to_numpy(net(mxapi.array(x if spec.input_specs(running)[0].kind != "pixels_single" else x[0])))[
                0
            ]
        assert out.shape[-1] == spec.n_classes and np.isfinite(out).all(), name
