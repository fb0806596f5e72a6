"""A hostile store: artifacts of a real trained store, edited the way a store someone else wrote can be.

Each hostile artifact is a copy of one real artifact under a model name of its own, its manifest (or a file)
changed, and hashed again where a hash would otherwise give it away: what the kit must refuse by reading, not
by a hash. Standard library and numpy only (the benchmarks use it too: ``bench/soak.py``).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import struct
import zipfile
from pathlib import Path

import numpy as np

#: model name -> the words the cell's ``corrupt`` reason must hold
EXPECTED = {
    "h_traverse_files": "'../../outside.txt' is not a plain relative name",
    "h_traverse_load": "'../../../outside.params'",
    "h_unlisted_load": "'other-symbol.json', which the manifest does not list",
    "h_no_files": "the manifest lists no files",
    "h_absolute": "'/etc/hostname' is not a plain relative name",
    "h_deep_json": "nested too deep",
    "h_huge_params": "model-0000.params: array 0 declares shape (1099511627776",
    "h_npz_shape": "reference.npz: batch.input.data.npy declares shape (1000000, 1000000)",
    "h_symlink_out": "sha256 mismatch or missing: model-0000.params",
}


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _manifest(folder: Path) -> dict:
    return json.loads((folder / "manifest.json").read_text())


def _write(folder: Path, manifest: dict) -> None:
    (folder / "manifest.json").write_text(json.dumps(manifest))


def rehash(folder: Path, *names: str) -> None:
    """Update an artifact manifest's sha256 of ``names``, so a deliberate change gets past the hash check."""
    manifest = _manifest(folder)
    for name in names:
        manifest["files"][name] = _sha(folder / name)
    _write(folder, manifest)


def huge_first_array(params: Path) -> None:
    """Make the first array of an MXNet ``.params`` file declare 2**40 rows (a few bytes changed)."""
    data = bytearray(params.read_bytes())
    for magic in (0xF993FAC9, 0xF993FACA):
        at = data.find(struct.pack("<I", magic))
        if at >= 0:
            break
    assert at >= 0, f"no V2/V3 array in {params}"
    struct.pack_into("<q", data, at + 12, 1 << 40)  # magic, storage type, ndim, then the first dimension
    params.write_bytes(bytes(data))


def npz_declaring(path: Path, shape=(1000000, 1000000)) -> None:
    """A ``.npz`` whose one array's header declares ``shape`` of float32 and holds 8 bytes."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": tuple(shape)})
    member = header.getvalue() + b"\x00" * 8  # the header carries the magic string
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("batch.input.data.npy", member)


def build(source: Path, store: Path, release: str, outside: Path) -> dict:
    """Hostile copies of the export artifact ``source`` (a ``<store>/<release>/<model>/export`` folder) in
    ``store`` under ``release``; ``outside`` is a folder beside the store that nothing may touch. Returns
    :data:`EXPECTED`."""
    outside.mkdir(parents=True, exist_ok=True)
    (outside / "outside.txt").write_text("a file outside every artifact")

    def copy(model: str) -> Path:
        folder = store / release / model / "export"
        shutil.copytree(source, folder)
        return folder

    f = copy("h_traverse_files")
    m = _manifest(f)
    m["files"]["../../outside.txt"] = _sha(outside / "outside.txt")
    _write(f, m)

    f = copy("h_traverse_load")
    m = _manifest(f)
    m["load"]["param_file"] = "../../../outside.params"
    m["files"]["../../../outside.params"] = m["files"]["model-0000.params"]
    _write(f, m)

    f = copy("h_unlisted_load")
    m = _manifest(f)
    m["load"]["symbol_file"] = "other-symbol.json"
    _write(f, m)

    f = copy("h_no_files")
    m = _manifest(f)
    m["files"] = {}
    _write(f, m)

    f = copy("h_absolute")
    m = _manifest(f)
    m["files"]["/etc/hostname"] = "0" * 64
    _write(f, m)

    f = copy("h_deep_json")
    (f / "manifest.json").write_text("[" * 200000 + "]" * 200000)

    f = copy("h_huge_params")
    huge_first_array(f / "model-0000.params")
    rehash(f, "model-0000.params")

    f = copy("h_npz_shape")
    npz_declaring(f / "reference.npz")
    rehash(f, "reference.npz")

    f = copy("h_symlink_out")
    target = outside / "model-0000.params"
    shutil.copyfile(f / "model-0000.params", target)
    os.remove(f / "model-0000.params")
    os.symlink(target, f / "model-0000.params")  # same bytes, same hash: but it is not in the artifact
    return dict(EXPECTED)


def snapshot(folder: Path) -> dict:
    """Every file under ``folder`` with its bytes' hash: what must not change."""
    return {str(p.relative_to(folder)): _sha(p) for p in sorted(folder.rglob("*")) if p.is_file()}
