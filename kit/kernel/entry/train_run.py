"""What train.ipynb runs: train each zoo model, save it with every API, record references and manifests."""

import os
import platform
import shutil
import sys
import time
import traceback

import mxnet as mx
import numpy as np

from kit.common import artifacts, cases, cell_selection
from kit.common.capabilities import APIS, MODEL_GROUPS, expand_models, split_pin
from kit.common.errors import KitError
from kit.common.versions import RELEASE_VERSION_VARIABLE, same_release
from kit.kernel.models import zoo
from kit.kernel.mx import internals, mxapi
from kit.kernel.mx.training import train
from kit.kernel.runtime.fingerprint import fingerprint
from kit.kernel.saving import adapters, architecture


class TrainFailed(KitError):
    """Some (model, API) artifacts could not be saved; the others were."""


def _reports(expected, reported):
    try:
        return same_release(expected, reported)
    except ValueError:  # a custom name that is no version, in a kernel registered before the variable existed
        return True


def check_kernel(release):
    """Refuse to run when the kernel's MXNet is not the release the notebook was asked for; then set the
    kernel up as a user of that release would (numpy semantics on in 2.0).

    A custom release's kernel says the version it must report in ``MXCOMPAT_RELEASE_VERSION``
    (empty: unknown, nothing to compare); a table release's name is its version.
    """
    expected = os.environ.get(RELEASE_VERSION_VARIABLE, release)
    if expected and not _reports(expected, mx.__version__):
        raise KitError(
            "this kernel runs MXNet %s, but release is %r%s"
            % (mx.__version__, release, "" if expected == release else " (which reports %s)" % expected),
            hint="run the notebook on release %s's kernel (mxcompat env list names it)" % release,
        )
    mxapi.prepare_kernel()


def _select(names, known, what):
    if not names or names in ("all", ["all"]):
        return list(known)
    names = [names] if isinstance(names, str) else list(names)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise KitError("unknown %s: %s" % (what, ", ".join(unknown)), hint="known: " + ", ".join(known))
    return names


def train_and_save(
    release, store, models=None, apis=None, seed=0, epochs=None, retrain=False, log=None, cells=None, saved_by=None
):
    """Train and save every requested (model, API) of this kernel's release into ``store``;
    ``cells`` (``MODEL:API`` patterns) narrows the pairs, a model none of whose APIs it names is not trained.

    ``saved_by`` (the run step, ``<run id>/train:<release>``) goes into every manifest written, so the kit
    can keep this executed notebook beside the artifacts it made.

    Returns one row per (model, API): status ``saved``, ``exists``, ``unsupported``
    (with the reason) or ``failed`` (with the error); a failure never stops the others.
    """
    check_kernel(release)
    log = log or (lambda msg: sys.stdout.write(msg + "\n"))
    models, unknown = expand_models(models)
    if unknown:
        raise KitError(
            "unknown models: %s" % ", ".join(unknown),
            hint="known: %s; groups: %s" % (", ".join(zoo.MODELS), ", ".join(sorted(MODEL_GROUPS))),
        )
    all_apis = _select(apis, list(APIS), "APIs")
    env = fingerprint(release)
    rows, histories = [], {}
    for n, entry in enumerate(models):
        name, pin = split_pin(entry)
        apis = [a for a in all_apis if cell_selection.matches(cells, name, a)]
        if not apis:
            continue
        spec = zoo.get(name)
        finals = dict((api, artifacts.artifact_dir(store, release, name, api)) for api in apis)
        if not retrain and all(os.path.isfile(os.path.join(d, artifacts.MANIFEST)) for d in finals.values()):
            rows.extend(_row(name, api, "exists", finals[api]) for api in apis)
            continue
        ok, reason = spec.supported(release)
        if ok and pin:
            ok, reason = _builds_pinned(spec, release, pin)
            if not ok:  # nothing is written: the store's artifacts of other architectures stay as they are
                rows.extend(_row(name, api, "unsupported", finals[api], reason=reason) for api in apis)
                log("%s: not trained on %s (%s)" % (name, release, reason))
                continue
        if not ok:
            for api in apis:
                _write_unsupported(spec, release, api, finals[api], reason, env, saved_by)
                rows.append(_row(name, api, "unsupported", finals[api], reason=reason))
            log("%s: unsupported on %s (%s)" % (name, release, reason))
            continue
        saving = []
        for api in apis:
            ok, reason = adapters.get(api).supports(release, spec)
            if ok:
                saving.append(api)
            else:  # the API is newer than the release (or the model has no graph): nothing to train for
                _write_unsupported(spec, release, api, finals[api], reason, env, saved_by)
                rows.append(_row(name, api, "unsupported", finals[api], reason=reason))
        apis = saving
        if not apis:
            log("%s: not trained on %s: no requested API saves it there" % (name, release))
            continue
        log("%s: training (model %d of %d)" % (name, n + 1, len(models)))  # the live progress line shows it
        try:
            trained = train(spec, release, seed=seed, epochs=epochs)
        except Exception as e:  # recorded for every API of the model; the other models go on
            err = "%s: %s" % (type(e).__name__, e)
            rows.extend(_row(name, api, "failed", finals[api], error=err, tb=traceback.format_exc()) for api in apis)
            log("%s: training failed: %s" % (name, err))
            continue
        histories[name] = trained.history
        trained.architecture = _architecture(spec, release)
        log(
            "%s: trained %d epochs in %.1fs, held-out accuracy %.3f (chance %.3f)"
            % (
                name,
                trained.summary["epochs"],
                trained.summary["seconds"],
                trained.summary["heldout_accuracy"],
                trained.summary["chance_accuracy"],
            )
        )
        for api in apis:
            rows.append(_save_one(spec, release, api, trained, finals[api], env, log, saved_by))
    return rows, histories


def _row(model, api, status, path, reason=None, error=None, tb=None, **extra):
    row = {
        "model": model,
        "api": api,
        "status": status,
        "path": path,
        "reason": reason,
        "error": error,
        "traceback": tb,
    }
    row.update(extra)
    return row


def _builds_pinned(spec, release, pin):
    """``(True, None)`` when ``release`` builds the architecture ``pin`` names for ``spec``, else why not."""
    arch = _architecture(spec, release)
    built = architecture.model_version(arch) if arch is not None else "none (no graph)"
    if built.startswith(pin):
        return True, None
    return False, "the run pins %s's architecture %s; MXNet %s builds %s" % (spec.name, pin, release, built)


def _architecture(spec, release):
    """The architecture this release built for ``spec`` (its description), or None for a model without a graph."""
    try:
        return architecture.describe_zoo(spec.name, release, spec.variant(release))
    except Exception:  # noqa: BLE001 - a plain gluon Block (the LSTM before 1.3) has no graph to fingerprint
        return None


def _base_manifest(spec, release, api, env, saved_by=None):
    manifest = {
        "schema": artifacts.SCHEMA,
        "release": release,
        "model": spec.name,
        "model_version": spec.version,
        "api": api,
        "description": spec.description,
        "saved_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "fingerprint": env,
    }
    if saved_by:
        manifest["saved_by"] = saved_by
    return manifest


def _write_unsupported(spec, release, api, final, reason, env, saved_by=None):
    tmp = artifacts.staging_dir(final)
    manifest = _base_manifest(spec, release, api, env, saved_by)
    manifest.update({"status": "unsupported", "reason": reason, "files": {}})
    artifacts.write_json_atomic(os.path.join(tmp, artifacts.MANIFEST), manifest)
    artifacts.commit_dir(tmp, final)


def _save_one(spec, release, api, trained, final, env, log, saved_by=None):
    """Save ``trained`` with ``api`` (which this release has: train_and_save checked) into ``final``; its row."""
    adapter = adapters.get(api)
    tmp = artifacts.staging_dir(final)
    started = time.time()
    try:
        input_specs = spec.input_specs(release)
        xh, _ = trained.heldout
        ref_cases = cases.reference_cases(input_specs, {input_specs[0].name: xh})
        # predicting first also gives a hybridized block the cached graph export needs
        memory = _once(trained, "memory", lambda: dict((c, trained.predict(x)) for c, x in ref_cases.items()))
        load_info = adapter.save(trained, tmp)
        manifest = _base_manifest(spec, release, api, env, saved_by)
        manifest.update(
            {
                "status": "saved",
                "inputs": [i.to_dict() for i in input_specs],
                "load": dict((k, v) for k, v in load_info.items() if k != "files"),
                "param_version": _once(
                    trained, "param_version", lambda: artifacts.param_version(trained.param_arrays())
                ),
                "training": trained.summary,
                "variant": spec.variant(release),
            }
        )
        # the reference is what loading the artifact gives in the saving release itself
        predictor = adapter.load(spec, release, tmp, manifest)
        outputs = dict((c, predictor(inputs)) for c, inputs in ref_cases.items())
        artifacts.save_reference(os.path.join(tmp, artifacts.REFERENCE), ref_cases, outputs, memory)
        arch = getattr(trained, "architecture", None)
        if arch is not None:  # the model version is the architecture built, the param version the weights
            artifacts.write_json_atomic(os.path.join(tmp, architecture.FILE), arch)
            manifest["model_version"] = architecture.model_version(arch)
            manifest["architecture"] = {"file": architecture.FILE, "code_version": spec.version}
        manifest["internals"] = internals.record(adapter, spec, release, tmp, manifest, ref_cases["batch"])
        manifest["parameters"] = _once(trained, "parameters", lambda: _param_table(trained.param_arrays()))
        manifest["reference"] = {
            "file": artifacts.REFERENCE,
            "cases": dict(
                (
                    c,
                    {
                        "note": cases.CASE_NOTES[c],
                        "outputs": [{"shape": list(o.shape), "dtype": str(o.dtype)} for o in outputs[c]],
                    },
                )
                for c in ref_cases
            ),
            "roundtrip_max_abs_error": _max_abs(outputs, memory),
        }
        extra = [internals.INTERNALS] if "file" in manifest["internals"] else []
        extra += [architecture.FILE] if arch is not None else []
        manifest["files"] = artifacts.hash_files(tmp, load_info["files"] + [artifacts.REFERENCE] + extra)
        manifest["save_seconds"] = round(time.time() - started, 3)
        artifacts.write_json_atomic(os.path.join(tmp, artifacts.MANIFEST), manifest)
        store = os.path.dirname(os.path.dirname(os.path.dirname(final)))
        archive = artifacts.archive_dir(store, release, spec.name, api)
        artifacts.commit_dir(tmp, final, archive=archive)
    except Exception as e:
        shutil.rmtree(tmp, ignore_errors=True)
        err = "%s: %s" % (type(e).__name__, e)
        log("%s/%s: save failed: %s" % (spec.name, api, err))
        return _row(spec.name, api, "failed", final, error=err, tb=traceback.format_exc())
    return _row(
        spec.name,
        api,
        "saved",
        final,
        files=sorted(manifest["files"]),
        heldout_accuracy=trained.summary["heldout_accuracy"],
        param_version=manifest["param_version"],
        roundtrip=manifest["reference"]["roundtrip_max_abs_error"],
    )


def _once(trained, key, compute):
    """What every API's artifact of one trained model shares (the in-memory outputs, the weights' hash and
    table), computed for the first API only: the weights do not change between saves."""
    memo = trained.__dict__.setdefault("_shared", {})
    if key not in memo:
        memo[key] = compute()
    return memo[key]


def _param_table(arrays):
    """What was saved, per parameter: shape, dtype, a content hash and summary statistics.

    Lets a later release tell a renamed, reshaped or silently re-initialized parameter
    from the one that was trained, without the saving release's loader.
    """
    return dict((name, artifacts.param_stats(arrays[name])) for name in sorted(arrays))


def _max_abs(a, b):
    worst = 0.0
    for case in a:
        for x, y in zip(a[case], b[case]):
            worst = max(worst, float(np.max(np.abs(x.astype(np.float64) - y.astype(np.float64)))) if x.size else 0.0)
    return worst


def raise_on_failures(rows):
    failed = [r for r in rows if r["status"] == "failed"]
    if failed:
        by_error = {}  # one line per distinct error (a full disk fails every artifact alike), with where
        for r in failed:
            by_error.setdefault(r["error"], []).append(r)
        parts = []
        for error, rows_alike in by_error.items():
            where = os.path.dirname(os.path.dirname(rows_alike[0]["path"] or "")) or "?"
            cells = ", ".join("%s/%s" % (r["model"], r["api"]) for r in rows_alike)
            parts.append("%s (%s, in %s)" % (error, cells, where))
        raise TrainFailed(
            "%d artifact(s) failed to save: %s" % (len(failed), "; ".join(parts)),
            hint="the tracebacks are in the rows above; every other artifact was saved",
        )


def platform_line():
    return "MXNet %s, Python %s, numpy %s" % (mx.__version__, platform.python_version(), np.__version__)
