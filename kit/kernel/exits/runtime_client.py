"""The exits' runtimes from an MXNet kernel: per runtime (ONNX Runtime, OpenVINO, PyTorch) one worker process
(``runtime_worker.py``) in that runtime's environment, started on first use and kept for the kernel's life,
runs every exported model on the reference inputs.

They cannot share an interpreter: onnxruntime's and torch's wheels need numpy >= 1.24 (or onnx >= 1.16),
MXNet 1.x needs numpy < 1.24. Arrays cross as ``.npz`` files, which every numpy reads.
"""

import atexit
import json
import os
import select
import shutil
import subprocess
import tempfile

import numpy as np

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runtime_worker.py")
#: the longest a model's session and run may take before the worker is stopped (the kernel must not hang)
ANSWER_SECONDS = 600

_STATES = {}
_ERRORS = {}


class RuntimeUnavailable(RuntimeError):
    """No environment for the runtime to run in, or its worker would not start."""


def _state(runtime):
    if runtime not in _STATES:
        _STATES[runtime] = {"runtime": runtime, "python": None, "proc": None, "hello": None, "tmp": None, "count": 0}
    return _STATES[runtime]


def configure(runtime, python):
    """Run ``runtime`` (``onnxruntime``, ``openvino``, ``torch``) with ``python``, its environment's interpreter."""
    state = _state(runtime)
    if python != state["python"]:
        _close(state)
    state["python"] = python


def _hint(runtime):
    return "build it with `mxcompat env create %s`" % runtime


def _worker(state):
    proc = state["proc"]
    if proc is not None and proc.poll() is None:
        return proc
    _close(state)  # a worker that died: its files go, a new one starts
    python, runtime = state["python"], state["runtime"]
    if not python or not os.path.exists(python):
        raise RuntimeUnavailable("no %s environment (%s): %s" % (runtime, python or "none configured", _hint(runtime)))
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # nothing of this kernel's environment leaks into the runtime's
    tmp = tempfile.mkdtemp(prefix="mxcompat-%s-" % runtime)
    # its warnings go to a file: a pipe nobody reads fills up and stops the worker mid-run
    with open(os.path.join(tmp, "stderr.log"), "w") as err:
        proc = subprocess.Popen(
            [python, "-u", WORKER, runtime],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            universal_newlines=True,
            env=env,
            cwd=tmp,
        )
    state.update(proc=proc, tmp=tmp)
    hello = _read(state)
    if not hello.get("ready"):
        raise RuntimeUnavailable(
            "%s does not start in %s: %s; %s" % (runtime, python, hello.get("error"), _hint(runtime))
        )
    state["hello"] = hello
    return proc


def _read(state):
    # one answer per request: nothing waits in the file object's buffer when the pipe has nothing to read
    proc, runtime = state["proc"], state["runtime"]
    if not select.select([proc.stdout], [], [], ANSWER_SECONDS)[0]:
        proc.kill()
        proc.wait()
        raise RuntimeUnavailable("the %s worker gave no answer in %d s: stopped" % (runtime, ANSWER_SECONDS))
    line = proc.stdout.readline()
    if not line:
        code = proc.wait()
        with open(os.path.join(state["tmp"], "stderr.log")) as f:
            err = f.read().strip().splitlines()[-3:]
        state["proc"] = None
        raise RuntimeUnavailable("the %s worker exited (code %s): %s" % (runtime, code, " | ".join(err)))
    return json.loads(line)


def version(runtime):
    """``{"name", "versions": {package: version}, "numpy", "python"}`` of ``runtime`` (starts its worker)."""
    state = _state(runtime)
    _worker(state)
    hello = state["hello"]
    return {"name": runtime, "versions": hello["versions"], "numpy": hello["numpy"], "python": hello["python"]}


def _error(name, message):
    """An exception named as ONNX Runtime named it, so the record keeps its type verbatim."""
    cls = _ERRORS.get(name)
    if cls is None:
        cls = _ERRORS[name] = type(str(name), (RuntimeError,), {})
    return cls(message)


class Session(object):
    """One exported model in a runtime; :meth:`run` runs it on a dict of named numpy inputs. ``artifact``, the
    runtime's own file of the model once it ran (the ``.onnx`` itself, OpenVINO's ``.xml``, TorchScript's ``.pt``)."""

    def __init__(self, runtime, model, names, options=None):
        self.runtime, self.model, self.names = runtime, model, list(names)
        self.options = dict(options or {})
        self.artifact = None

    def run(self, inputs):
        state = _state(self.runtime)
        proc = _worker(state)
        state["count"] += 1
        base = os.path.join(state["tmp"], str(state["count"]))
        np.savez(base + "-in.npz", **dict((n, np.asarray(inputs[n])) for n in self.names))
        request = {
            "model": self.model,
            "inputs": base + "-in.npz",
            "outputs": base + "-out.npz",
            "names": self.names,
            "options": self.options,
        }
        proc.stdin.write(json.dumps(request) + "\n")
        proc.stdin.flush()
        answer = _read(state)
        os.remove(base + "-in.npz")
        if not answer.get("ok"):
            raise _error(answer.get("error_type") or "Error", answer.get("error"))
        self.artifact = answer.get("artifact")
        with np.load(base + "-out.npz", allow_pickle=False) as z:
            outputs = [z[k] for k in sorted(z.files, key=int)]
        os.remove(base + "-out.npz")
        return outputs


def session(runtime, model, names, options=None):
    """A :class:`Session` of the ``.onnx`` file ``model`` in ``runtime``, which loads it on the first run (so a
    model it refuses fails at inference, where a runtime's failures belong)."""
    return Session(runtime, model, names, options)


#: how long a worker asked to end (its stdin closed) may take before it is killed
CLOSE_SECONDS = 10


def close():
    """End every worker: its stdin closed, killed if it is not gone within :data:`CLOSE_SECONDS`."""
    for state in list(_STATES.values()):
        _close(state)


def _close(state):
    proc = state["proc"]
    if proc is not None and proc.poll() is None:
        proc.stdin.close()
        try:
            proc.wait(timeout=CLOSE_SECONDS)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc is not None:
        proc.stdout.close()
    if state["tmp"]:
        shutil.rmtree(state["tmp"], ignore_errors=True)
    state.update(proc=None, hello=None, tmp=None)


atexit.register(close)
