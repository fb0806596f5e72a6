"""An exit's runtime on the far side: a program run by a runtime environment's Python (no MXNet, no kit).

``python runtime_worker.py RUNTIME`` (``onnxruntime``, ``openvino`` or ``torch``) imports only numpy and that
runtime. It reads one JSON request a line on stdin and answers one JSON line on stdout:

- at start: ``{"ready": true, "runtime": ..., "versions": {...}, "numpy": ..., "python": ...}`` (or
  ``"ready": false`` and why);
- ``{"model": PATH, "inputs": NPZ, "outputs": NPZ, "names": [...], "options": {...}}``: load the ``.onnx`` file
  as the runtime's own artifact (OpenVINO: its IR ``.xml``/``.bin`` beside it; PyTorch: a TorchScript ``.pt``
  beside it, converted by onnx2torch), run that artifact on the named inputs (cast to the types the model
  declares), write its outputs to ``outputs`` as ``"0", "1", ...``; answer ``{"ok": true, "artifact": PATH}`` or
  ``{"ok": false, "phase": "session"|"run", "error_type", "error", "traceback"}``, the error verbatim.

The artifact run is the one written and read back: what a user leaves with is what was measured. The worker
keeps the last :data:`MAX_SESSIONS` models, each under its file's path, size, modification time and options: a
file written again (a remedy's next edit, exported to the same path) gets a new one. ``python -m
kit.kernel.exits.runtime_worker REQUEST.json`` only greets, as kit.common.main_protocol answers: the probe.
"""

import json
import os
import sys
import traceback
from collections import OrderedDict

#: the most models kept loaded at once (each holds its weights)
MAX_SESSIONS = 4

_ONNX_TYPES = {
    "tensor(float)": "float32",
    "tensor(double)": "float64",
    "tensor(float16)": "float16",
    "tensor(int32)": "int32",
    "tensor(int64)": "int64",
}
#: onnx.TensorProto element types -> numpy
_ELEM_TYPES = {1: "float32", 6: "int32", 7: "int64", 10: "float16", 11: "float64"}


class Loaded(object):
    """A model as its runtime holds it: the inputs it declares ``[(name, dtype or None)]``, a ``run(feed)``
    giving its outputs in order, and the artifact file it was read from."""

    def __init__(self, inputs, run, artifact):
        self.inputs, self.run, self.artifact = inputs, run, artifact


def _onnxruntime(model, options):
    import onnxruntime as ort

    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    inputs = [(i.name, _ONNX_TYPES.get(i.type)) for i in session.get_inputs()]
    return Loaded(inputs, lambda feed: session.run(None, feed), model)


def _openvino(model, options):
    import openvino as ov

    core = ov.Core()
    ir = os.path.splitext(model)[0] + ".xml"
    # weights kept in float32: save_model's default halves them to float16, a precision loss the user did not ask for
    ov.save_model(core.read_model(model), ir, compress_to_fp16=False)
    compiled = core.compile_model(core.read_model(ir), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    inputs = [(p.get_any_name(), str(p.get_element_type().to_dtype())) for p in compiled.inputs]

    def run(feed):
        result = compiled([feed[name] for name, _ in inputs])
        return [result[port] for port in compiled.outputs]

    return Loaded(inputs, run, ir)


def _torch(model, options):
    import onnx
    import torch
    from onnx2torch import convert

    graph = onnx.load(model)
    converters = _import_sibling("torch_converters")
    converters.make_shapes_traceable()
    converters.use(bool(options.get("kit_converters")))
    if options.get("kit_converters"):
        graph = converters.fold_rnn_weights(graph)
    initializers = set(t.name for t in graph.graph.initializer)
    declared = [i for i in graph.graph.input if i.name not in initializers]
    inputs = [(i.name, _ELEM_TYPES.get(i.type.tensor_type.elem_type)) for i in declared]
    module = convert(graph).eval()
    artifact = os.path.splitext(model)[0] + ".pt"
    state = {"script": None}

    def run(feed):
        args = tuple(torch.from_numpy(feed[name]) for name, _ in inputs)
        with torch.no_grad():
            if state["script"] is None:  # traced on the first inputs, saved, and read back as a user would
                traced = torch.jit.trace(module, args, check_trace=False)
                torch.jit.save(traced, artifact)
                state["script"] = torch.jit.load(artifact).eval()
            outputs = state["script"](*args)
        outputs = list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]
        return [o.numpy() for o in outputs]

    return Loaded(inputs, run, artifact)


#: runtime -> (the modules whose versions it reports, the loader of a ``.onnx`` file)
RUNTIMES = {
    "onnxruntime": (("onnxruntime",), _onnxruntime),
    "openvino": (("openvino",), _openvino),
    "torch": (("torch", "onnx2torch", "onnx"), _torch),
}


def _import_sibling(name):
    """A module beside this file: the worker runs by path, the probe as ``kit.kernel.exits.runtime_worker``."""
    import importlib

    folder = os.path.dirname(os.path.abspath(__file__))
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return importlib.import_module(name)


def _answer(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _run(runtime, sessions, request):
    import numpy as np

    phase = "session"
    try:
        options = request.get("options") or {}
        stat = os.stat(request["model"])
        key = (request["model"], stat.st_size, stat.st_mtime_ns, json.dumps(options, sort_keys=True))
        loaded = sessions.pop(key, None)
        if loaded is None:
            loaded = RUNTIMES[runtime][1](request["model"], options)
        sessions[key] = loaded  # the newest last
        while len(sessions) > MAX_SESSIONS:
            sessions.popitem(last=False)
        phase = "run"
        with np.load(request["inputs"], allow_pickle=False) as z:
            given = dict((k, z[k]) for k in z.files)
        order = request.get("names") or sorted(given)
        feed = {}
        for i, (name, dtype) in enumerate(loaded.inputs):
            value = given[name] if name in given else given[order[i]]
            feed[name] = np.ascontiguousarray(value, dtype=dtype or value.dtype)
        outputs = loaded.run(feed)
        np.savez(request["outputs"], **dict((str(i), np.asarray(o)) for i, o in enumerate(outputs)))
        return {"ok": True, "artifact": loaded.artifact}
    except Exception as e:  # noqa: BLE001 - every failure goes back verbatim; the worker lives on
        return {
            "ok": False,
            "phase": phase,
            "error_type": type(e).__name__,
            "error": str(e).strip(),
            "traceback": "\n".join(traceback.format_exc().strip().splitlines()[-8:]),
        }


def _version(package):
    """An installed package's version (onnx2torch has no ``__version__``); the runtimes' Pythons are >= 3.8."""
    from importlib import metadata

    return metadata.version(package)


def greeting(runtime):
    """What ``runtime``'s worker says at start: its versions, or why it does not import."""
    if runtime not in RUNTIMES:
        return {"ready": False, "error": "unknown runtime %r; known: %s" % (runtime, ", ".join(sorted(RUNTIMES)))}
    versions = {}
    try:
        import numpy

        for name in RUNTIMES[runtime][0]:
            __import__(name)  # what is missing is said first
            versions[name] = _version(name)
    except Exception as e:  # noqa: BLE001
        return {"ready": False, "runtime": runtime, "error": "%s: %s" % (type(e).__name__, e)}
    return {
        "ready": True,
        "runtime": runtime,
        "versions": versions,
        "numpy": numpy.__version__,
        "python": "%d.%d.%d" % sys.version_info[:3],
    }


def main(runtime):
    hello = greeting(runtime)
    _answer(hello)
    if not hello["ready"]:
        return 1
    sessions = OrderedDict()
    for line in sys.stdin:
        if line.strip():
            _answer(_run(runtime, sessions, json.loads(line)))
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1].endswith(".json"):  # a probe (``env create``/``doctor``): the greeting
        from kit.common.main_protocol import serve

        sys.exit(serve(lambda request: greeting(request.get("release"))))
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "onnxruntime"))
