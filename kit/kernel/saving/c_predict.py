"""MXNet's C predict API (``include/mxnet/c_predict_api.h``) driven through ctypes from a kernel.

The ABI under MXNet's C++, Java/Scala and mobile predictors: ``MXPredCreate`` binds a graph
(symbol JSON text plus the raw bytes of a ``.params`` file) for the input shapes given,
``MXPredSetInput`` / ``MXPredForward`` / ``MXPredGetOutputShape`` / ``MXPredGetOutput`` run it,
``MXPredFree`` releases it and ``MXGetLastError`` says why a call returned nonzero.

What the C side does (src/c_api/c_predict_api.cc, the same from 0.11 to 1.9):

* it takes only ``arg:NAME`` / ``aux:NAME`` keys of the parameter file (what ``HybridBlock.export``
  and ``save_checkpoint`` write); other keys (``save_parameters``' bare names) are skipped silently;
* every graph argument the inputs do not name is allocated with its inferred shape and left
  uninitialized unless the parameter file has it. A loss head's label (``softmax_label`` of a
  ``SoftmaxOutput``) is such an argument: its shape is inferred from the data and the forward pass
  never reads it, so a Module checkpoint predicts with the data inputs only, as C++ users call it.
  Any *other* argument left unset would silently run on garbage, so :func:`predict` refuses that
  (``strict=True``), naming the arguments;
* outputs are float32 (``MXPredGetOutput`` copies into a float buffer).

The library ships the API from 0.11 through 1.9; MXNet 2.0 dropped it (its libmxnet.so keeps only
``MXGetLastError``), so there :func:`available` says which symbols are missing and :func:`predict`
raises :class:`CPredictError` with that reason.
Python 3.6 / numpy 1.13 / MXNet 1.0 clean, like the rest of the kernel side.
"""

import ctypes
import json
import os
import tempfile

import mxnet as mx
import numpy as np

from kit.common.errors import KitError

REQUIRED_SYMBOLS = (
    "MXPredCreate",
    "MXPredSetInput",
    "MXPredForward",
    "MXPredGetOutputShape",
    "MXPredGetOutput",
    "MXPredFree",
    "MXGetLastError",
)
DEV_CPU = 1
MX_FLOAT32 = 0  # mshadow::kFloat32, what MXPredGetOutputType (1.5+) reports for a float32 output
# ops whose second input is a label that inference never reads
LOSS_OPS = frozenset(
    [
        "SoftmaxOutput",
        "Softmax",
        "LinearRegressionOutput",
        "LogisticRegressionOutput",
        "MAERegressionOutput",
        "SVMOutput",
    ]
)

_uint = ctypes.c_uint  # mx_uint: unsigned int before 1.5, uint32_t after (the same on every platform MXNet ships)
_handle = ctypes.c_void_p
_state = {}


class CPredictError(KitError):
    """A C predict API call returned nonzero (``mx_message``: MXGetLastError()'s text), or the API
    is missing from this release's libmxnet.so, or the graph would run with unset arguments."""

    def __init__(self, message, hint=None, mx_message=None):
        super(CPredictError, self).__init__(message, hint)
        self.mx_message = mx_message


def library_path():
    """The path of the libmxnet.so this kernel's ``import mxnet`` loaded."""
    name = getattr(getattr(mx.base, "_LIB", None), "_name", None)
    if name and os.path.exists(name):
        return name
    return mx.libinfo.find_lib_path()[0]


def _load():
    """(ctypes library with the prototypes set, None) or (None, reason); cached."""
    if "lib" in _state:
        return _state["lib"], _state["reason"]
    lib, reason = None, None
    try:
        path = library_path()
        # a CDLL object of our own: the same loaded library, but prototypes that never touch mxnet.base._LIB's
        lib = ctypes.CDLL(path)
    except Exception as e:  # noqa: BLE001 - reported, not raised: available() must not crash
        lib, reason = None, "cannot load libmxnet.so of MXNet %s: %s" % (mx.__version__, e)
    if lib is not None:
        missing = [s for s in REQUIRED_SYMBOLS if not hasattr(lib, s)]
        if missing:
            reason = "libmxnet.so of MXNet %s has no %s (%s): its C predict API (c_predict_api.h) is not built in" % (
                mx.__version__,
                ", ".join(missing),
                path,
            )
            lib = None
        else:
            _prototypes(lib)
    _state["lib"], _state["reason"] = lib, reason
    return lib, reason


def _prototypes(lib):
    lib.MXGetLastError.restype = ctypes.c_char_p
    lib.MXGetLastError.argtypes = []
    lib.MXPredCreate.restype = ctypes.c_int
    lib.MXPredCreate.argtypes = [
        ctypes.c_char_p,  # symbol_json_str
        ctypes.c_char_p,  # param_bytes (raw bytes, NULs included: only the pointer is passed)
        ctypes.c_int,  # param_size
        ctypes.c_int,  # dev_type
        ctypes.c_int,  # dev_id
        _uint,  # num_input_nodes
        ctypes.POINTER(ctypes.c_char_p),  # input_keys
        ctypes.POINTER(_uint),  # input_shape_indptr
        ctypes.POINTER(_uint),  # input_shape_data
        ctypes.POINTER(_handle),  # out
    ]
    lib.MXPredSetInput.restype = ctypes.c_int
    lib.MXPredSetInput.argtypes = [_handle, ctypes.c_char_p, ctypes.POINTER(ctypes.c_float), _uint]
    lib.MXPredForward.restype = ctypes.c_int
    lib.MXPredForward.argtypes = [_handle]
    lib.MXPredGetOutputShape.restype = ctypes.c_int
    lib.MXPredGetOutputShape.argtypes = [_handle, _uint, ctypes.POINTER(ctypes.POINTER(_uint)), ctypes.POINTER(_uint)]
    lib.MXPredGetOutput.restype = ctypes.c_int
    lib.MXPredGetOutput.argtypes = [_handle, _uint, ctypes.POINTER(ctypes.c_float), _uint]
    lib.MXPredFree.restype = ctypes.c_int
    lib.MXPredFree.argtypes = [_handle]
    if hasattr(lib, "MXPredGetOutputType"):  # 1.5+
        lib.MXPredGetOutputType.restype = ctypes.c_int
        lib.MXPredGetOutputType.argtypes = [_handle, _uint, ctypes.POINTER(ctypes.c_int)]


def available():
    """``(True, None)`` when this release's libmxnet.so exposes the C predict API, else ``(False, reason)``
    with the reason naming the missing symbol(s)."""
    lib, reason = _load()
    return (True, None) if lib is not None else (False, reason)


def _library():
    lib, reason = _load()
    if lib is None:
        raise CPredictError(reason, hint="the C predict API ships in MXNet 0.11 to 1.9; MXNet 2.0 removed it")
    return lib


def _last_error(lib):
    text = lib.MXGetLastError()
    return text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text or "")


def _check(lib, name, rc):
    if rc != 0:
        mx_message = _last_error(lib)
        raise CPredictError("%s failed (MXNet %s): %s" % (name, mx.__version__, mx_message), mx_message=mx_message)


def _bytes(text):
    return text.encode("utf-8") if not isinstance(text, bytes) else text


def _size(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n


def loss_labels(symbol_json):
    """Names of the variables feeding a loss head's label input (``softmax_label`` of a SoftmaxOutput)."""
    graph = json.loads(symbol_json if not isinstance(symbol_json, bytes) else symbol_json.decode("utf-8"))
    nodes = graph.get("nodes", [])
    labels = []
    for node in nodes:
        inputs = node.get("inputs") or []
        if node.get("op") in LOSS_OPS and len(inputs) >= 2:
            source = nodes[inputs[1][0]]
            if source.get("op") == "null" and source["name"] not in labels:
                labels.append(source["name"])
    return labels


def _output_count(symbol_json):
    graph = json.loads(symbol_json if not isinstance(symbol_json, bytes) else symbol_json.decode("utf-8"))
    heads = graph.get("heads")
    if heads is not None:
        return len(heads)
    return len(mx.sym.load_json(symbol_json).list_outputs())


def _param_keys(param_bytes):
    from kit.kernel.mx import mxapi

    fd, path = tempfile.mkstemp(suffix=".params", prefix="kit-c-predict-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(param_bytes)
        return list(mxapi.load_ndarrays(path).keys())
    finally:
        os.remove(path)


def unset_arguments(symbol_json, param_bytes, input_names):
    """Graph arguments / auxiliary states that MXPredCreate would allocate and leave uninitialized:
    neither an input nor an ``arg:``/``aux:`` key of the parameter file, and no loss head's label."""
    text = symbol_json.decode("utf-8") if isinstance(symbol_json, bytes) else symbol_json
    sym = mx.sym.load_json(text)
    keys = set(_param_keys(param_bytes))
    given = set(input_names) | set(loss_labels(text))
    unset = [n for n in sym.list_arguments() if n not in given and "arg:" + n not in keys]
    unset += [n for n in sym.list_auxiliary_states() if n not in given and "aux:" + n not in keys]
    return unset


def predict(symbol_json, param_bytes, inputs, output_count=None, strict=True):
    """Outputs (list of float32 numpy arrays) of the graph run through the C predict API on CPU.

    ``symbol_json``: the text of a ``-symbol.json``; ``param_bytes``: the raw bytes of a ``.params``
    file with ``arg:``/``aux:`` keys; ``inputs``: an OrderedDict name -> array (batch first), passed
    as float32. Labels of loss heads need not be given (see the module docstring); one given in
    ``inputs`` is set like any input. ``output_count``: how many outputs to fetch (default: all the
    graph's heads). ``strict``: refuse a graph that would run with uninitialized arguments.
    Raises :class:`CPredictError` for every nonzero return, with MXGetLastError()'s text.
    """
    lib = _library()
    json_bytes, param_bytes = _bytes(symbol_json), bytes(param_bytes)
    if len(param_bytes) > 2**31 - 1:
        raise CPredictError(
            "a parameter file of %d bytes is over what MXPredCreate's int size takes" % len(param_bytes)
        )
    names = list(inputs.keys())
    arrays = [np.ascontiguousarray(inputs[n], dtype=np.float32) for n in names]
    keys = (ctypes.c_char_p * len(names))(*[_bytes(n) for n in names])
    indptr, shape_data = [0], []
    for a in arrays:
        shape_data.extend(int(d) for d in a.shape)
        indptr.append(len(shape_data))
    c_indptr = (_uint * len(indptr))(*indptr)
    c_shape = (_uint * max(1, len(shape_data)))(*shape_data)
    handle = _handle()
    _check(
        lib,
        "MXPredCreate",
        lib.MXPredCreate(
            json_bytes,
            param_bytes,
            len(param_bytes),
            DEV_CPU,
            0,
            len(names),
            keys,
            c_indptr,
            c_shape,
            ctypes.byref(handle),
        ),
    )
    failed = True
    try:
        if strict:
            unset = unset_arguments(json_bytes, param_bytes, names)
            if unset:
                raise CPredictError(
                    "MXPredCreate would run this graph with uninitialized %s: neither an input nor an arg:/aux: key "
                    "of the parameter file" % ", ".join(unset),
                    hint="pass them in inputs, or save the parameters with export/save_checkpoint (arg:/aux: keys)",
                )
        for name, a in zip(names, arrays):
            ptr = a.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
            _check(lib, "MXPredSetInput(%s)" % name, lib.MXPredSetInput(handle, _bytes(name), ptr, a.size))
        _check(lib, "MXPredForward", lib.MXPredForward(handle))
        count = _output_count(json_bytes.decode("utf-8")) if output_count is None else int(output_count)
        outputs = [_output(lib, handle, index) for index in range(count)]
        failed = False
    finally:
        rc = lib.MXPredFree(handle)
        if not failed:  # an earlier error is the one to report
            _check(lib, "MXPredFree", rc)
    return outputs


def _output(lib, handle, index):
    """Output ``index`` of a forwarded predictor as a float32 numpy array of its exact shape."""
    shape_ptr, ndim = ctypes.POINTER(_uint)(), _uint()
    _check(
        lib,
        "MXPredGetOutputShape(%d)" % index,
        lib.MXPredGetOutputShape(handle, index, ctypes.byref(shape_ptr), ctypes.byref(ndim)),
    )
    shape = tuple(int(shape_ptr[i]) for i in range(ndim.value))  # valid only until the next MXPred call
    if hasattr(lib, "MXPredGetOutputType"):  # 1.5+: refuse what a float buffer cannot hold
        dtype = ctypes.c_int()
        _check(lib, "MXPredGetOutputType(%d)" % index, lib.MXPredGetOutputType(handle, index, ctypes.byref(dtype)))
        if dtype.value != MX_FLOAT32:
            raise CPredictError(
                "output %d has MXNet dtype %d: MXPredGetOutput copies into float32 only" % (index, dtype.value)
            )
    out = np.empty(shape, dtype=np.float32)
    ptr = out.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
    _check(lib, "MXPredGetOutput(%d)" % index, lib.MXPredGetOutput(handle, index, ptr, _size(shape)))
    return out


def predict_files(prefix, epoch, inputs, output_count=None, strict=True):
    """:func:`predict` on ``prefix-symbol.json`` and ``prefix-%04d.params`` (export / save_checkpoint files)."""
    with open("%s-symbol.json" % prefix) as f:
        symbol_json = f.read()
    with open("%s-%04d.params" % (prefix, int(epoch)), "rb") as f:
        param_bytes = f.read()
    return predict(symbol_json, param_bytes, inputs, output_count=output_count, strict=strict)
