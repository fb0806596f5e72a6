"""What each MXNet release can do: save/load APIs and features, by release.

Measured on Linux x86_64 CPU wheels with ``hasattr`` probes of every release
(see the release table on the host side); kept here so kernel-side adapters and
the host's table answer from one source.
"""
from kit.kernel.versions import at_least

#: save/load APIs the kit exercises, in the order they are shown.
APIS = ("export", "save_parameters", "save_params", "module_checkpoint")

#: the zoo's models (kit.kernel.zoo builds them; named here so the host can check names without MXNet).
CORE_MODELS = ("mlp", "lenet", "resnet_bn", "lstm", "embedding", "symbolic", "e2e")
#: real architectures from mxnet.gluon.model_zoo.vision (kit.kernel.vision_zoo): bigger, so opt-in.
VISION_MODELS = ("resnet18_v1", "resnet18_v2", "mobilenet_v1", "mobilenet_v2", "squeezenet1_1", "densenet121",
                 "vgg11_bn", "e2e_resnet18")
MODEL_NAMES = CORE_MODELS + VISION_MODELS
#: names that stand for several models wherever models are chosen; no model is selected means "core".
MODEL_GROUPS = {"core": CORE_MODELS, "vision": VISION_MODELS, "all": MODEL_NAMES}

# api -> (first release that has it, what a user sees on older ones)
_API_SINCE = {
    "export": ("1.0.0", None),
    "save_parameters": ("1.2.0", "Block.save_parameters/load_parameters arrived in MXNet 1.2"),
    "save_params": ("1.0.0", None),
    "module_checkpoint": ("1.0.0", None),
}

# feature -> (first release that has it, why older ones lack it)
_FEATURE_SINCE = {
    "symbolblock_imports": ("1.2.0", "SymbolBlock.imports arrived in MXNet 1.2; older releases rebuild the block from sym.load"),
    "gluon_transforms": ("1.1.0", "mxnet.gluon.data.vision.transforms arrived in MXNet 1.1"),
    "runtime_features": ("1.5.0", "mxnet.runtime.Features arrived in MXNet 1.5"),
    "mobilenet_v2": ("1.2.0", "model_zoo.vision.mobilenet_v2_* arrived in MXNet 1.2"),
    "subgraph_backend_none": ("1.6.0", "MXNET_SUBGRAPH_BACKEND=NONE is understood from MXNet 1.6 on"),
    "hybrid_rnn": ("1.3.0", "gluon.rnn.LSTM is not a HybridBlock before MXNet 1.3, so it cannot be exported"),
    "batched_image_transforms": ("1.5.0", "before MXNet 1.5, ToTensor/Normalize take one HWC image and "
                                          "Resize is not a HybridBlock"),
}


def expand_models(names):
    """``(models, unknown)``: ``names`` with groups expanded, in order, without repeats; none means "core"."""
    if not names:
        return list(CORE_MODELS), []
    models, unknown = [], []
    for name in ([names] if isinstance(names, str) else names):
        for model in MODEL_GROUPS.get(name, (name,)):
            if model not in MODEL_NAMES:
                unknown.append(model)
            elif model not in models:
                models.append(model)
    return models, unknown


def _since(table, name, release):
    if name not in table:
        raise KeyError("unknown name %r; known: %s" % (name, ", ".join(sorted(table))))
    first, reason = table[name]
    if at_least(release, first):
        return True, None
    return False, reason or ("needs MXNet %s or newer" % first)


def has_api(release, api):
    """``(True, None)`` when ``release`` has the save/load ``api``, else ``(False, reason)``."""
    return _since(_API_SINCE, api, release)


def has_feature(release, feature):
    """``(True, None)`` when ``release`` has ``feature``, else ``(False, reason)``."""
    return _since(_FEATURE_SINCE, feature, release)


def apis_of(release):
    """The save/load APIs ``release`` has, in :data:`APIS` order."""
    return tuple(api for api in APIS if has_api(release, api)[0])
