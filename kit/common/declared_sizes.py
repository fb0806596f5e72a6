"""What an artifact's files declare they hold, checked against what they hold, before anything allocates for it.

A ``.params`` file declares each array's shape and type before its bytes, and MXNet allocates the declared
size before it reads them; a ``reference.npz`` member declares its uncompressed size and its array's shape.
A file someone else wrote can declare terabytes in a few bytes (or a deflate bomb): these checks read only
headers, bounded, and say what is wrong in words; they return None when the file is sound or when its format is
one they do not know (MXNet itself then decides).
"""

import struct
import zipfile

import numpy as np

#: the most a reference.npz may expand to (its members' declared sizes together)
MAX_REFERENCE_BYTES = 4 << 30

_LIST_MAGIC = 0x112
_V2, _V3 = 0xF993FAC9, 0xF993FACA  # the 1.x and 2.0 array layouts (0.x wrote older ones)
#: mshadow's type flags -> bytes per element
_ITEMSIZE = {0: 4, 1: 8, 2: 2, 3: 1, 4: 4, 5: 1, 6: 8, 7: 1, 8: 2, 9: 2, 10: 4, 11: 8, 12: 2}


class _Unknown(Exception):
    """A layout these checks do not follow: not a problem, only no answer."""


class _Reader(object):
    def __init__(self, f, size):
        self.f, self.size = f, size

    def take(self, fmt):
        n = struct.calcsize(fmt)
        data = self.f.read(n)
        if len(data) != n:
            raise _Unknown()
        return struct.unpack(fmt, data)

    def left(self):
        return self.size - self.f.tell()

    def skip(self, n):
        self.f.seek(n, 1)


def _shape(r, signed):
    ndim = r.take("<i" if signed else "<I")[0]
    if ndim < 0:
        return None  # unknown shape (numpy semantics): nothing stored
    if ndim > 32:
        raise _Unknown()
    dims = r.take("<%dq" % ndim) if ndim else ()
    if any(d < 0 for d in dims):
        raise _Unknown()
    return dims


def params_problem(path):
    """Why the MXNet ``.params`` file at ``path`` cannot hold what it declares (None when it can, or when its
    layout is not one of the dense ones this follows: MXNet's own loader then decides)."""
    with open(path, "rb") as f:
        f.seek(0, 2)
        size = f.tell()
        f.seek(0)
        r = _Reader(f, size)
        try:
            header, _reserved = r.take("<QQ")
            if header != _LIST_MAGIC:
                return None
            count = r.take("<Q")[0]
            if count * 4 > r.left():
                return "declares %d arrays in %d bytes" % (count, size)
            for i in range(count):
                magic = r.take("<I")[0]
                if magic not in (_V2, _V3):
                    return None  # the legacy layouts of MXNet 0.x
                stype = r.take("<i")[0]
                if stype != 0:
                    return None  # sparse: aux data of their own
                dims = _shape(r, signed=magic == _V3)
                if not dims:
                    continue  # none or unknown: no data follows
                r.take("<ii")  # context
                flag = r.take("<i")[0]
                if flag not in _ITEMSIZE:
                    return None
                declared = _ITEMSIZE[flag]
                for d in dims:
                    declared *= d
                if declared > r.left():
                    return "array %d declares shape %s (%d bytes); the file holds %d bytes in all" % (
                        i,
                        tuple(dims),
                        declared,
                        size,
                    )
                r.skip(declared)
        except _Unknown:
            return None
    return None


def npz_problem(path, limit=MAX_REFERENCE_BYTES):
    """Why the ``.npz`` at ``path`` should not be loaded: members that expand past ``limit`` together, or an
    array that declares more than its member holds; None when it is sound."""
    try:
        z = zipfile.ZipFile(path)
    except (zipfile.BadZipfile, IOError, OSError) as e:
        return "not a readable .npz: %s" % e
    with z:
        infos = z.infolist()
        total = sum(i.file_size for i in infos)
        if total > limit:
            return "its %d arrays expand to %d bytes, over the %d-byte limit (a compression bomb?)" % (
                len(infos),
                total,
                limit,
            )
        for info in infos:
            with z.open(info) as member:
                try:
                    version = np.lib.format.read_magic(member)
                    if version == (1, 0):
                        shape, _order, dtype = np.lib.format.read_array_header_1_0(member)
                    elif version == (2, 0):
                        shape, _order, dtype = np.lib.format.read_array_header_2_0(member)
                    else:
                        continue  # a header version this numpy's reader does not take: np.load decides
                except ValueError as e:
                    return "%s: not an array (%s)" % (info.filename, e)
            declared = dtype.itemsize
            for d in shape:
                declared *= d
            if declared > info.file_size:
                return "%s declares shape %s (%d bytes) in a member of %d bytes" % (
                    info.filename,
                    tuple(shape),
                    declared,
                    info.file_size,
                )
    return None
