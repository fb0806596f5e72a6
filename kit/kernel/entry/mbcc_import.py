"""Files of MXNet's nightly backwards-compatibility checker (MBCC) as kit artifacts, in a release's kernel.

The host (``kit.foreign.mbcc``) reads the checker's layout, ``<mx.__version__>/<model_name>/<model_name>-...``,
decides which kit model and API each model folder is (see ``kit.kernel.models.mbcc_models``) and stages one
folder per artifact; this module, run as ``python -m kit.kernel.entry.mbcc_import JOBS.json`` in a ready
environment, fills each staged folder: the checker's files copied under their own names, the
reference (``-data``'s ``data`` array as the input, ``-inference``'s ``inference`` array as the expected
output: both are ``mx.nd.save`` files, so MXNet reads them), the parameter table and the manifest.

When the environment is the saving release's own, the artifact is also reloaded there through the
kit's adapter (the kit's model code for ``save_params``/``save_parameters``) and compared with the
checker's outputs (``roundtrip_max_abs_error``), and its graph's internals are recorded for
``mxcompat investigate``; in another release's environment both are said to be unavailable.

It also writes the placeholder manifests (status ``unsupported``) of the (model, API) cells the
checker's layout has no files for, so that a run's train step finds every cell of the release
present and trains nothing over the imported files.
"""

import os
import shutil
import time
import traceback
from collections import OrderedDict

import mxnet as mx
import numpy as np

from kit.common import artifacts
from kit.common.errors import KitError, UsageError
from kit.common.main_protocol import serve
from kit.common.versions import same_release
from kit.kernel.models import zoo
from kit.kernel.mx import internals, mxapi
from kit.kernel.runtime.fingerprint import fingerprint
from kit.kernel.saving import adapters

CASE_NOTE = "the MBCC checker's test data (-data 'data') and the outputs it recorded before saving (-inference)"
SAVED_BY = "MXNet's model backwards-compatibility checker (MBCC); the machine that saved the files is not recorded"


class ImportProblem(KitError):
    """The checker's files of one model cannot become an artifact; the message says why."""


def _strip(name):
    return name.split(":", 1)[1] if name.startswith(("arg:", "aux:")) else name


def _array(path, key, what):
    arrays = mxapi.load_ndarrays(path)
    if key not in arrays:
        raise ImportProblem(
            "%s holds no %r array (it holds: %s)" % (os.path.basename(path), key, ", ".join(sorted(arrays)) or "none"),
            hint="the checker saves %s with mx.nd.save(path, {%r: ...})" % (what, key),
        )
    return arrays[key].asnumpy(), dict((k, list(v.shape)) for k, v in arrays.items())


def split_cases(name, x, expected, batch_size=None):
    """``(cases, outputs)``: the checker's samples as reference cases, in the batches it predicted them in.

    The checker's Module model predicts through ``NDArrayIter(batch_size=10)``: with MKLDNN a batch of 20
    rounds differently from two of 10, so each of its batches is a case of its own (``batch``, ``batch_2``,
    ...) and a reload in the saving release gives its outputs bit for bit. The gluon models take all samples
    at once: one ``batch`` case.
    """
    size = int(batch_size or len(x)) or 1
    cases, outputs = OrderedDict(), OrderedDict()
    for i, start in enumerate(range(0, max(len(x), 1), size)):
        case = "batch" if i == 0 else "batch_%d" % (i + 1)
        cases[case] = {name: x[start : start + size]}
        outputs[case] = [expected[start : start + size]]
    return cases, outputs


def _rows_note(case, cases, batch_size):
    if len(cases) == 1:
        return ""
    i = list(cases).index(case)
    return "; samples %d-%d (the checker predicts in batches of %d)" % (
        i * batch_size,
        i * batch_size + len(list(cases[case].values())[0]) - 1,
        batch_size,
    )


def load_info(job, names, spec):
    """The manifest's ``load`` entry: how the kit's adapter of ``job["api"]`` finds the checker's files."""
    api = job["api"]
    if api == "module_checkpoint":
        prefix = names["symbol"][: -len("-symbol.json")]
        return {"prefix": prefix, "epoch": int(job["epoch"]), "label_names": list(spec.label_names)}
    if api == "export":
        return {"symbol_file": names["symbol"], "param_file": names["params"]}
    return {"param_file": names["params"]}


def import_one(job, release, version, converting):
    """Fill ``job["folder"]`` with one artifact; returns the host's summary of it."""
    started = time.time()
    spec, adapter = zoo.get(job["model"]), adapters.get(job["api"])
    folder = job["folder"]
    names = {}
    for role, path in sorted(job["files"].items()):
        names[role] = os.path.basename(path)
        shutil.copyfile(path, os.path.join(folder, names[role]))
    x, data_shapes = _array(job["files"]["data"], "data", "-data")
    expected, inference_shapes = _array(job["files"]["inference"], "inference", "-inference")
    if expected.shape[:1] != x.shape[:1]:
        raise ImportProblem(
            "-inference holds %d outputs for %d samples of -data" % (expected.shape[0], x.shape[0]),
            hint="are the two files from different runs of the checker?",
        )
    own = spec.input_specs(release)[0].to_dict()
    own.update(shape=list(x.shape[1:]), dtype=str(x.dtype))
    params = dict((_strip(k), v.asnumpy()) for k, v in mxapi.load_ndarrays(job["files"]["params"]).items())
    if not params:
        raise ImportProblem("%s holds no parameters" % names["params"])
    variant = dict(job.get("variant") or {})
    manifest = {
        "schema": artifacts.SCHEMA,
        "release": release,
        "model": spec.name,
        "model_version": spec.version,
        "api": job["api"],
        "status": "saved",
        "description": spec.description,
        "inputs": [own],
        "load": load_info(job, names, spec),
        "param_version": artifacts.param_version(params),
        "parameters": dict((n, artifacts.param_stats(params[n])) for n in sorted(params)),
        "variant": variant,
        "fingerprint": {"release": None, "mxnet": version, "saved_by": SAVED_BY},
        "saved_at": None,
        "imported_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "mbcc": {
            "model_name": job["mbcc_model"],
            "mx_version": version,
            "source": job.get("source"),
            "files": dict((names[r], artifacts.sha256_file(p)) for r, p in sorted(job["files"].items())),
            "data_arrays": data_shapes,
            "inference_arrays": inference_shapes,
            "converted_in": converting,
            "converted_fingerprint": fingerprint(converting),
        },
    }
    cases, outputs = split_cases(own["name"], x, expected, job.get("batch_size"))
    artifacts.save_reference(os.path.join(folder, artifacts.REFERENCE), cases, outputs, outputs)
    roundtrip = None
    if converting == release:
        try:
            predictor = adapter.load(spec, release, folder, manifest)
            worst = 0.0
            for case in cases:
                got = predictor(cases[case])
                if len(got) != 1 or got[0].shape != outputs[case][0].shape:
                    raise ImportProblem(
                        "case %s: outputs %s, the checker recorded %s"
                        % (case, [list(o.shape) for o in got], list(outputs[case][0].shape))
                    )
                diff = np.abs(got[0].astype(np.float64) - outputs[case][0].astype(np.float64))
                worst = max(worst, float(diff.max()) if diff.size else 0.0)
            roundtrip = worst
            manifest["mbcc"]["roundtrip"] = {"release": release, "max_abs": roundtrip}
        except Exception as e:  # noqa: BLE001 - reported, and the reload records say the same
            manifest["mbcc"]["roundtrip"] = {"error": "%s: %s" % (type(e).__name__, str(e).strip()[:500])}
        try:
            manifest["internals"] = internals.record(adapter, spec, release, folder, manifest, cases["batch"])
        except Exception as e:  # noqa: BLE001 - internals are a bonus for investigate, never a reason to fail
            manifest["internals"] = {"unavailable": "%s: %s" % (type(e).__name__, e)}
    else:
        why = "converted in %s, not in the saving release %s (its environment is not ready)" % (converting, release)
        manifest["mbcc"]["roundtrip"] = {"unavailable": why}
        manifest["internals"] = {"unavailable": why}
    manifest["reference"] = {
        "file": artifacts.REFERENCE,
        "cases": dict(
            (
                case,
                {
                    "note": "%s%s" % (CASE_NOTE, _rows_note(case, cases, job.get("batch_size"))),
                    "outputs": [{"shape": list(o.shape), "dtype": str(o.dtype)} for o in outputs[case]],
                },
            )
            for case in cases
        ),
        "roundtrip_max_abs_error": roundtrip,
    }
    files = list(names.values()) + [artifacts.REFERENCE]
    if "file" in manifest["internals"]:
        files.append(manifest["internals"]["file"])
    manifest["files"] = artifacts.hash_files(folder, files)
    manifest["save_seconds"] = round(time.time() - started, 3)
    artifacts.write_json_atomic(os.path.join(folder, artifacts.MANIFEST), manifest)
    return {
        "model": spec.name,
        "api": job["api"],
        "param_version": manifest["param_version"],
        "roundtrip": manifest["mbcc"]["roundtrip"],
    }


def write_placeholder(entry, release, version, converting):
    """An ``unsupported`` manifest for a (model, API) cell the checker's layout has no files for."""
    spec = zoo.get(entry["model"])
    manifest = {
        "schema": artifacts.SCHEMA,
        "release": release,
        "model": spec.name,
        "model_version": spec.version,
        "api": entry["api"],
        "description": spec.description,
        "status": "unsupported",
        "reason": entry["reason"],
        "files": {},
        "fingerprint": {"release": None, "mxnet": version, "saved_by": SAVED_BY},
        "imported_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "mbcc": {"mx_version": version, "placeholder": True, "converted_in": converting},
    }
    artifacts.write_json_atomic(os.path.join(entry["folder"], artifacts.MANIFEST), manifest)


def run(spec):
    """Every job and placeholder of the host's request; one result per job, a failure never stops the others."""
    release, version, converting = spec["release"], spec["version"], spec["converting"]
    if not same_release(converting, mx.__version__):
        raise KitError("this environment runs MXNet %s, not %s" % (mx.__version__, converting))
    results = []
    for job in spec.get("jobs", []):
        try:
            row = import_one(job, release, version, converting)
            row["ok"] = True
        except Exception as e:  # noqa: BLE001 - the host reports it as skipped, with the reason
            row = {"model": job["model"], "api": job["api"], "ok": False}
            row["error"] = "%s: %s" % (type(e).__name__, getattr(e, "message", None) or str(e).strip()[:500])
            row["traceback"] = "\n".join(traceback.format_exc().strip().splitlines()[-6:])
            # the cell's manifest says so (the host keeps an artifact already in the store instead)
            row["reason"] = "the MBCC checker's %s of MXNet %s could not be imported: %s" % (
                job["mbcc_model"],
                version,
                row["error"],
            )
            shutil.rmtree(job["folder"], ignore_errors=True)
            os.makedirs(job["folder"])
            write_placeholder(dict(job, reason=row["reason"]), release, version, converting)
        row["mbcc_model"] = job["mbcc_model"]
        results.append(row)
    for entry in spec.get("placeholders", []):
        write_placeholder(entry, release, version, converting)
    return results


def from_request(spec):
    """``python -m kit.kernel.entry.mbcc_import JOBS.json``: answers ``{"results"}`` (kit.common.main_protocol); a
    wrong environment is exit 2 with ``{"error", "hint"}``."""
    try:
        return {"results": run(spec)}
    except KitError as e:
        raise UsageError(e.message, hint=e.hint)


if __name__ == "__main__":
    raise SystemExit(serve(from_request))
