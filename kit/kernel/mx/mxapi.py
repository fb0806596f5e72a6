"""The few MXNet calls whose form differs between 1.x and 2.0, behind one name each.

MXNet 2.0 turns numpy semantics on: gluon blocks take and return ``mx.np.ndarray``,
``mx.nd.load`` refuses files saved without numpy shape semantics (every 1.x file),
``Symbol.bind`` became ``_bind``, and a block's ``_children`` hold weak references.
Everything here runs on MXNet 1.0 and Python 3.6 as well.
"""

import weakref

import mxnet as mx

from kit.common.capabilities import has_feature


def gluon2(release=None):
    """True when ``release`` (default: this kernel's MXNet) has the Gluon 2.0 interface."""
    return has_feature(release or mx.__version__, "gluon2")[0]


def prepare_kernel():
    """Turn numpy semantics on in a Gluon 2.0 release, as a 2.0 user's script does (``npx.set_np()``):
    2.0.0b1 starts with them on, 2.0.0a0 with them off, and 2.0's numpy operators refuse legacy arrays."""
    if gluon2() and not numpy_semantics():
        mx.npx.set_np()


def numpy_semantics():
    """True when MXNet's numpy array semantics are on (the 2.0 default)."""
    util = getattr(mx, "util", None)
    return bool(util is not None and hasattr(util, "is_np_array") and util.is_np_array())


def array(value):
    """``value`` (numpy) as the array type gluon blocks take here, keeping its dtype (uint8 pixels stay uint8)."""
    if numpy_semantics():
        return mx.np.array(value, dtype=value.dtype)
    return mx.nd.array(value, dtype=value.dtype)


def as_array(value):
    """An NDArray (e.g. from :func:`load_ndarrays`) as the array type blocks take here."""
    return value.as_np_ndarray() if numpy_semantics() and hasattr(value, "as_np_ndarray") else value


def zeros(shape):
    return mx.np.zeros(shape) if numpy_semantics() else mx.nd.zeros(shape)


def legacy_semantics():
    """A context in which 1.x-format NDArray files load (2.0: numpy semantics off; 1.x: nothing changes)."""
    if not numpy_semantics():
        return _Nothing()
    return _Legacy()


class _Nothing(object):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class _Legacy(object):
    """``np_array(False)`` before ``np_shape(False)``: MXNet refuses the other order."""

    def __enter__(self):
        self._scopes = [mx.util.np_array(False), mx.util.np_shape(False)]
        for scope in self._scopes:
            scope.__enter__()
        return self

    def __exit__(self, *exc):
        for scope in reversed(self._scopes):
            scope.__exit__(*exc)
        return False


def load_ndarrays(path):
    """The name -> NDArray dict of a parameter file, whichever release saved it."""
    with legacy_semantics():
        loaded = mx.nd.load(path)
    return loaded if isinstance(loaded, dict) else dict(("%d" % i, a) for i, a in enumerate(loaded))


def bind(sym, args, aux):
    """An inference executor of ``sym`` on CPU (``Symbol.bind`` in 1.x, ``_bind`` in 2.0)."""
    method = getattr(sym, "bind", None) or getattr(sym, "_bind")
    return method(mx.cpu(), args=args, aux_states=aux, grad_req="null")


def symbol_block(sym, input_names):
    """A gluon SymbolBlock over a legacy symbol; under numpy semantics the graph is turned into a numpy one
    (as ``SymbolBlock.imports`` does), since a 2.0 block refuses legacy outputs."""
    from mxnet import gluon

    inputs = [mx.sym.var(n) for n in input_names]
    if numpy_semantics():
        sym, inputs = sym.as_np_ndarray(), [i.as_np_ndarray() for i in inputs]
    return gluon.SymbolBlock(sym, inputs)


def on_cpu(value):
    """A parameter's array as the legacy NDArray on CPU that a bound executor takes (2.0 hands out mx.np ones)."""
    if hasattr(value, "as_nd_ndarray"):
        value = value.as_nd_ndarray()
    return value.as_in_context(mx.cpu())


def add(sequential, *blocks):
    """``sequential.add(*blocks)``; MXNet 0.11's ``add`` takes one block a call."""
    for block in blocks:
        sequential.add(block)
    return sequential


def children(block):
    """A block's direct children: a list before 1.3, a dict after, of weak references in 2.0."""
    kids = block._children
    kids = list(kids.values()) if isinstance(kids, dict) else list(kids)
    return [k() if isinstance(k, weakref.ref) else k for k in kids]


def to_numpy(outputs):
    """A block's output (one array or several) as a list of numpy arrays."""
    return [o.asnumpy() for o in (outputs if isinstance(outputs, (list, tuple)) else [outputs])]


def split_params(sym, arrays):
    """``(arg_params, aux_params)`` from a params dict whose keys are ``arg:``/``aux:`` prefixed or bare."""
    args, auxs = set(sym.list_arguments()), set(sym.list_auxiliary_states())
    arg, aux, unknown = {}, {}, []
    for key, value in arrays.items():
        kind, _, name = key.partition(":") if key.startswith(("arg:", "aux:")) else ("", "", key)
        if name in auxs and kind in ("", "aux"):
            aux[name] = value
        elif name in args and kind in ("", "arg"):
            arg[name] = value
        else:
            unknown.append(key)
    return arg, aux, unknown
