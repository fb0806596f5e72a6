"""ONNX Runtime on the far side: a program run by the ONNX Runtime environment's Python (no MXNet, no kit).

It is started by path (``python onnx_worker.py``) and imports only numpy and onnxruntime. It reads one JSON
request a line on stdin and answers one JSON line on stdout:

- at start: ``{"ready": true, "onnxruntime": ..., "numpy": ..., "python": ...}`` (or ``"ready": false`` and why);
- ``{"model": PATH, "inputs": NPZ, "outputs": NPZ}``: run the model on the named inputs (cast to the types the
  model declares), write its outputs to ``outputs`` as ``"0", "1", ...``; answer ``{"ok": true}`` or
  ``{"ok": false, "phase": "session"|"run", "error_type", "error", "traceback"}``, the error verbatim.

It keeps the sessions of the last :data:`MAX_SESSIONS` models (a run's cells ask for each model a few times in
a row), each under its file's path, size and modification time: a file written again (a remedy's next edit,
exported to the same path) gets a new session. ``python -m kit.kernel.exits.onnx_worker REQUEST.json`` only
greets, as kit.common.main_protocol answers: the environment's probe.
"""

import json
import os
import sys
import traceback
from collections import OrderedDict

#: the most ONNX Runtime sessions kept at once (each holds its model's weights)
MAX_SESSIONS = 4

_TYPES = {
    "tensor(float)": "float32",
    "tensor(double)": "float64",
    "tensor(float16)": "float16",
    "tensor(int32)": "int32",
    "tensor(int64)": "int64",
}


def _answer(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _run(sessions, request):
    import numpy as np
    import onnxruntime as ort

    phase = "session"
    try:
        stat = os.stat(request["model"])
        key = (request["model"], stat.st_size, stat.st_mtime_ns)
        session = sessions.pop(key, None)
        if session is None:
            session = ort.InferenceSession(request["model"], providers=["CPUExecutionProvider"])
        sessions[key] = session  # the newest last
        while len(sessions) > MAX_SESSIONS:
            sessions.popitem(last=False)
        phase = "run"
        with np.load(request["inputs"], allow_pickle=False) as z:
            given = dict((k, z[k]) for k in z.files)
        order = request.get("names") or sorted(given)
        feed = {}
        for i, declared in enumerate(session.get_inputs()):
            value = given[declared.name] if declared.name in given else given[order[i]]
            feed[declared.name] = np.asarray(value, dtype=_TYPES.get(declared.type, value.dtype))
        outputs = session.run(None, feed)
        np.savez(request["outputs"], **dict((str(i), np.asarray(o)) for i, o in enumerate(outputs)))
        return {"ok": True}
    except Exception as e:  # noqa: BLE001 - every failure goes back verbatim; the worker lives on
        return {
            "ok": False,
            "phase": phase,
            "error_type": type(e).__name__,
            "error": str(e).strip(),
            "traceback": "\n".join(traceback.format_exc().strip().splitlines()[-8:]),
        }


def greeting():
    """What this environment's worker says at start: its versions, or why onnxruntime does not import."""
    try:
        import numpy
        import onnxruntime
    except Exception as e:  # noqa: BLE001
        return {"ready": False, "error": "%s: %s" % (type(e).__name__, e)}
    return {
        "ready": True,
        "onnxruntime": onnxruntime.__version__,
        "numpy": numpy.__version__,
        "python": "%d.%d.%d" % sys.version_info[:3],
    }


def main():
    hello = greeting()
    _answer(hello)
    if not hello["ready"]:
        return 1
    sessions = OrderedDict()
    for line in sys.stdin:
        if line.strip():
            _answer(_run(sessions, json.loads(line)))
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1:  # a probe (``env create``/``doctor``): the greeting as the kit's answer, then done
        from kit.common.main_protocol import serve

        sys.exit(serve(lambda request: greeting()))
    sys.exit(main())
