"""Checkpoints the kit did not train: ``prefix-symbol.json`` + ``prefix-NNNN.params`` from any release.

``prepare`` runs in the reference release's kernel: it checks the graph against the
declared inputs (suggesting shapes from the graph's own shape inference), makes
deterministic inputs (or reads the user's), computes the reference outputs and
internals, and writes the artifact's manifest, so reload.ipynb can treat the
checkpoint like any artifact. Copes with legacy symbol JSON (upgraded on load),
legacy NDArray files, ``arg:``/``aux:`` prefixed or bare parameter names, loss
heads that need label names, and several outputs.
"""

import json
import os
import time

import mxnet as mx
import numpy as np

from kit.common import artifacts
from kit.common.capabilities import FOREIGN_API as API
from kit.common.errors import KitError
from kit.kernel.mx import internals, mxapi
from kit.kernel.mx.mxapi import split_params
from kit.kernel.runtime.fingerprint import fingerprint

SYMBOL, PARAMS = "model-symbol.json", "model-0000.params"


class ForeignModelError(KitError):
    """The checkpoint and the declared inputs do not fit together; the message says how."""


def load(folder, manifest):
    """``(symbol, arg_params, aux_params)`` of the checkpoint in ``folder``, as this release reads it."""
    info = manifest["load"]
    sym = mx.sym.load(os.path.join(folder, info["symbol_file"]))
    arg, aux, _ = split_params(sym, mxapi.load_ndarrays(os.path.join(folder, info["param_file"])))
    return sym, arg, aux


def _fmt(shape):
    return "(" + ", ".join("?" if d == 0 else str(d) for d in shape) + ")"


def suggest_shapes(sym, param_shapes):
    """What shape each free input of ``sym`` must have, as far as the graph tells (0 = any).

    MXNet's partial shape inference first; where it cannot run backwards (an input that
    feeds a convolution or a fully connected layer), the first consuming layer's weight.
    """
    out = {}
    try:
        partial, _, _ = sym.infer_shape_partial(**param_shapes)
        out = dict((n, tuple(s)) for n, s in zip(sym.list_arguments(), partial) if s and any(s))
    except Exception:  # noqa: BLE001 - a suggestion is a bonus
        pass
    nodes = json.loads(sym.tojson())["nodes"]
    for node in nodes:
        if not node["inputs"]:
            continue
        attrs = node.get("attrs") or node.get("attr") or node.get("param") or {}
        first = nodes[node["inputs"][0][0]]
        if first["op"] != "null" or first["name"] in out or first["name"] in param_shapes:
            continue
        weight = nodes[node["inputs"][1][0]]["name"] if len(node["inputs"]) > 1 else None
        wshape = param_shapes.get(weight)
        if node["op"] == "Convolution" and wshape:
            groups = int(attrs.get("num_group", 1))
            out[first["name"]] = (0, wshape[1] * groups) + (0,) * (len(wshape) - 2)
        elif node["op"] == "FullyConnected" and wshape:
            out[first["name"]] = (0, wshape[1])
    return out


def check_graph(sym, inputs, label_names, arg, aux):
    """Raise a :class:`ForeignModelError` naming a missing input or a shape the graph rejects."""
    given = dict((i["name"], tuple(i["shape"])) for i in inputs)
    free = [a for a in sym.list_arguments() if a not in arg and a not in given and a not in label_names]
    param_shapes = dict((k, v.shape) for k, v in list(arg.items()) + list(aux.items()))
    suggested = suggest_shapes(sym, param_shapes)
    if free:
        labels = [f for f in free if f.endswith("_label")]
        hints = [
            "--input %s:%s" % (f, ",".join(str(d or "N") for d in suggested.get(f) or ()) or "SHAPE")
            for f in free
            if f not in labels
        ]
        if labels:
            hints.append("--label-names " + ",".join(labels))
        expect = ", ".join("%s %s" % (f, _fmt(suggested[f])) for f in free if f in suggested)
        raise ForeignModelError(
            "the graph has inputs with no value: %s%s"
            % (", ".join(free), (" (graph expects %s)" % expect) if expect else ""),
            hint="add " + " ".join(hints),
        )
    unknown = [n for n in given if n not in sym.list_arguments()]
    if unknown:
        raise ForeignModelError(
            "the graph has no input called %s" % ", ".join(unknown),
            hint="its inputs are: %s" % ", ".join(a for a in sym.list_arguments() if a not in arg) or "none",
        )
    batch = list(given.values())[0][0] if given and list(given.values())[0] else 1
    shapes = dict(given)
    shapes.update((label, (batch,)) for label in label_names)
    shapes.update(param_shapes)
    try:
        sym.infer_shape(**shapes)
    except Exception as e:  # MXNetError: the message of the failing operator
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        expect = ", ".join("%s %s" % (n, _fmt(suggested[n])) for n in given if n in suggested)
        raise ForeignModelError(
            "input shape %s does not fit the graph: %s"
            % (", ".join("%s %s" % (n, _fmt(s)) for n, s in given.items()), first),
            hint=("the graph expects %s (? = any size)" % expect) if expect else "check the declared --input shapes",
        )


def make_inputs(inputs, seed=0, data_file=None):
    """Deterministic inputs of the declared shapes and dtypes, or the arrays of a user .npy/.npz."""
    if data_file:
        if data_file.endswith(".npz"):
            with np.load(data_file, allow_pickle=False) as z:
                arrays = dict((k, z[k]) for k in z.files)
        else:
            arrays = {inputs[0]["name"]: np.load(data_file, allow_pickle=False)}
        out = {}
        for i in inputs:
            if i["name"] not in arrays:
                raise ForeignModelError("%s has no array for input %r" % (data_file, i["name"]))
            out[i["name"]] = arrays[i["name"]].astype(i["dtype"])
        return out
    rng = np.random.RandomState(seed)
    out = {}
    for i in inputs:
        dtype = np.dtype(i["dtype"])
        if dtype.kind == "f":
            out[i["name"]] = rng.randn(*i["shape"]).astype(dtype)
        else:
            hi = 256 if dtype == np.uint8 else 10
            out[i["name"]] = rng.randint(0, hi, size=i["shape"]).astype(dtype)
    return out


def image_input(path, preprocess):
    """An image file as a model input: ``preprocess`` = {"resize": [w, h], "mean": [...], "std": [...],
    "layout": "NCHW" or "NHWC", "dtype": ...}; read with MXNet's own decoder (no PIL in old releases)."""
    img = mx.image.imread(path)  # HWC, RGB, uint8
    if preprocess.get("resize"):
        w, h = preprocess["resize"]
        img = mx.image.imresize(img, int(w), int(h))
    x = img.asnumpy().astype(preprocess.get("dtype", "float32"))
    if preprocess.get("mean") is not None:
        x = (x / 255.0 - np.array(preprocess["mean"], dtype=x.dtype)) / np.array(
            preprocess.get("std", [1, 1, 1]), dtype=x.dtype
        )
    if preprocess.get("layout", "NCHW") == "NCHW":
        x = np.transpose(x, (2, 0, 1))
    return x[None].astype(preprocess.get("dtype", "float32"))


def forward(sym, arg, aux, inputs, label_names):
    """Outputs (numpy) of the checkpoint on ``inputs``, through the Module API."""
    from kit.kernel.mx.training import module_predict

    names = list(inputs)
    return module_predict(sym, arg, aux, names, list(label_names), inputs)


def prepare(release, folder, spec, seed=0):
    """Write reference outputs, internals and the manifest of the foreign checkpoint in ``folder``."""
    started = time.time()
    manifest = {
        "schema": artifacts.SCHEMA,
        "release": release,
        "model": spec["name"],
        "api": API,
        "status": "saved",
        "foreign": True,
        "model_version": "foreign",
        "inputs": spec["inputs"],
        "load": {"symbol_file": SYMBOL, "param_file": PARAMS, "label_names": list(spec.get("label_names") or [])},
        "source": spec.get("source"),
        "description": "checkpoint %s" % spec.get("source"),
    }
    with open(os.path.join(folder, SYMBOL)) as f:
        raw = json.load(f)
    manifest["symbol_mxnet_version"] = _recorded_version(raw)
    sym, arg, aux = load(folder, manifest)
    _, _, unknown = split_params(sym, mxapi.load_ndarrays(os.path.join(folder, PARAMS)))
    if unknown:
        raise ForeignModelError(
            "parameters not used by the graph: %s%s"
            % (", ".join(sorted(unknown)[:8]), " ..." if len(unknown) > 8 else ""),
            hint="is this the params file of another model? The graph's parameters: %s"
            % ", ".join(a for a in sym.list_arguments() if a not in [i["name"] for i in spec["inputs"]])[:300],
        )
    label_names = manifest["load"]["label_names"]
    if spec.get("image"):
        batch = {spec["inputs"][0]["name"]: image_input(spec["image"], spec.get("preprocess") or {})}
        spec["inputs"][0]["shape"] = list(batch[spec["inputs"][0]["name"]].shape)
    else:
        batch = make_inputs(spec["inputs"], seed, spec.get("data"))
    check_graph(sym, spec["inputs"], label_names, arg, aux)
    cases = {"batch": batch}
    if not spec.get("image") and not spec.get("data"):
        cases["zeros"] = dict((k, np.zeros_like(v)) for k, v in batch.items())
    outputs = dict((c, forward(sym, arg, aux, v, label_names)) for c, v in cases.items())
    artifacts.save_reference(os.path.join(folder, artifacts.REFERENCE), cases, outputs, outputs)
    try:
        nodes = internals.evaluate(sym, arg, aux, internals.first_samples(batch))
        internals.save(os.path.join(folder, internals.INTERNALS), internals.first_samples(batch), nodes)
        manifest["internals"] = {"file": internals.INTERNALS, "nodes": len(nodes), "samples": internals.SAMPLES}
    except Exception as e:  # noqa: BLE001 - internals are a bonus for investigate, never a reason to fail
        manifest["internals"] = {"unavailable": "%s: %s" % (type(e).__name__, e)}
    params = dict((k, v.asnumpy()) for k, v in list(arg.items()) + list(aux.items()))
    manifest["param_version"] = artifacts.param_version(params)
    manifest["reference"] = {
        "file": artifacts.REFERENCE,
        "cases": dict(
            (
                c,
                {
                    "note": "deterministic (seed %d)" % seed if c == "batch" else "all zeros",
                    "outputs": [{"shape": list(o.shape), "dtype": str(o.dtype)} for o in outs],
                },
            )
            for c, outs in outputs.items()
        ),
        "roundtrip_max_abs_error": 0.0,
    }
    files = [SYMBOL, PARAMS, artifacts.REFERENCE] + ([internals.INTERNALS] if "file" in manifest["internals"] else [])
    manifest["files"] = artifacts.hash_files(folder, files)
    manifest["fingerprint"] = fingerprint(release)
    manifest["saved_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    manifest["save_seconds"] = round(time.time() - started, 3)
    artifacts.write_json_atomic(os.path.join(folder, artifacts.MANIFEST), manifest)
    return manifest


def _recorded_version(raw):
    """The MXNet version a symbol JSON records (``attrs.mxnet_version``), or None for legacy files."""
    attrs = raw.get("attrs") or {}
    version = attrs.get("mxnet_version")
    if isinstance(version, list) and len(version) == 2:
        n = int(version[1])
        return "%d.%d.%d" % (n // 10000, (n // 100) % 100, n % 100)
    return None
