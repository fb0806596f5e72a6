"""Artifact files on disk: hashes, manifests, reference arrays, atomic writes.

An artifact is what one (release, model, API) saved, in ``<store>/<release>/<model>/<api>/``:
the saved files, ``reference.npz`` (inputs and the outputs the saving release
produced), ``train.ipynb`` (the executed notebook that made it, added by the kit when
its step ends) and ``manifest.json``. A folder is built beside its final place and
renamed into it, so a crash never leaves a half artifact that looks complete.
"""

import contextlib
import ctypes
import hashlib
import io
import json
import os
import re
import shutil

try:
    import fcntl
except ImportError:  # not POSIX: artifacts are not locked across processes there
    fcntl = None

import numpy as np

from kit.common import declared_sizes
from kit.common.capabilities import EXIT_APIS
from kit.common.errors import KitError
from kit.common.names import is_safe_name, is_safe_relative

MANIFEST = "manifest.json"
REFERENCE = "reference.npz"
TRAIN_NOTEBOOK = "train.ipynb"
SCHEMA = 1


INFLIGHT = ".inflight-%s.json"  # in a records folder: the artifact a kernel of that release is working on


def cell_stem(saved, model, api, loaded, archived=None):
    """The name of one (artifact, loading release) cell in file names: its record, its investigation.

    ``archived``: the identity (``<model_version>-<param_version>``) of a replaced version kept under
    ``.versions/``, a cell of its own.
    """
    stem = "%s__%s__%s__%s" % (saved, model, api, loaded)
    return stem + ("__v" + archived if archived else "")


def inflight_name(release, apis=None):
    """The in-flight marker of a kernel of ``release``: an exit step's apart, as it runs on the same release's
    kernel as that release's reload step, maybe at the same time."""
    return INFLIGHT % (release + "-onnx" if apis and set(apis) & set(EXIT_APIS) else release)


def record_name(saved, model, api, loaded, archived=None):
    """The file name of one (artifact, loading release) record."""
    return cell_stem(saved, model, api, loaded, archived) + ".json"


def param_stats(array):
    """One parameter as a table row: shape, dtype, a content hash and summary statistics.

    The train run records it per saved parameter and investigate computes it for the loaded
    one: both sides hash and summarize through this one function, so their rows compare exactly.
    """
    a = np.ascontiguousarray(array)
    f = a.astype(np.float64)
    return {
        "shape": list(a.shape),
        "dtype": str(a.dtype),
        "sha256": hashlib.sha256(a.tobytes()).hexdigest()[:16],
        "mean": float(f.mean()) if f.size else 0.0,
        "std": float(f.std()) if f.size else 0.0,
        "absmax": float(np.abs(f).max()) if f.size else 0.0,
    }


def sha256_file(path, chunk=1 << 20):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            block = f.read(chunk)
            if not block:
                break
            h.update(block)
    return h.hexdigest()


def param_version(arrays):
    """Identity of trained weights: a hash over every parameter's name, dtype, shape and bytes."""
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(("%s|%s|%s|" % (name, a.dtype.str, a.shape)).encode("utf-8"))
        h.update(a.tobytes())
    return h.hexdigest()[:16]


def write_atomic(path, write, binary=False, durable=True):
    """Write ``path`` through ``write(file)`` into a temporary file beside it (``NAME.tmp-PID``) and rename that
    over it: readers see the old or the new file, never a half one; on failure (a full disk) the temporary file
    is removed and ``path`` is untouched (one a killed writer left: ``Run.sweep_partial_writes``).

    ``durable``: on disk before the rename (fsync), so it survives the machine crashing too; a file only a
    crashing process must leave behind (a kernel's in-flight marker) need not wait for that."""
    path = str(path)
    tmp = "%s.tmp-%d" % (path, os.getpid())
    try:
        with open(tmp, "wb") if binary else io.open(tmp, "w", encoding="utf-8", newline="") as f:
            write(f)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.rename(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def write_json_atomic(path, obj, durable=True):
    """``obj`` as JSON into ``path``, atomically (:func:`write_atomic`)."""
    write_atomic(path, lambda f: json.dump(obj, f, indent=1, sort_keys=True), durable=durable)


def read_json(path):
    """The JSON document at ``path``; ValueError for one nested too deep to parse (a crafted file), as for any
    other that is not JSON."""
    with open(path) as f:
        try:
            return json.load(f)
        except RecursionError:
            raise ValueError("%s: JSON nested too deep to read" % path)


def artifact_dir(store, release, model, api):
    """Where the current artifact of (release, model, API) lives: ``<store>/<release>/<model>/<api>/``."""
    return os.path.join(str(store), release, model, api)


def staging_dir(final):
    """A fresh folder beside ``final`` to build an artifact in."""
    parent, name = os.path.split(final)
    os.makedirs(parent, exist_ok=True)
    tmp = os.path.join(parent, ".%s.tmp-%d" % (name, os.getpid()))
    if os.path.exists(tmp):
        shutil.rmtree(tmp)
    os.makedirs(tmp)
    return tmp


VERSIONS = ".versions"


def identity(manifest):
    """``"<model_version>-<param_version>"``: which code and which weights an artifact holds."""
    return "%s-%s" % (manifest.get("model_version"), manifest.get("param_version"))


def archive_dir(store, release, model, api):
    """The folder that keeps an artifact's replaced versions: ``<store>/.versions/<release>/<model>/<api>/``."""
    return os.path.join(store, VERSIONS, release, model, api)


def version_dir(store, release, model, api, ident):
    """Where a replaced artifact version is kept: ``<store>/.versions/<release>/<model>/<api>/<identity>/``."""
    return os.path.join(archive_dir(store, release, model, api), ident)


@contextlib.contextmanager
def locked(final, exclusive=True):
    """Hold the lock of the artifact at ``final`` (``.<api>.lock`` beside it, never listed): exclusive to
    replace it, shared to read it whole. Writers of one artifact go one at a time and a reader never sees
    it half old, half new, across processes and runs (flock; a store that cannot be written has no
    writers, so it is read without a lock)."""
    parent, name = os.path.split(os.path.normpath(final))
    handle = None
    try:
        if exclusive:
            os.makedirs(parent, exist_ok=True)
        handle = open(os.path.join(parent, ".%s.lock" % name), "a")
    except (IOError, OSError):
        if exclusive:
            raise
    try:
        if handle is not None and fcntl is not None:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        if handle is not None:
            handle.close()  # closing releases the flock


def commit_dir(tmp, final, archive=None):
    """Move a finished artifact folder into place, under the artifact's lock.

    A replaced artifact that holds other weights or code is kept under ``archive``
    (its identity as the folder name), so older versions stay loadable; one with
    the same identity is simply replaced.
    """
    with locked(final):
        recover(*os.path.split(os.path.normpath(final)))
        _commit_dir(tmp, final, archive)


def _commit_dir(tmp, final, archive):
    if not os.path.exists(final):
        os.rename(tmp, final)
        return
    parent, name = os.path.split(final)
    old = os.path.join(parent, ".%s.old-%d" % (name, os.getpid()))  # hidden: never listed as an artifact
    if _exchange(tmp, final):  # one step: ``final`` is never missing
        os.rename(tmp, old)
    else:  # two renames; a crash between them hides the old artifact until :func:`recover` puts it back
        os.rename(final, old)
        os.rename(tmp, final)
    keep = None
    if archive:
        try:
            before = read_json(os.path.join(old, MANIFEST))
            after = read_json(os.path.join(final, MANIFEST))
        except (IOError, OSError, ValueError):
            before = after = None
        if before and before.get("status") == "saved" and identity(before) != identity(after):
            keep = os.path.join(archive, identity(before))
    if keep:
        if os.path.exists(keep):
            shutil.rmtree(keep)
        parent = os.path.dirname(keep)
        os.makedirs(parent, exist_ok=True)
        os.rename(old, keep)
    else:
        shutil.rmtree(old)


_OLD = re.compile(r"^\.(.+)\.old-[0-9]+\Z")


def _exchange(a, b):
    """Swap the folders ``a`` and ``b`` in one step (Linux ``renameat2(RENAME_EXCHANGE)``); False where the
    system or the filesystem cannot, and nothing changed."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    return renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0


def recover(folder, held=None):
    """Put back the artifacts in ``folder`` (a model's folder) that a commit interrupted between its two renames
    left hidden (``.<api>.old-<pid>`` and no ``<api>``), each under its lock (``held``: the name whose lock the
    caller holds already); the names put back. A store that cannot be written is left as it is."""
    try:
        names = os.listdir(folder)
    except (IOError, OSError):
        return []
    back = []
    for hidden in names:
        m = _OLD.match(hidden)
        if not m or not is_safe_name(m.group(1)) or os.path.exists(os.path.join(folder, m.group(1))):
            continue
        final = os.path.join(folder, m.group(1))
        try:
            with locked(final) if m.group(1) != held else _nothing():  # a commit holds it: once ours, none does
                if not os.path.exists(final) and os.path.isfile(os.path.join(folder, hidden, MANIFEST)):
                    os.rename(os.path.join(folder, hidden), final)
                    back.append(m.group(1))
        except (IOError, OSError):
            pass
    return back


@contextlib.contextmanager
def _nothing():
    yield


def attach_file(folder, name, source):
    """Copy ``source`` into the artifact ``folder`` as ``name`` and hash it in the manifest (rewritten atomically)."""
    with locked(folder):
        _attach_file(folder, name, source)


def _attach_file(folder, name, source):
    manifest = read_json(os.path.join(folder, MANIFEST))
    tmp = os.path.join(folder, ".%s.tmp" % name)
    shutil.copyfile(source, tmp)
    os.rename(tmp, os.path.join(folder, name))
    files = dict(manifest.get("files") or {})
    files[name] = sha256_file(os.path.join(folder, name))
    manifest["files"] = files
    write_json_atomic(os.path.join(folder, MANIFEST), manifest)


def hash_files(folder, names):
    return dict((n, sha256_file(os.path.join(folder, n))) for n in sorted(names))


def reference_key(case, part, name):
    return "%s.%s.%s" % (case, part, name)


def save_reference(path, cases, outputs, memory_outputs):
    """``cases``: case -> {input: array}; ``outputs``/``memory_outputs``: case -> [array]."""
    arrays = {}
    for case, inputs in cases.items():
        for name, a in inputs.items():
            arrays[reference_key(case, "input", name)] = a
        for i, a in enumerate(outputs[case]):
            arrays[reference_key(case, "output", str(i))] = a
        for i, a in enumerate(memory_outputs[case]):
            arrays[reference_key(case, "memory", str(i))] = a
    np.savez(path, **arrays)


def load_reference(path):
    """case -> {"input": {name: array}, "output": [arrays], "memory": [arrays]}; never unpickles, and refuses
    (ValueError) a file whose arrays declare more than it holds or expand past
    :data:`~kit.common.declared_sizes.MAX_REFERENCE_BYTES`."""
    problem = declared_sizes.npz_problem(path)
    if problem:
        raise ValueError(problem)
    out = {}
    with np.load(path, allow_pickle=False) as z:
        for key in z.files:
            case, part, name = key.split(".", 2)
            entry = out.setdefault(case, {"input": {}, "output": {}, "memory": {}})
            entry[part][name] = z[key]
    for entry in out.values():
        for part in ("output", "memory"):
            entry[part] = [entry[part][k] for k in sorted(entry[part], key=int)]
    return out


def loaded_files(manifest):
    """The files a manifest's ``load`` section makes a loader read (graph, parameters), by name."""
    info = manifest.get("load") or {}
    if not isinstance(info, dict):
        return ["load: %r" % (info,)]
    names = [info.get(k) for k in ("symbol_file", "param_file") if info.get(k) is not None]
    if info.get("prefix") is not None:
        prefix, epoch = info.get("prefix"), info.get("epoch")
        if not isinstance(prefix, str) or not isinstance(epoch, int) or isinstance(epoch, bool):
            return ["prefix %r with epoch %r" % (prefix, epoch)]
        names += ["%s-symbol.json" % prefix, "%s-%04d.params" % (prefix, epoch)]
    arch = manifest.get("architecture")
    if isinstance(arch, dict) and arch.get("file") is not None:
        names.append(arch["file"])
    return names


def name_problems(manifest):
    """What is wrong with the file names a saved artifact's manifest gives, in words (empty: nothing).

    Every name must be a plain relative name inside the artifact (``a/b.json``, never ``..``, ``/x`` or a
    newline), the manifest must list at least one file, and every file its ``load`` section names must be
    listed (and so hashed): a store someone else wrote cannot make a kernel read or write past the artifact.
    """
    files = manifest.get("files")
    if not isinstance(files, dict):
        return ["the manifest's files are not a table of names and hashes"]
    if not files:  # an unsupported cell's manifest says why, and has nothing to list
        return ["the manifest lists no files"] if manifest.get("status") == "saved" else []
    unsafe = [n for n in files if not is_safe_relative(n)]
    problems = ["file %r is not a plain relative name inside the artifact" % n for n in unsafe]
    for name in loaded_files(manifest):
        if not isinstance(name, str) or name not in files:
            problems.append("its load section names %r, which the manifest does not list" % (name,))
    return problems


def content_problems(folder, manifest):
    """What a verified artifact's files declare that they cannot hold (``.params`` arrays larger than the file,
    ``.npz`` arrays larger than their members or members that expand past the limit), in words: checked from
    their headers before MXNet or numpy allocates what they declare."""
    problems = []
    for name in sorted(manifest.get("files") or {}):
        path = os.path.join(folder, name)
        if name.endswith(".params"):
            problem = declared_sizes.params_problem(path)
        elif name.endswith(".npz"):
            problem = declared_sizes.npz_problem(path)
        else:
            continue
        if problem:
            problems.append("%s: %s" % (name, problem))
    return problems


def verify(folder, manifest=None):
    """Names of files whose sha256 differs from the manifest's (missing files included), or the manifest's
    :func:`name_problems`, in which case nothing was read through it."""
    manifest = manifest or read_json(os.path.join(folder, MANIFEST))
    problems = name_problems(manifest)
    if problems:
        return problems
    bad = []
    inside = os.path.realpath(folder) + os.sep
    for name, digest in sorted(manifest["files"].items()):
        path = os.path.join(folder, name)
        if not os.path.realpath(path).startswith(inside) or not os.path.isfile(path) or sha256_file(path) != digest:
            bad.append(name)  # a link out of the artifact counts as missing: nothing outside is read
    return bad


def verified_manifest(folder, nothing_done):
    """The manifest of the artifact ``folder`` once its files verify and their contents are sound; else a
    KitError that says the artifact is corrupt and ``nothing_done`` (e.g. "nothing was converted")."""
    manifest = read_json(os.path.join(folder, MANIFEST))
    bad = verify(folder, manifest) or content_problems(folder, manifest)
    if bad:
        raise KitError("artifact %s is corrupt (%s): %s" % (folder, "; ".join(bad), nothing_done))
    return manifest
