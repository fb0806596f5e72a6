"""Save/load adapters: one per API, each knowing which releases and models it applies to.

``save`` writes a trained model's files into a folder and returns how to load
them; ``load`` rebuilds a predictor from such a folder in the kernel's own
release. An adapter whose API needs the model's code rebuilds it from the zoo.
"""

import os
import tempfile

import mxnet as mx
from mxnet import gluon

from kit.common import verdicts
from kit.common.capabilities import (
    C_PREDICT_API,
    C_PREDICT_SOURCES,
    EXIT_RUNTIMES,
    FOREIGN_API,
    LOAD_APIS,
    NAIVE_LOAD_PATHS,
    ONNX_API,
    ONNX_SOURCES,
    OPENVINO_API,
    TORCH_API,
    has_api,
    has_feature,
    load_path,
)
from kit.kernel.mx import mxapi
from kit.kernel.mx.internals import GraphUnavailable  # noqa: F401 - callers catch adapters.GraphUnavailable
from kit.kernel.mx.training import gluon_input, module_predict

PREFIX = "model"


class Predictor(object):
    """Calls a loaded model on a dict of named numpy inputs; returns a list of numpy outputs.

    ``path`` names how the artifact was loaded; ``attempts`` the paths tried first that
    failed, each ``{"path", "error"}`` with the error verbatim.
    """

    def __init__(self, fn, path=None, attempts=()):
        self._fn = fn
        self.path, self.attempts = path, list(attempts)

    def __call__(self, inputs):
        return self._fn(inputs)


def _block_predictor(block, names, path=None, attempts=()):
    def predict(inputs):
        return mxapi.to_numpy(block(*[gluon_input(inputs[n]) for n in names]))

    return Predictor(predict, path, attempts)


def _attempt(path, exc):
    return {
        "path": path,
        "error_type": type(exc).__name__,
        "error": str(exc).strip(),
        "headline": verdicts.headline(exc),
    }


#: API name -> its adapter; a class joins with ``@register``
ADAPTERS = {}


def register(cls):
    """Class decorator: make ``cls`` (an :class:`Adapter` with its ``name``) the adapter of that API."""
    ADAPTERS[cls.name] = cls()
    return cls


class Adapter(object):
    """Base: ``supports``, ``save`` and ``load`` for one save/load API."""

    name = None
    #: loading rebuilds the network from the loading release's model code (the artifact holds weights only)
    rebuilds_model = False

    def supports(self, release, spec):
        """``(True, None)`` when ``release`` can save ``spec`` with this API, else ``(False, reason)``."""
        return has_api(release, self.name)

    def load_support(self, release, spec):
        """``(path, None)``: how ``release`` loads this API's artifacts; ``(None, reason)`` when it cannot."""
        return load_path(release, self.name)

    def save(self, trained, folder):
        """Write ``trained``'s files into ``folder``; returns ``{"files": [...], ...load info}``."""
        raise NotImplementedError

    def load(self, spec, release, folder, manifest):
        """A :class:`Predictor` for the artifact in ``folder``, loaded in ``release``."""
        raise NotImplementedError

    def load_graph(self, spec, release, folder, manifest):
        """``(symbol, arg_params, aux_params)`` as ``release`` loads the artifact through this API.

        Raises :class:`GraphUnavailable` for a model that has no symbol graph in ``release``.
        """
        raise NotImplementedError


def split_params(sym, params):
    """``(arg_params, aux_params)``: ``params`` (name -> NDArray) split the way ``sym`` uses them."""
    return mxapi.split_params(sym, params)[:2]


@register
class ExportAdapter(Adapter):
    """``HybridBlock.export`` to ``SymbolBlock.imports`` (1.0/1.1: SymbolBlock(sym.load) + params)."""

    name = "export"

    def supports(self, release, spec):
        if spec.kind_in(release) != "gluon":
            return False, "a symbolic Module model has no HybridBlock to export; it is saved as a Module checkpoint"
        ok, reason = spec.has_graph(release)
        return (ok, reason) if not ok else has_api(release, self.name)

    def save(self, trained, folder):
        trained.net.export(os.path.join(folder, PREFIX))  # epoch 0; 1.0 takes no epoch argument
        return {
            "files": [PREFIX + "-symbol.json", PREFIX + "-0000.params"],
            "symbol_file": PREFIX + "-symbol.json",
            "param_file": PREFIX + "-0000.params",
        }

    def _import(self, release, folder, manifest):
        names = [i["name"] for i in manifest["inputs"]]
        sym_file = os.path.join(folder, manifest["load"]["symbol_file"])
        param_file = os.path.join(folder, manifest["load"]["param_file"])
        if has_feature(release, "symbolblock_imports")[0]:
            param_arg = param_file
            if has_feature(release, "empty_params_quirk")[0] and not mx.nd.load(param_file):
                param_arg = None  # 1.2-1.4 cannot import a parameter file that holds no arrays
            block = gluon.SymbolBlock.imports(sym_file, names, param_arg, mx.cpu())  # 2.0 calls it device
        else:
            block = gluon.SymbolBlock(mx.sym.load(sym_file), [mx.sym.var(n) for n in names])
            _load_stripped(block.collect_params(), param_file)
        return block, names, sym_file

    def load(self, spec, release, folder, manifest):
        block, names, _ = self._import(release, folder, manifest)
        return _block_predictor(block, names, load_path(release, self.name)[0])

    def load_graph(self, spec, release, folder, manifest):
        block, _, sym_file = self._import(release, folder, manifest)
        sym = mx.sym.load(sym_file)
        arg, aux = split_params(sym, dict((n, p.data()) for n, p in block.collect_params().items()))
        return sym, arg, aux


def _load_stripped(params, param_file):
    """Load an export's ``arg:``/``aux:``-prefixed file into ``params`` (releases without imports)."""
    arrays = mxapi.load_ndarrays(param_file)
    stripped = dict((k.split(":", 1)[1] if k.startswith(("arg:", "aux:")) else k, v) for k, v in arrays.items())
    if not stripped:
        return
    fd, tmp = tempfile.mkstemp(suffix=".params")
    os.close(fd)
    try:
        mx.nd.save(tmp, stripped)
        params.load(tmp, ctx=mx.cpu())
    finally:
        os.unlink(tmp)


class _ParamsAdapter(Adapter):
    """Shared by the two parameter-file APIs: the model's code is rebuilt from the zoo."""

    save_method = load_method = None
    rebuilds_model = True

    def supports(self, release, spec):
        if spec.kind_in(release) != "gluon":
            return False, "a symbolic Module model has no gluon Block whose parameters could be saved"
        return has_api(release, self.name)

    def save(self, trained, folder):
        getattr(trained.net, self.save_method)(os.path.join(folder, PREFIX + ".params"))
        return {"files": [PREFIX + ".params"], "param_file": PREFIX + ".params"}

    def _net(self, spec, release, folder, manifest):
        net = spec.build(release, manifest.get("variant") or None)  # as the saving release built it
        # by position: 1.x calls the context ctx, 2.0 device
        getattr(net, self.load_method)(os.path.join(folder, manifest["load"]["param_file"]), mx.cpu())
        return net

    def load(self, spec, release, folder, manifest):
        net = self._net(spec, release, folder, manifest)
        if isinstance(net, gluon.HybridBlock):
            net.hybridize()
        return _block_predictor(net, [i["name"] for i in manifest["inputs"]], load_path(release, self.name)[0])

    def load_graph(self, spec, release, folder, manifest):
        net = self._net(spec, release, folder, manifest)
        if not isinstance(net, gluon.HybridBlock):
            raise GraphUnavailable(
                "%s is not a HybridBlock in MXNet %s: no symbol graph to compare layer by layer" % (spec.name, release)
            )
        if mxapi.gluon2(release):  # a Gluon 2.0 block cannot be called on symbols: trace it by exporting
            return traced_graph(net, manifest["inputs"])
        sym = net(*[mx.sym.var(i["name"]) for i in manifest["inputs"]])
        arg, aux = split_params(sym, dict((n, p.data()) for n, p in net.collect_params().items()))
        return sym, arg, aux


@register
class SaveParametersAdapter(_ParamsAdapter):
    """``Block.save_parameters`` to ``load_parameters`` (1.2+)."""

    name = "save_parameters"
    save_method, load_method = "save_parameters", "load_parameters"


@register
class SaveParamsAdapter(_ParamsAdapter):
    """The legacy ``Block.save_params`` to ``load_params``."""

    name = "save_params"
    save_method, load_method = "save_params", "load_params"


@register
class ModuleCheckpointAdapter(Adapter):
    """A Module checkpoint (``prefix-symbol.json`` + ``prefix-0000.params``) to load_checkpoint, bind, forward."""

    name = "module_checkpoint"

    def supports(self, release, spec):
        ok, reason = spec.has_graph(release)
        return (ok, reason) if not ok else has_api(release, self.name)

    def save(self, trained, folder):
        sym, arg_params, aux_params = trained.symbol_and_params()
        mx.model.save_checkpoint(os.path.join(folder, PREFIX), 0, sym, arg_params, aux_params)
        return {
            "files": [PREFIX + "-symbol.json", PREFIX + "-0000.params"],
            "prefix": PREFIX,
            "epoch": 0,
            "label_names": list(trained.spec.label_names),
        }

    def load(self, spec, release, folder, manifest):
        info = manifest["load"]
        prefix = os.path.join(folder, info["prefix"])
        names = [i["name"] for i in manifest["inputs"]]
        label_names = info.get("label_names") or []
        path = load_path(release, self.name)[0]
        if has_feature(release, "module_api")[0]:
            sym, arg_params, aux_params = mx.model.load_checkpoint(prefix, info["epoch"])
            return Predictor(
                lambda inputs: module_predict(sym, arg_params, aux_params, names, label_names, inputs), path
            )
        attempts = []
        try:  # what a user tries first; in 2.0 it refuses 1.x files (numpy shape semantics)
            mx.model.load_checkpoint(prefix, info["epoch"])
        except Exception as e:  # noqa: BLE001 - recorded verbatim beside the path that works
            attempts.append(_attempt(NAIVE_LOAD_PATHS[self.name], e))
        block = gluon.SymbolBlock.imports(
            "%s-symbol.json" % prefix, names + list(label_names), "%s-%04d.params" % (prefix, info["epoch"]), mx.cpu()
        )

        def predict(inputs):
            batch = inputs[names[0]].shape[0] if inputs[names[0]].ndim else 1
            labels = [mxapi.zeros((batch,)) for _ in label_names]  # a loss head's label: unused in inference
            return mxapi.to_numpy(block(*([gluon_input(inputs[n]) for n in names] + labels)))

        return Predictor(predict, path, attempts)

    def load_graph(self, spec, release, folder, manifest):
        info = manifest["load"]
        if has_feature(release, "module_api")[0]:
            return mx.model.load_checkpoint(os.path.join(folder, info["prefix"]), info["epoch"])
        prefix = os.path.join(folder, info["prefix"])
        sym = mx.sym.load("%s-symbol.json" % prefix)
        return (sym,) + split_params(sym, mxapi.load_ndarrays("%s-%04d.params" % (prefix, info["epoch"])))


@register
class CheckpointAdapter(Adapter):
    """A checkpoint the kit did not train (``kit.kernel.saving.foreign``): read with the Module API, whatever its
    parameter naming (``arg:``/``aux:`` or bare), label heads bound from the manifest's label names."""

    name = FOREIGN_API

    def supports(self, release, spec):
        return True, None

    def load(self, spec, release, folder, manifest):
        from kit.kernel.saving import foreign

        sym, arg, aux = foreign.load(folder, manifest)
        names = [i["name"] for i in manifest["inputs"]]
        labels = manifest["load"].get("label_names") or []
        return Predictor(
            lambda inputs: module_predict(sym, arg, aux, names, labels, inputs), load_path(release, self.name)[0]
        )

    def load_graph(self, spec, release, folder, manifest):
        from kit.kernel.saving import foreign

        return foreign.load(folder, manifest)


@register
class CPredictAdapter(Adapter):
    """MXNet's C predict API (``kit.kernel.saving.c_predict``) on an exported or Module checkpoint artifact's files:
    what the C++, Java/Scala and mobile predictors load. Nothing is saved through it."""

    name = C_PREDICT_API

    def supports(self, release, spec):
        return False, "c_predict is a load path of the %s artifacts" % " and ".join(C_PREDICT_SOURCES)

    def load_support(self, release, spec):
        from kit.kernel.saving import c_predict

        ok, reason = has_api(release, self.name)
        if ok:
            ok, reason = c_predict.available()
        if ok and spec is not None:
            try:
                specs = spec.input_specs(release)
            except Exception:  # noqa: BLE001 - a model this release cannot build: its load says why
                specs = []
            other = [i for i in specs if i.dtype != "float32"]
            if other:
                ok, reason = (
                    False,
                    "the C predict API feeds float32 inputs only; input %r is %s"
                    % (
                        other[0].name,
                        other[0].dtype,
                    ),
                )
        return (load_path(release, self.name)[0], None) if ok else (None, reason)

    def load(self, spec, release, folder, manifest):
        from collections import OrderedDict

        import numpy as np

        from kit.kernel.saving import c_predict

        symbol_file, param_file = c_predict_files(manifest)
        with open(os.path.join(folder, symbol_file)) as f:
            symbol_json = f.read()
        with open(os.path.join(folder, param_file), "rb") as f:
            param_bytes = f.read()
        names = [i["name"] for i in manifest["inputs"]]

        def predict(inputs):
            feed = OrderedDict((n, np.ascontiguousarray(inputs[n], dtype=np.float32)) for n in names)
            return c_predict.predict(symbol_json, param_bytes, feed)

        return Predictor(predict, load_path(release, self.name)[0])

    def load_graph(self, spec, release, folder, manifest):
        return ADAPTERS[manifest["api"]].load_graph(spec, release, folder, manifest)


class ExitAdapter(Adapter):
    """Leaving MXNet: the artifact's graph exported to ONNX by this kernel's release (``kit.kernel.exits.onnx_export``)
    and run by :attr:`runtime` in its own environment (``kit.kernel.exits.runtime_client``). Nothing is saved
    through it.

    An export that raises is a load failure (the exporter's message verbatim); the runtime's failures to load
    the file or to run it are inference failures."""

    runtime = None

    def supports(self, release, spec):
        return False, "%s is a load path of the %s artifacts" % (self.name, " and ".join(ONNX_SOURCES))

    def load_support(self, release, spec):
        from kit.kernel.exits import onnx_export

        ok, reason = has_api(release, self.name)
        if not ok:
            return None, reason
        path, reason = load_path(release, self.name)
        if path is not None:
            ok, reason = onnx_export.available()
            if not ok:
                return None, reason
        return path, reason

    def runtime_options(self, manifest):
        """What the runtime is asked to do past loading the file (a remedy sets it in the manifest)."""
        return {}

    def load(self, spec, release, folder, manifest, opset=None):
        from kit.kernel.exits import onnx_export, runtime_client

        opset = opset or manifest.get("onnx_opset")
        exported = onnx_export.export(folder, manifest, opset=opset)
        names = [i["name"] for i in manifest["inputs"]]
        options = self.runtime_options(manifest)
        sessions = {None: runtime_client.session(self.runtime, exported["file"], names, options)}

        def run(inputs):
            batch = None
            if not exported["dynamic"] and manifest["inputs"][0].get("kind") != "pixels_single":
                batch = len(inputs[names[0]])  # a fixed-batch exporter: one file per batch size the cases use
                batch = None if batch == 1 else batch  # the one exported first
            if batch not in sessions:
                again = onnx_export.export(folder, manifest, opset=opset, batch=batch)
                sessions[batch] = runtime_client.session(self.runtime, again["file"], names, options)
            outputs = sessions[batch].run(inputs)
            predictor.details["onnx"]["artifact"] = sessions[None].artifact
            return outputs

        predictor = Predictor(run, load_path(release, self.name)[0])
        predictor.details = {"onnx": dict(exported, runtime=runtime_client.version(self.runtime), options=options)}
        return predictor

    def load_graph(self, spec, release, folder, manifest):
        return ADAPTERS[manifest["api"]].load_graph(spec, release, folder, manifest)


@register
class OnnxAdapter(ExitAdapter):
    """The ``.onnx`` file run in ONNX Runtime."""

    name = ONNX_API
    runtime = EXIT_RUNTIMES[ONNX_API]


@register
class OpenVinoAdapter(ExitAdapter):
    """The ``.onnx`` file read by OpenVINO, saved as its IR (``.xml``/``.bin``, float32 weights), run from it."""

    name = OPENVINO_API
    runtime = EXIT_RUNTIMES[OPENVINO_API]


@register
class TorchAdapter(ExitAdapter):
    """The ``.onnx`` file converted to a ``torch.nn.Module`` (onnx2torch), saved as TorchScript (``.pt``) and
    run from it: the file a PyTorch user loads with ``torch.jit.load``, without the kit or onnx2torch."""

    name = TORCH_API
    runtime = EXIT_RUNTIMES[TORCH_API]

    def runtime_options(self, manifest):
        return {"kit_converters": True} if manifest.get("onnx2torch_kit_converters") else {}


def c_predict_files(manifest):
    """``(symbol file, params file)`` of an export or Module checkpoint artifact."""
    info = manifest["load"]
    if "symbol_file" in info:
        return info["symbol_file"], info["param_file"]
    return "%s-symbol.json" % info["prefix"], "%s-%04d.params" % (info["prefix"], info["epoch"])


def traced_graph(net, inputs):
    """``(symbol, arg_params, aux_params)`` of a Gluon 2.0 block: run once on zeros, exported, read back."""
    import shutil

    import numpy as np

    net.hybridize()
    net(
        *[
            gluon_input(np.zeros(([] if i["kind"] == "pixels_single" else [1]) + list(i["shape"]), dtype=i["dtype"]))
            for i in inputs
        ]
    )
    folder = tempfile.mkdtemp(prefix="mxcompat-trace-")
    try:
        net.export(os.path.join(folder, PREFIX))
        sym = mx.sym.load(os.path.join(folder, PREFIX + "-symbol.json"))
        arrays = mxapi.load_ndarrays(os.path.join(folder, PREFIX + "-0000.params"))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return (sym,) + split_params(sym, arrays)


assert set(ADAPTERS) == set(LOAD_APIS), sorted(ADAPTERS)


def get(api):
    try:
        return ADAPTERS[api]
    except KeyError:
        raise KeyError("unknown API %r; known: %s" % (api, ", ".join(LOAD_APIS)))
