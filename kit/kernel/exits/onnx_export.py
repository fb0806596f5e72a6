"""An artifact's graph exported to ONNX by this kernel's MXNet: ``mx.onnx.export_model`` (1.9 on) or
``mx.contrib.onnx.export_model`` (1.3 to 1.8), the exporter a user leaving MXNet runs.

Where the ``.onnx`` file goes is set once per kernel (:func:`configure`: the run's ``onnx/`` folder, where a
maintainer opens it); an artifact folder of the store is never written.
"""

import os
import sys
import traceback

import numpy as np

from kit.common import artifacts

#: where exports go: <out>/<saved release>/<model>/<source api>/model.onnx (a temporary folder when unset)
_OUT = {"dir": None}

#: the numpy dtype name -> the type MXNet's exporter takes
_TYPES = {"float32": np.float32, "float64": np.float64, "float16": np.float16, "int32": np.int32, "int64": np.int64}


def configure(out_dir):
    """Write exports under ``out_dir`` (None: beside the artifact's private copy)."""
    _OUT["dir"] = out_dir


def exporter():
    """``(name, export_model function)`` of this release; ``(None, reason)`` when it has none that imports."""
    try:
        import mxnet as mx
    except ImportError as e:  # pragma: no cover - a kernel always has MXNet
        return None, "mxnet does not import: %s" % e
    problems = []
    for name in ("mxnet.onnx", "mxnet.contrib.onnx"):
        try:
            module = __import__(name, fromlist=["export_model"])
            return name.replace("mxnet", "mx") + ".export_model", module.export_model
        except Exception as e:  # noqa: BLE001 - an exporter that needs another onnx package says so here
            problems.append("%s: %s: %s" % (name, type(e).__name__, e))
    return None, "MXNet %s has no ONNX exporter that imports here (%s)" % (mx.__version__, "; ".join(problems))


def available():
    """``(True, None)`` when this kernel can export to ONNX, else ``(False, why)`` naming what is missing."""
    try:
        import onnx  # noqa: F401
    except ImportError as e:
        return False, (
            "the onnx package does not import in this environment (%s): exports run in an exporter environment, "
            "the release with its measured onnx pin (`mxcompat env create onnx-RELEASE`, then --load onnx-RELEASE)" % e
        )
    name, fn = exporter()
    return (True, None) if name else (False, fn)


class _opset(object):
    """The opset the exporter writes and checks against: MXNet's exporters take the onnx package's newest
    (``onnx.defs.onnx_opset_version()``, also the checker's default context), whatever opset their converters
    were written for; ``opset`` pins both while exporting."""

    def __init__(self, opset):
        self.opset, self.saved = opset, None

    def __enter__(self):
        if self.opset is not None:
            import onnx.checker
            import onnx.defs

            context = onnx.checker.DEFAULT_CONTEXT
            self.saved = (onnx.defs.onnx_opset_version, dict(context.opset_imports))
            onnx.defs.onnx_opset_version = lambda: self.opset
            context.opset_imports = {"": self.opset}
        return self

    def __exit__(self, *exc):
        if self.saved is not None:
            import onnx.checker
            import onnx.defs

            onnx.defs.onnx_opset_version = self.saved[0]
            onnx.checker.DEFAULT_CONTEXT.opset_imports = self.saved[1]
        return False


def _converter(tb):
    """The innermost exporter function converting one operator (``convert_softmax_output``) in ``tb``; not the
    dispatcher (``convert_layer``), whose own errors name the operator."""
    found = None
    for frame, _ in traceback.walk_tb(tb):
        name = frame.f_code.co_name
        if name.startswith("convert_") and name != "convert_layer" and "onnx" in frame.f_code.co_filename:
            found = name
    return found


def _label_taken_for_input(exc, sym_path):
    """Why the exporter indexes past the input shapes: it skips only the label named after the graph's last
    node (``<last>_label``), so a SoftmaxOutput label elsewhere (a head that is not last) is taken for a data
    input. None for any other error."""
    if not isinstance(exc, IndexError):
        return None
    import mxnet as mx

    sym = mx.sym.load(sym_path)
    internals = sym.get_internals()
    skipped = internals[len(internals) - 1].name + "_label"
    labels = [n for n in sym.list_arguments() if n.endswith("_label") and n != skipped]
    if not labels:
        return None
    return "the exporter skips only the label %s; it took the SoftmaxOutput label input %s for a data input" % (
        skipped,
        ", ".join(labels),
    )


def files(manifest):
    """``(symbol file, params file)`` of a graph artifact (an export, Module or foreign checkpoint)."""
    info = manifest.get("load") or {}
    if "symbol_file" in info:
        return info["symbol_file"], info.get("param_file")
    return "%s-symbol.json" % info["prefix"], "%s-%04d.params" % (info["prefix"], info["epoch"])


def destination(folder, manifest, opset=None, batch=None):
    """Where the export of the artifact in ``folder`` goes (a pinned opset's beside it, named by the opset)."""
    name = "model.onnx" if opset is None else "model.opset%d.onnx" % opset
    if batch:
        name = name.replace(".onnx", ".batch%d.onnx" % batch)
    if _OUT["dir"] is None:
        return os.path.join(folder, name)
    parts = [manifest.get("release") or "unknown", manifest.get("model") or "model", manifest.get("api") or "graph"]
    return os.path.join(_OUT["dir"], *parts + [name])


def input_shape(spec, manifest, batch=None):
    """One input's shape with a batch of ``batch`` (one): a zoo manifest's shapes leave the batch out (a single
    image's has none), a check-model checkpoint's give it first."""
    batch = [batch or 1]
    if manifest.get("foreign"):
        return tuple(batch + list(spec["shape"])[1:])
    return tuple(spec["shape"]) if spec.get("kind") == "pixels_single" else tuple(batch + list(spec["shape"]))


def export(folder, manifest, opset=None, out=None, batch=None):
    """Export the artifact in ``folder`` to ONNX; ``{"file", "sha256", "exporter", "onnx", "opset", "dynamic",
    "shapes", ...}``.

    ``opset``, the opset to write (None: the exporter's own default). ``mx.onnx`` writes a free batch dimension;
    the older ``mx.contrib.onnx`` a fixed one, ``batch`` (default 1). Raises what the exporter raises.
    """
    import onnx

    name, fn = exporter()
    if name is None:
        raise RuntimeError(fn)
    symbol, params = files(manifest)
    inputs = manifest["inputs"]
    shapes = [input_shape(i, manifest, batch) for i in inputs]
    types = [_TYPES.get(i.get("dtype", "float32"), np.float32) for i in inputs]
    dynamic = name == "mx.onnx.export_model"
    out = out or destination(folder, manifest, opset, None if dynamic else batch)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    sym_path = os.path.join(folder, symbol)
    param_path = os.path.join(folder, params) if params else None
    kwargs = {}
    if name == "mx.onnx.export_model":
        args = (sym_path, param_path or {}, shapes, types, out)
        kwargs["dynamic"] = True  # the batch dimension is free: every reference case runs on one file
        kwargs["dynamic_input_shapes"] = [(None,) + s[1:] for s in shapes]
    else:
        args = (sym_path, param_path or {}, shapes, types[0], out)
    with _opset(opset):
        try:
            fn(*args, **kwargs)
        except Exception as e:
            converter = _converter(sys.exc_info()[2])
            said = "raised in the exporter's %s" % converter if converter else _label_taken_for_input(e, sym_path)
            if said is None:
                raise
            try:  # the exporter's message verbatim, and where it came from (an IndexError says little)
                enriched = type(e)("%s\n(%s)" % (e, said))
            except Exception:  # noqa: BLE001 - an exception type that takes other arguments: as it was
                raise e
            raise enriched
    model = onnx.load(out)
    return {
        "file": out,
        "sha256": artifacts.sha256_file(out),
        "bytes": os.path.getsize(out),
        "exporter": name,
        "onnx": onnx.__version__,
        "opset": max([o.version for o in model.opset_import if o.domain in ("", "ai.onnx")] or [0]),
        "opset_asked": opset,
        "dynamic": dynamic,
        "shapes": [list(s) for s in shapes],
    }
