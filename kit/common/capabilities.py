"""What each MXNet release can do: save/load APIs and features, by release.

Measured on Linux x86_64 CPU wheels with ``hasattr`` probes of every release
(see the release table on the host side); kept here so kernel-side adapters and
the host's table answer from one source.
"""

from kit.common.versions import at_least

#: save/load APIs the kit exercises, in the order they are shown.
APIS = ("export", "save_parameters", "save_params", "module_checkpoint")
#: the load path of a checkpoint the kit did not train (``mxcompat check-model``): loaded, never saved by the kit
FOREIGN_API = "checkpoint"
#: MXNet's C predict API (MXPredCreate, the ABI under the C++, Java/Scala and mobile predictors): a load path of
#: the export and Module checkpoint artifacts, a column of its own beside the save APIs
C_PREDICT_API = "c_predict"
#: what the C predict API loads, in order of preference
C_PREDICT_SOURCES = ("module_checkpoint", "export")
#: leaving MXNet: the artifact's graph exported to ONNX by an MXNet release's exporter, run in ONNX Runtime (no
#: MXNet); a load path of the graph artifacts, a column of its own
ONNX_API = "onnx"
#: what the ONNX exporter reads, in order of preference (a check-model checkpoint is its own source)
ONNX_SOURCES = ("export", "module_checkpoint", FOREIGN_API)
#: the direction of every ONNX cell: out of MXNet, whichever release saved the artifact
ONNX_DIRECTION = "onnx"
#: leaving MXNet for OpenVINO: the same ONNX file read by OpenVINO, saved as its IR (.xml/.bin) and run from it
OPENVINO_API = "openvino"
#: leaving MXNet for PyTorch: the same ONNX file converted to a ``torch.nn.Module`` (onnx2torch), saved as
#: TorchScript (.pt, loaded with ``torch.jit.load``, no kit or onnx2torch needed) and run from it
TORCH_API = "torch"
#: the exits out of MXNet, each a load path of the graph artifacts and a column of its own -> the environment
#: (``mxcompat env create NAME``) its runtime runs in, apart from MXNet
EXIT_RUNTIMES = {ONNX_API: "onnxruntime", OPENVINO_API: "openvino", TORCH_API: "torch"}
EXIT_APIS = tuple(EXIT_RUNTIMES)
#: the files each exit's runtime runs, written beside the .onnx file (kit.kernel.exits.runtime_worker): the first
#: is the one a user loads
EXIT_ARTIFACTS = {ONNX_API: (".onnx",), OPENVINO_API: (".xml", ".bin"), TORCH_API: (".pt",)}
#: every API a record can have
LOAD_APIS = APIS + (FOREIGN_API, C_PREDICT_API) + EXIT_APIS

#: the zoo's models (kit.kernel.models.zoo builds them; named here so the host can check names without MXNet).
CORE_MODELS = ("mlp", "lenet", "resnet_bn", "lstm", "embedding", "symbolic", "e2e")
#: real architectures from mxnet.gluon.model_zoo.vision (kit.kernel.models.vision_zoo): bigger, so opt-in.
VISION_MODELS = (
    "resnet18_v1",
    "resnet18_v2",
    "mobilenet_v1",
    "mobilenet_v2",
    "squeezenet1_1",
    "densenet121",
    "vgg11_bn",
    "e2e_resnet18",
)
#: the models of MXNet's own nightly backwards-compatibility checker (kit.kernel.models.mbcc_models), whose saved
#: files ``mxcompat store import-mbcc`` imports: the group "mbcc", opt-in and not part of "all".
MBCC_MODELS = ("mbcc_mlp", "mbcc_lenet", "mbcc_lstm")
#: models carrying operator families third-party checkpoints use and exporters or converters miss (a face-attribute
#: net's PReLU, a detection net's SoftmaxActivation, an OCR net's bidirectional GRU, a converted checkpoint's
#: attributes that make MXNet ignore stored values): the group "families", opt-in and not part of "all".
FAMILY_MODELS = ("face_prelu", "detect_softmax", "converted_heads", "lrn_net", "bigru")
MODEL_NAMES = CORE_MODELS + VISION_MODELS + MBCC_MODELS + FAMILY_MODELS
#: names that stand for several models wherever models are chosen; no model is selected means "core".
MODEL_GROUPS = {
    "core": CORE_MODELS,
    "vision": VISION_MODELS,
    "all": CORE_MODELS + VISION_MODELS,
    "mbcc": MBCC_MODELS,
    "families": FAMILY_MODELS,
}

GLUON2 = "2.0.0a0"  # the first release with the Gluon 2.0 interface (forward, no prefixes, numpy semantics)
_GLUON2_NOTE = "MXNet 2.0"

# api -> (first release that saves with it, what a user sees on older ones)
_API_SINCE = {
    "export": ("0.12.0", "HybridBlock.export is not in MXNet 0.11"),
    "save_parameters": ("1.2.0", "Block.save_parameters/load_parameters arrived in MXNet 1.2"),
    "save_params": ("0.11.0", None),
    "module_checkpoint": ("0.11.0", None),
    C_PREDICT_API: ("0.11.0", None),
    ONNX_API: ("1.3.0", "MXNet's ONNX exporter (mx.contrib.onnx) arrived in 1.3"),
    OPENVINO_API: ("1.3.0", "MXNet's ONNX exporter (mx.contrib.onnx) arrived in 1.3"),
    TORCH_API: ("1.3.0", "MXNet's ONNX exporter (mx.contrib.onnx) arrived in 1.3"),
}

# api -> (the release that removed it, why)
_API_REMOVED = {
    "save_params": (GLUON2, "Block.save_params/load_params were removed in MXNet 2.0"),
    "module_checkpoint": (GLUON2, "the Module API (mx.mod) was removed in MXNet 2.0"),
    C_PREDICT_API: (GLUON2, "MXNet 2.0 does not build the C predict API (c_predict_api.h: MXPredCreate ...)"),
}
_API_REMOVED.update(
    (
        exit_api,
        (GLUON2, "the kit exports to ONNX with the 1.x exporters (mx.contrib.onnx, mx.onnx); 2.0's is not measured"),
    )
    for exit_api in EXIT_APIS
)

# api -> [(first release, load path)], newest last: how a release loads an artifact saved with ``api``
_LOAD_PATHS = {
    "export": [("0.11.0", "SymbolBlock(sym.load) + load_params"), ("1.2.0", "SymbolBlock.imports")],
    "save_parameters": [("1.2.0", "model code + load_parameters"), (GLUON2, "Gluon 2.0 port + load_parameters")],
    "save_params": [("0.11.0", "model code + load_params")],
    "module_checkpoint": [("0.11.0", "mx.model.load_checkpoint + Module"), (GLUON2, "SymbolBlock.imports")],
    "checkpoint": [("0.11.0", "mx.model.load_checkpoint + Module"), (GLUON2, "SymbolBlock + load_dict")],
    C_PREDICT_API: [("0.11.0", "MXPredCreate (C predict API, ctypes)")],
    ONNX_API: [
        ("1.3.0", "mx.contrib.onnx.export_model + ONNX Runtime"),
        ("1.9.0", "mx.onnx.export_model + ONNX Runtime"),
    ],
    OPENVINO_API: [
        ("1.3.0", "mx.contrib.onnx.export_model + OpenVINO (read_model, save_model, compile_model)"),
        ("1.9.0", "mx.onnx.export_model + OpenVINO (read_model, save_model, compile_model)"),
    ],
    TORCH_API: [
        ("1.3.0", "mx.contrib.onnx.export_model + onnx2torch + TorchScript (torch.jit.load)"),
        ("1.9.0", "mx.onnx.export_model + onnx2torch + TorchScript (torch.jit.load)"),
    ],
}

#: what a user tries first in 2.0 before the migration path (recorded verbatim when it fails)
NAIVE_LOAD_PATHS = {"module_checkpoint": "mx.model.load_checkpoint"}

#: the workaround for an artifact whose load API a release removed
WORKAROUNDS = {
    "save_params": "re-save it in a 1.x release with save_parameters (structural names), or load the file with "
    "mx.nd.load inside mx.util.np_shape(False) and set the port's parameters by name",
}

# feature -> (first release that has it, why older ones lack it)
_FEATURE_SINCE = {
    "symbolblock_imports": (
        "1.2.0",
        "SymbolBlock.imports arrived in MXNet 1.2; older releases rebuild the block from sym.load",
    ),
    "gluon_transforms": ("1.1.0", "mxnet.gluon.data.vision.transforms arrived in MXNet 1.1"),
    "runtime_features": ("1.5.0", "mxnet.runtime.Features arrived in MXNet 1.5"),
    "mobilenet_v1": ("0.12.0", "model_zoo.vision.mobilenet* is not in MXNet 0.11"),
    "mobilenet_v2": ("1.2.0", "model_zoo.vision.mobilenet_v2_* arrived in MXNet 1.2"),
    "subgraph_backend_none": ("1.6.0", "MXNET_SUBGRAPH_BACKEND=NONE is understood from MXNet 1.6 on"),
    "hybrid_rnn": ("1.3.0", "gluon.rnn.LSTM is not a HybridBlock before MXNet 1.3, so it cannot be exported"),
    "batched_image_transforms": (
        "1.5.0",
        "before MXNet 1.5, ToTensor/Normalize take one HWC image and Resize is not a HybridBlock",
    ),
    "gluon2": (GLUON2, "the Gluon 2.0 interface (forward, structural names, numpy semantics) arrived in MXNet 2.0"),
}

# feature -> (the release that removed it, why)
_FEATURE_REMOVED = {
    "module_api": (GLUON2, "the Module API (mx.mod) was removed in MXNet 2.0"),
    # 1.2-1.4 cannot import a parameter file that holds no arrays (param_file=None is the cure)
    "empty_params_quirk": ("1.5.0", None),
}


#: ``MODEL@ARCH`` pins a model to one architecture version (a prefix of its model_version fingerprint)
PIN = "@"


def split_pin(name):
    """``("mobilenet_v2", "548903f9")`` for ``mobilenet_v2@548903f9``; ``(name, None)`` without a pin."""
    model, _, pin = name.partition(PIN)
    return model, pin or None


def expand_models(names):
    """``(models, unknown)``: ``names`` with groups expanded, in order, without repeats; none means "core".

    A pinned name (``MODEL@ARCH``) stays as it is: the pin travels to the kernels."""
    if not names:
        return list(CORE_MODELS), []
    models, unknown = [], []
    for name in [names] if isinstance(names, str) else names:
        for model in MODEL_GROUPS.get(name, (name,)):
            if split_pin(model)[0] not in MODEL_NAMES:
                unknown.append(model)
            elif model not in models:
                models.append(model)
    return models, unknown


def pins(names):
    """``{model: pin}`` of the pinned names among ``names``."""
    return dict(split_pin(n) for n in names or [] if PIN in n)


def _lifecycle(since, removed, name, release):
    if name not in since:
        raise KeyError("unknown name %r; known: %s" % (name, ", ".join(sorted(since))))
    first, reason = since[name]
    if not at_least(release, first):
        return False, reason or ("needs MXNet %s or newer" % first)
    if name in removed and at_least(release, removed[name][0]):
        return False, removed[name][1] or ("gone from MXNet %s on" % removed[name][0])
    return True, None


def has_api(release, api):
    """``(True, None)`` when ``release`` can save with ``api``, else ``(False, reason)``."""
    return _lifecycle(_API_SINCE, _API_REMOVED, api, release)


def has_feature(release, feature):
    """``(True, None)`` when ``release`` has ``feature``, else ``(False, reason)``."""
    since = dict(_FEATURE_SINCE, **dict((k, ("0.0.0", None)) for k in _FEATURE_REMOVED))
    return _lifecycle(since, _FEATURE_REMOVED, feature, release)


def load_path(release, api):
    """``(path, None)``: how ``release`` loads an artifact saved with ``api``; ``(None, reason)`` when it cannot."""
    if api not in _LOAD_PATHS:
        raise KeyError("unknown API %r; known: %s" % (api, ", ".join(sorted(_LOAD_PATHS))))
    found = [path for first, path in _LOAD_PATHS[api] if at_least(release, first)]
    if api in WORKAROUNDS and at_least(release, _API_REMOVED[api][0]):
        return None, "%s; workaround: %s" % (_API_REMOVED[api][1], WORKAROUNDS[api])
    if not found:
        return None, has_api(release, api)[1]
    return found[-1], None


def apis_of(release):
    """The save APIs ``release`` has, in :data:`APIS` order."""
    return tuple(api for api in APIS if has_api(release, api)[0])
