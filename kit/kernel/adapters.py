"""Save/load adapters: one per API, each knowing which releases and models it applies to.

``save`` writes a trained model's files into a folder and returns how to load
them; ``load`` rebuilds a predictor from such a folder in the kernel's own
release. An adapter whose API needs the model's code rebuilds it from the zoo.
"""
import os
import tempfile

import mxnet as mx
from mxnet import gluon

from kit.kernel.capabilities import APIS, has_api, has_feature
from kit.kernel.training import module_predict, nd_input

PREFIX = "model"


class Predictor(object):
    """Calls a loaded model on a dict of named numpy inputs; returns a list of numpy outputs."""

    def __init__(self, fn):
        self._fn = fn

    def __call__(self, inputs):
        return self._fn(inputs)


def _block_predictor(block, names):
    def predict(inputs):
        out = block(*[nd_input(inputs[n]) for n in names])
        return [o.asnumpy() for o in (out if isinstance(out, (list, tuple)) else [out])]
    return Predictor(predict)


class Adapter(object):
    """Base: ``supports``, ``save`` and ``load`` for one save/load API."""

    name = None

    def supports(self, release, spec):
        """``(True, None)`` when this API applies to ``spec`` on ``release``, else ``(False, reason)``."""
        return has_api(release, self.name)

    def save(self, trained, folder):
        """Write ``trained``'s files into ``folder``; returns ``{"files": [...], ...load info}``."""
        raise NotImplementedError

    def load(self, spec, release, folder, manifest):
        """A :class:`Predictor` for the artifact in ``folder``, loaded in ``release``."""
        raise NotImplementedError


class ExportAdapter(Adapter):
    """``HybridBlock.export`` to ``SymbolBlock.imports`` (1.0/1.1: SymbolBlock(sym.load) + params)."""

    name = "export"

    def supports(self, release, spec):
        if spec.kind != "gluon":
            return False, "a symbolic Module model has no HybridBlock to export; it is saved as a Module checkpoint"
        ok, reason = spec.has_graph(release)
        return (ok, reason) if not ok else has_api(release, self.name)

    def save(self, trained, folder):
        trained.net.export(os.path.join(folder, PREFIX))  # epoch 0; 1.0 takes no epoch argument
        return {"files": [PREFIX + "-symbol.json", PREFIX + "-0000.params"],
                "symbol_file": PREFIX + "-symbol.json", "param_file": PREFIX + "-0000.params"}

    def load(self, spec, release, folder, manifest):
        names = [i["name"] for i in manifest["inputs"]]
        sym_file = os.path.join(folder, manifest["load"]["symbol_file"])
        param_file = os.path.join(folder, manifest["load"]["param_file"])
        if has_feature(release, "symbolblock_imports")[0]:
            # 1.2-1.4 cannot load a parameter file that holds no arrays: pass None for such graphs
            param_arg = param_file if mx.nd.load(param_file) else None
            block = gluon.SymbolBlock.imports(sym_file, names, param_arg, ctx=mx.cpu())
        else:
            block = gluon.SymbolBlock(mx.sym.load(sym_file), [mx.sym.var(n) for n in names])
            _load_stripped(block.collect_params(), param_file)
        return _block_predictor(block, names)


def _load_stripped(params, param_file):
    """Load an export's ``arg:``/``aux:``-prefixed file into ``params`` (releases without imports)."""
    arrays = mx.nd.load(param_file)
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

    def supports(self, release, spec):
        if spec.kind != "gluon":
            return False, "a symbolic Module model has no gluon Block whose parameters could be saved"
        return has_api(release, self.name)

    def save(self, trained, folder):
        getattr(trained.net, self.save_method)(os.path.join(folder, PREFIX + ".params"))
        return {"files": [PREFIX + ".params"], "param_file": PREFIX + ".params"}

    def load(self, spec, release, folder, manifest):
        net = spec.build(release, manifest.get("variant") or None)  # as the saving release built it
        getattr(net, self.load_method)(os.path.join(folder, manifest["load"]["param_file"]), ctx=mx.cpu())
        if isinstance(net, gluon.HybridBlock):
            net.hybridize()
        return _block_predictor(net, [i["name"] for i in manifest["inputs"]])


class SaveParametersAdapter(_ParamsAdapter):
    """``Block.save_parameters`` to ``load_parameters`` (1.2+)."""

    name = "save_parameters"
    save_method, load_method = "save_parameters", "load_parameters"


class SaveParamsAdapter(_ParamsAdapter):
    """The legacy ``Block.save_params`` to ``load_params``."""

    name = "save_params"
    save_method, load_method = "save_params", "load_params"


class ModuleCheckpointAdapter(Adapter):
    """A Module checkpoint (``prefix-symbol.json`` + ``prefix-0000.params``) to load_checkpoint, bind, forward."""

    name = "module_checkpoint"

    def supports(self, release, spec):
        ok, reason = spec.has_graph(release)
        return (ok, reason) if not ok else has_api(release, self.name)

    def save(self, trained, folder):
        sym, arg_params, aux_params = trained.symbol_and_params()
        mx.model.save_checkpoint(os.path.join(folder, PREFIX), 0, sym, arg_params, aux_params)
        return {"files": [PREFIX + "-symbol.json", PREFIX + "-0000.params"], "prefix": PREFIX, "epoch": 0,
                "label_names": list(trained.spec.label_names)}

    def load(self, spec, release, folder, manifest):
        info = manifest["load"]
        sym, arg_params, aux_params = mx.model.load_checkpoint(os.path.join(folder, info["prefix"]), info["epoch"])
        names = [i["name"] for i in manifest["inputs"]]
        label_names = info.get("label_names") or []

        def predict(inputs):
            return module_predict(sym, arg_params, aux_params, names, label_names, inputs)
        return Predictor(predict)


ADAPTERS = dict((a.name, a) for a in (ExportAdapter(), SaveParametersAdapter(), SaveParamsAdapter(),
                                      ModuleCheckpointAdapter()))
assert set(ADAPTERS) == set(APIS)


def get(api):
    try:
        return ADAPTERS[api]
    except KeyError:
        raise KeyError("unknown API %r; known: %s" % (api, ", ".join(APIS)))
