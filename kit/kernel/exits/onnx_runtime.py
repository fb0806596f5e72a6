"""ONNX Runtime from an MXNet kernel: one worker process (``onnx_worker.py``) in the ONNX Runtime environment,
started on first use and kept for the kernel's life, runs every exported model on the reference inputs.

The two cannot share an interpreter: onnxruntime's wheels need numpy >= 1.24, MXNet 1.x needs numpy < 1.24.
Arrays cross as ``.npz`` files, which every numpy reads.
"""

import atexit
import json
import os
import select
import shutil
import subprocess
import tempfile

import numpy as np

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "onnx_worker.py")
HINT = "build it with `mxcompat env create onnxruntime`"
#: the longest a model's session and run may take before the worker is stopped (the kernel must not hang)
ANSWER_SECONDS = 600

_STATE = {"python": None, "proc": None, "hello": None, "tmp": None, "count": 0}
_ERRORS = {}


class RuntimeUnavailable(RuntimeError):
    """No ONNX Runtime environment to run in, or its worker would not start."""


def configure(python):
    """Run ONNX Runtime with ``python`` (the ONNX Runtime environment's interpreter)."""
    if python != _STATE["python"]:
        close()
    _STATE["python"] = python


def _worker():
    proc = _STATE["proc"]
    if proc is not None and proc.poll() is None:
        return proc
    close()  # a worker that died: its files go, a new one starts
    python = _STATE["python"]
    if not python or not os.path.exists(python):
        raise RuntimeUnavailable("no ONNX Runtime environment (%s): %s" % (python or "none configured", HINT))
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # nothing of this kernel's environment leaks into the runtime's
    tmp = tempfile.mkdtemp(prefix="mxcompat-ort-")
    # its warnings go to a file: a pipe nobody reads fills up and stops the worker mid-run
    with open(os.path.join(tmp, "stderr.log"), "w") as err:
        proc = subprocess.Popen(
            [python, "-u", WORKER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            universal_newlines=True,
            env=env,
            cwd=tmp,
        )
    _STATE.update(proc=proc, tmp=tmp)
    hello = _read(proc)
    if not hello.get("ready"):
        raise RuntimeUnavailable("ONNX Runtime does not start in %s: %s; %s" % (python, hello.get("error"), HINT))
    _STATE["hello"] = hello
    return proc


def _read(proc):
    # one answer per request: nothing waits in the file object's buffer when the pipe has nothing to read
    if not select.select([proc.stdout], [], [], ANSWER_SECONDS)[0]:
        proc.kill()
        proc.wait()
        raise RuntimeUnavailable("the ONNX Runtime worker gave no answer in %d s: stopped" % ANSWER_SECONDS)
    line = proc.stdout.readline()
    if not line:
        code = proc.wait()
        with open(os.path.join(_STATE["tmp"], "stderr.log")) as f:
            err = f.read().strip().splitlines()[-3:]
        _STATE["proc"] = None
        raise RuntimeUnavailable("the ONNX Runtime worker exited (code %s): %s" % (code, " | ".join(err)))
    return json.loads(line)


def version():
    """``{"onnxruntime", "numpy", "python"}`` of the runtime (starts the worker)."""
    _worker()
    return dict((k, _STATE["hello"][k]) for k in ("onnxruntime", "numpy", "python"))


def _error(name, message):
    """An exception named as ONNX Runtime named it, so the record keeps its type verbatim."""
    cls = _ERRORS.get(name)
    if cls is None:
        cls = _ERRORS[name] = type(str(name), (RuntimeError,), {})
    return cls(message)


class Session(object):
    """One exported model in the runtime; calling it runs the model on a dict of named numpy inputs."""

    def __init__(self, model, names):
        self.model, self.names = model, list(names)

    def run(self, inputs):
        proc = _worker()
        _STATE["count"] += 1
        base = os.path.join(_STATE["tmp"], str(_STATE["count"]))
        np.savez(base + "-in.npz", **dict((n, np.asarray(inputs[n])) for n in self.names))
        request = {"model": self.model, "inputs": base + "-in.npz", "outputs": base + "-out.npz", "names": self.names}
        proc.stdin.write(json.dumps(request) + "\n")
        proc.stdin.flush()
        answer = _read(proc)
        os.remove(base + "-in.npz")
        if not answer.get("ok"):
            raise _error(answer.get("error_type") or "Error", answer.get("error"))
        with np.load(base + "-out.npz", allow_pickle=False) as z:
            outputs = [z[k] for k in sorted(z.files, key=int)]
        os.remove(base + "-out.npz")
        return outputs


def session(model, names):
    """A :class:`Session` of the ``.onnx`` file ``model``; the runtime creates it on the first run (so a model
    it refuses fails at inference, where ONNX Runtime's failures belong)."""
    return Session(model, names)


#: how long a worker asked to end (its stdin closed) may take before it is killed
CLOSE_SECONDS = 10


def close():
    """End the worker: its stdin closed, killed if it is not gone within :data:`CLOSE_SECONDS`."""
    proc = _STATE["proc"]
    if proc is not None and proc.poll() is None:
        proc.stdin.close()
        try:
            proc.wait(timeout=CLOSE_SECONDS)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc is not None:
        proc.stdout.close()
    if _STATE["tmp"]:
        shutil.rmtree(_STATE["tmp"], ignore_errors=True)
    _STATE.update(proc=None, hello=None, tmp=None)


atexit.register(close)
