"""Adapter and zoo rules by release (needs mxnet: runs inside the environments)."""
from kit.kernel import adapters, zoo
from kit.kernel.capabilities import APIS


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
    from kit.kernel.capabilities import has_api, has_feature
    release = mx.__version__
    assert has_api(release, "save_parameters")[0] == hasattr(gluon.Block, "save_parameters")
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
    from kit.kernel.capabilities import MODEL_NAMES
    assert tuple(zoo.MODELS) == MODEL_NAMES


def test_an_artifact_variant_is_rebuilt_as_saved():
    """The parameter-file adapters rebuild the variant the artifact recorded, where this release can."""
    import mxnet as mx
    from kit.kernel.capabilities import has_feature
    running = mx.__version__
    ok, reason = zoo.get("e2e").supported("1.4.1", {"batched": True})
    assert not ok and "1.5" in reason
    if has_feature(running, "gluon_transforms")[0]:
        single = zoo.build_e2e(running, {"transforms": ["ToTensor", "Normalize", "AddBatchAxis"], "batched": False})
        assert [type(b).__name__ for b in _children(single.front)] == ["ToTensor", "Normalize", "AddBatchAxis"]
    if has_feature(running, "batched_image_transforms")[0]:
        own = zoo.build_e2e(running)
        assert [type(b).__name__ for b in _children(own.front)] == ["Resize", "ToTensor", "Normalize"]


def _children(block):
    kids = block._children
    return [getattr(k, "block", k) for k in (kids.values() if isinstance(kids, dict) else kids)]
