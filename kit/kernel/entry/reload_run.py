"""What reload.ipynb runs: load every artifact other releases saved, infer, diff, write one record each."""

import json
import os
import sys
import time
import traceback

from kit.common import artifacts, cell_selection, record_schema, run_layout, tolerance, verdicts
from kit.common.capabilities import (
    APIS,
    C_PREDICT_API,
    C_PREDICT_SOURCES,
    EXIT_APIS,
    EXIT_RUNTIMES,
    MODEL_GROUPS,
    ONNX_DIRECTION,
    ONNX_SOURCES,
    pins,
    split_pin,
)
from kit.common.errors import KitError
from kit.common.names import is_safe_name
from kit.common.versions import direction, sort_key
from kit.kernel.entry.train_run import check_kernel
from kit.kernel.models import zoo
from kit.kernel.runtime.fingerprint import fingerprint
from kit.kernel.saving import adapters, architecture
from kit.kernel.saving.measure import InferenceFailed, measure


def _dirs(path):
    """The folders in ``path`` whose names are plain names (hidden ones and odd names are not artifacts)."""
    return sorted(n for n in os.listdir(path) if is_safe_name(n) and os.path.isdir(os.path.join(path, n)))


def find_artifacts(store, saved_with=None, models=None, apis=None, versions="current"):
    """Artifact folders ``(release, model, api, path, archived)`` in ``store``, filtered, sorted by release.

    ``archived`` is None for a current artifact; with ``versions="all"`` the replaced versions kept under
    ``.versions/`` come too, each with its identity (``<model_version>-<param_version>``).
    """
    found = []
    roots = [(store, False)] + ([(os.path.join(store, artifacts.VERSIONS), True)] if versions == "all" else [])
    for root, archive in roots:
        if not os.path.isdir(root):
            continue
        for release in _dirs(root):
            if saved_with and release not in saved_with:
                continue
            for model in _dirs(os.path.join(root, release)):
                if models and model not in models:
                    continue
                if not archive:  # what a commit that crashed halfway hid is found again
                    artifacts.recover(os.path.join(root, release, model))
                for api in _dirs(os.path.join(root, release, model)):
                    if apis and api not in apis:
                        continue
                    path = os.path.join(root, release, model, api)
                    if not archive:
                        found.append((release, model, api, path, None))
                        continue
                    for ident in _dirs(path):
                        found.append((release, model, api, os.path.join(path, ident), ident))
    return sorted(found, key=lambda t: (sort_key(t[0]), t[1], t[2], t[4] or ""))


def c_predict_cells(found, apis=None):
    """The C predict API's cells of ``found``: one per saved (release, model, version), on its Module checkpoint
    when that was saved, else its export (the files C++ predictors load)."""
    if apis and C_PREDICT_API not in apis and not any(a in apis for a in C_PREDICT_SOURCES):
        return []
    return derived_cells(found, C_PREDICT_API, C_PREDICT_SOURCES)


def exit_cells(found, apis=None):
    """The exits' cells of ``found`` (``apis`` names ``onnx``, ``openvino``, ``torch``): per exit one per saved
    (release, model, version), on its export when that was saved, else its Module checkpoint (or a check-model
    checkpoint)."""
    return [cell for api in EXIT_APIS if apis and api in apis for cell in derived_cells(found, api, ONNX_SOURCES)]


def derived_cells(found, derived_api, sources_in_order):
    """Cells of a load path that reads other APIs' artifacts: one per saved (release, model, version), on the
    first of ``sources_in_order`` that was saved."""
    sources = {}
    for saved, model, api, path, archived in found:
        if api not in sources_in_order:
            continue
        try:
            status = artifacts.read_json(os.path.join(path, artifacts.MANIFEST)).get("status")
        except (IOError, OSError, ValueError):
            status = None
        rank = (status != "saved", sources_in_order.index(api))
        key = (saved, model, archived)
        if key not in sources or rank < sources[key][0]:
            sources[key] = (rank, path)
    return [(s, m, derived_api, path, a) for (s, m, a), (_, path) in sorted(sources.items(), key=lambda kv: kv[0][:2])]


def _excerpt(tb, lines=12):
    return "\n".join(tb.strip().splitlines()[-lines:])


def check_artifact(loaded, saved, model, api, path, overrides=None, phase=None, archived=None, pin=None):
    """Load one artifact in this kernel's release and compare it with its reference: the record.

    ``phase(name)`` is told when loading and inference start, so that a kernel that
    dies on this artifact can be told apart by the host. The artifact's shared lock is held
    throughout: a run replacing it (``--retrain``) waits, so the record names the version it read.
    """
    with artifacts.locked(path, exclusive=False):
        return _check_artifact(loaded, saved, model, api, path, overrides, phase, archived, pin)


def _check_artifact(loaded, saved, model, api, path, overrides, phase, archived, pin):
    phase = phase or (lambda name, record=None: None)
    rec = record_schema.new_record(saved, model, api, loaded, path, archived)
    if api == C_PREDICT_API or api in EXIT_APIS:  # the artifact it loads: <store>/<release>/<model>/<api>[/<id>]
        rec["source_api"] = os.path.basename(os.path.dirname(path) if archived else path)
    if api in EXIT_APIS:
        rec["direction"] = ONNX_DIRECTION
    try:
        manifest = artifacts.read_json(os.path.join(path, artifacts.MANIFEST))
    except (IOError, OSError, ValueError) as e:
        return _fail(rec, verdicts.CORRUPT, "manifest.json is missing or not JSON: %s" % e, e)
    if not isinstance(manifest, dict):
        return _fail(rec, verdicts.CORRUPT, "manifest.json is not a JSON object")
    rec.update(
        {
            "model_version": manifest.get("model_version"),
            "param_version": manifest.get("param_version"),
            "saved_fingerprint": manifest.get("fingerprint"),
        }
    )
    if pin and not str(manifest.get("model_version")).startswith(pin):
        rec.update(
            verdict=verdicts.UNSUPPORTED,
            reason="the run pins %s's architecture %s; this artifact's is %s"
            % (model, pin, manifest.get("model_version")),
        )
        return rec
    if manifest.get("status") == "unsupported":
        rec.update(verdict=verdicts.UNSUPPORTED, reason="saving release: %s" % manifest.get("reason"))
        return rec
    if manifest.get("status") != "saved":
        return _fail(rec, verdicts.CORRUPT, "manifest status is %r, not 'saved'" % manifest.get("status"))
    refused = artifacts.name_problems(manifest)
    if refused:
        return _fail(rec, verdicts.CORRUPT, "manifest refused: %s (nothing was read)" % "; ".join(refused))
    bad = artifacts.verify(path, manifest)
    if bad:
        return _fail(rec, verdicts.CORRUPT, "sha256 mismatch or missing: %s (nothing was loaded)" % ", ".join(bad))
    oversized = artifacts.content_problems(path, manifest)
    if oversized:
        return _fail(rec, verdicts.CORRUPT, "%s (nothing was loaded)" % "; ".join(oversized))
    spec = zoo.MODELS.get(model)
    adapter = adapters.ADAPTERS.get(api)
    if adapter is None or (spec is None and not manifest.get("foreign")):
        return _fail(rec, verdicts.UNSUPPORTED, "this kit does not know model %r / API %r" % (model, api))
    path_name, reason = adapter.load_support(loaded, spec)
    if path_name is None:
        rec.update(verdict=verdicts.UNSUPPORTED, reason="loading release: %s" % reason)
        if spec is not None and _remedies().applies(loaded, saved, api, rec):  # an API the release removed
            reference = _reference(rec, path)
            if reference is None:
                return rec
            return _with_remedy(rec, spec, adapter, loaded, saved, api, path, manifest, reference, overrides, phase)
        return rec
    rec["load_path"] = path_name
    if adapter.rebuilds_model:  # the artifact holds weights only: this release's model code rebuilds the network
        for ok, reason in (spec.supported(loaded, manifest.get("variant")), adapter.supports(loaded, spec)):
            if not ok:
                rec.update(verdict=verdicts.UNSUPPORTED, reason="loading release: %s" % reason)
                return rec
        rec["model_code_change"] = model_code_change(loaded, model, path, manifest)
    reference = _reference(rec, path)
    if reference is None:
        return rec
    started = time.time()
    phase("load")
    try:
        predictor = adapter.load(spec, loaded, path, manifest)
    except Exception as e:
        rec["load_seconds"] = round(time.time() - started, 4)
        _fail(rec, verdicts.LOAD_ERROR, None, e, traceback.format_exc())
        return _with_remedy(rec, spec, adapter, loaded, saved, api, path, manifest, reference, overrides, phase)
    rec["load_seconds"] = round(time.time() - started, 4)
    rec["load_path"], rec["load_attempts"] = predictor.path or path_name, predictor.attempts
    rec.update(getattr(predictor, "details", None) or {})  # what else the load path made (an ONNX file)
    started = time.time()
    phase("infer")
    try:
        result = measure(spec, model, reference, predictor, overrides)
    except InferenceFailed as e:
        rec["infer_seconds"] = round(time.time() - started, 4)
        _fail(rec, verdicts.INFER_ERROR, "case %r: " % e.case, e.cause, e.tb)
        return _with_remedy(rec, spec, adapter, loaded, saved, api, path, manifest, reference, overrides, phase)
    rec["infer_seconds"] = round(time.time() - started, 4)
    rec["cases"] = result["cases"]
    rec["verdict"], rec["reason"], rec["summary"] = result["verdict"], result["reason"], result["summary"]
    if rec["verdict"] == verdicts.MISMATCH and not rec["cases"]:
        return rec
    if api in EXIT_APIS and rec["verdict"] in (verdicts.DRIFT, verdicts.MISMATCH):  # a file that runs, wrong
        return _with_remedy(rec, spec, adapter, loaded, saved, api, path, manifest, reference, overrides, phase)
    if spec is not None and spec.fused_front and api in SPLIT_APIS:  # transforms or network: which one moved
        from kit.kernel.saving import split_front

        phase("network_only")
        rec["network_only"] = split_front.check_network_only(
            spec, loaded, path, manifest, adapter, reference, overrides
        )
    change = rec.get("model_code_change")
    if change:  # the loading release's model code builds another architecture: that explains the outputs
        why = "model code changed between releases (%s)" % "; ".join(change["diff"][:3])
        rec["reason"] = why + (": " + rec["reason"] if rec["reason"] else "")
    return rec


def _reference(rec, path):
    """The artifact's reference cases; None (``rec`` then says corrupt) when reference.npz does not load."""
    try:
        return artifacts.load_reference(os.path.join(path, artifacts.REFERENCE))
    except Exception as e:
        _fail(rec, verdicts.CORRUPT, "reference.npz does not load: %s" % e, e)
        return None


def _with_remedy(rec, spec, adapter, loaded, saved, api, path, manifest, reference, overrides, phase):
    """``rec`` with its ``remedy``: every remedy that applies, tried and measured (the verdict stays)."""
    phase("remedy", rec)
    rec["remedy"] = _remedies().retry(
        spec,
        adapter,
        loaded,
        saved,
        api,
        path,
        manifest,
        rec,
        lambda predictor: measure(spec, rec["model"], reference, predictor, overrides),
    )
    if api in EXIT_APIS and not (rec.get("onnx") or {}).get("runtime"):  # the export failed: the runtime's still said
        rec["onnx"] = dict(rec.get("onnx") or {}, runtime=_exit_runtime(api))
    return rec


def _exit_runtime(api):
    """The exit's runtime with its versions, as its worker greets (None where it does not start)."""
    from kit.kernel.exits import runtime_client

    try:
        return runtime_client.version(EXIT_RUNTIMES[api])
    except runtime_client.RuntimeUnavailable:
        return None


def _remedies():
    from kit.kernel.remedies import attempts  # imported on the first failure: a clean run never pays for it

    return attempts


#: the APIs whose end-to-end artifacts are also checked with the network alone (they carry the graph)
SPLIT_APIS = ("export", "module_checkpoint")

_BUILT = {}  # (model, variant) -> the architecture this kernel's release builds, described once per kernel


def model_code_change(loaded, model, path, manifest):
    """How the architecture this release's model code builds differs from the one the artifact was saved
    from: ``{"saved_with", "loaded_with", "diff"}`` (fingerprints and a structural diff), or None when they
    are the same or either is unknown (an artifact saved before architectures were recorded)."""
    info = manifest.get("architecture") or {}
    if "file" not in info:
        return None
    try:
        saved = artifacts.read_json(os.path.join(path, info["file"]))
        key = (model, json.dumps([manifest.get("variant"), manifest.get("inputs")], sort_keys=True))
        if key not in _BUILT:
            # the artifact's own variant and inputs, as this release's model code builds them
            net = zoo.get(model).build(loaded, manifest.get("variant"))
            _BUILT[key] = architecture.describe(net, manifest["inputs"], loaded)
        built = _BUILT[key]
    except Exception:  # noqa: BLE001 - no graph to compare here; the verdict still stands on the outputs
        return None
    before, now = architecture.model_version(saved), architecture.model_version(built)
    if before == now:
        return None
    return {"saved_with": before, "loaded_with": now, "diff": architecture.diff(saved, built)}


class InFlight(object):
    """A marker naming the artifact a kernel is working on, removed once its record is written.

    If the kernel dies (a signal, an abort in native code), the marker survives and the
    host records that artifact as ``load-error``/``infer-error`` with "kernel died".
    """

    def __init__(self, run_dir, release, saved, model, api, path, archived=None, apis=None):
        self.path = run_layout.inflight_path(run_dir, release, apis)
        self.info = {
            "saved_with": saved,
            "model": model,
            "api": api,
            "loaded_with": release,
            "artifact": path,
            "archived": archived,
            "phase": "start",
            "started_at": time.time(),  # the host's watchdog stops a cell that runs past its time
        }

    def phase(self, name, record=None):
        """Enter phase ``name``; ``record``, the cell's record so far (kept if the kernel dies from here on)."""
        self.info["phase"] = name
        if record is not None:
            self.info["record"] = record
        artifacts.write_json_atomic(self.path, self.info, durable=False)  # the kernel dying leaves it in place
        _fault_injection(self.info)

    def __enter__(self):
        self.phase("start")
        return self

    def __exit__(self, *exc):
        if exc[0] is None:
            os.remove(self.path)
        return False


def _fault_injection(info):
    """``MXCOMPAT_FAULT=kill:MODEL/API:PHASE`` (or ``abort:``) kills this kernel at that point, ``hang:`` makes it
    wait forever there: the reliability tests use them to prove a dead or hung kernel loses nothing. Unset, it
    does nothing."""
    spec = os.environ.get("MXCOMPAT_FAULT")
    if not spec:
        return
    how, _, where = spec.partition(":")
    cell, _, phase = where.partition(":")
    if cell == "%s/%s" % (info["model"], info["api"]) and phase == info["phase"]:
        if how == "abort":
            os.abort()
        if how == "hang":
            while True:
                time.sleep(3600)
        import signal

        os.kill(os.getpid(), signal.SIGKILL)


def _fail(rec, verdict, reason, exc=None, tb=None):
    rec["verdict"] = verdict
    if exc is not None:
        rec["error_type"] = type(exc).__name__
        rec["error"] = str(exc)
        rec["reason"] = (reason or "") + "%s: %s" % (type(exc).__name__, verdicts.headline(exc))
    else:
        rec["reason"] = reason
    if tb:
        rec["traceback"] = _excerpt(tb)
    return rec


def reload_all(
    release,
    store,
    run_dir,
    saved_with=None,
    models=None,
    apis=None,
    tolerance_overrides=None,
    forward=False,
    log=None,
    skip_recorded=False,
    versions="current",
    cells=None,
    exit_runtimes=None,
):
    """Check every matching artifact in ``store`` on this kernel's release; one record file each.

    Backward and same-release artifacts always; forward ones (saved by newer
    releases) only when ``forward``. Raises when nothing matched: a check that
    compared nothing must never look like a pass. ``skip_recorded`` keeps the records
    already written (a restart after the kernel died on an artifact). ``versions="all"`` also checks
    every replaced version kept under ``.versions/``, each a cell of its own. ``cells`` (``MODEL:API``
    patterns) narrows the (model, API) pairs checked. ``exit_runtimes``, ``{exit: Python}``: the Python of each
    exit's runtime environment (``onnx``: ONNX Runtime's) for its cells (their files go to ``<run_dir>/onnx/``).
    """
    check_kernel(release)
    tolerance.validate(tolerance_overrides)
    log = log or (lambda msg: sys.stdout.write(msg + "\n"))
    pinned = pins(models)
    if models:  # groups (core, vision, all) stand for their models; other names may be checkpoints in the store
        models = [split_pin(m)[0] for name in models for m in MODEL_GROUPS.get(name, (name,))]
    wanted = list(apis or [])
    stored = [a for a in wanted if a != C_PREDICT_API and a not in EXIT_APIS]
    derivations = ((C_PREDICT_API, C_PREDICT_SOURCES),) + tuple((api, ONNX_SOURCES) for api in EXIT_APIS)
    for derived_api, sources in derivations:
        if derived_api in wanted:  # its cells come from the artifacts it loads
            stored += [a for a in sources if a not in stored]
    if set(wanted) & set(EXIT_APIS):
        from kit.kernel.exits import onnx_export, runtime_client

        for api in EXIT_APIS:
            runtime_client.configure(EXIT_RUNTIMES[api], (exit_runtimes or {}).get(api))
        onnx_export.configure(os.path.join(run_dir, "onnx"))
    found = find_artifacts(store, saved_with, models, stored or None, versions)
    derived = c_predict_cells(found, apis) + exit_cells(found, apis)
    found = [f for f in found if not wanted or f[2] in wanted]
    found = [f for f in found + derived if cell_selection.matches(cells, f[1], f[2])]
    found = sorted(found, key=lambda t: (sort_key(t[0]), t[1], t[2], t[4] or ""))
    in_store = set(a[1] for a in found)  # checkpoints the kit did not train are models too
    for name, value, known in (
        ("models", models, set(zoo.MODELS) | in_store),
        ("apis", apis, set(APIS) | set(adapters.ADAPTERS)),
    ):
        unknown = [v for v in (value or []) if v not in known]
        if unknown:
            raise KitError("unknown %s: %s" % (name, ", ".join(unknown)), hint="known: " + ", ".join(sorted(known)))
    todo = [a for a in found if forward or direction(a[0], release) != "forward"]
    if not todo:
        raise KitError(
            "no artifacts to check in %s (saved_with=%s, models=%s, apis=%s, cells=%s, forward=%s)"
            % (store, saved_with or "all", models or "all", apis or "all", cells or "all", forward),
            hint="run train.ipynb for the saving releases first, or widen the filters",
        )
    os.makedirs(run_layout.records_dir(run_dir), exist_ok=True)
    env = fingerprint(release)
    records = []
    for i, (saved, model, api, path, archived) in enumerate(todo):
        record_path = run_layout.record_path(run_dir, saved, model, api, release, archived)
        if skip_recorded and os.path.exists(record_path):
            records.append(artifacts.read_json(record_path))
            continue
        started = time.time()
        with InFlight(run_dir, release, saved, model, api, path, archived, wanted) as inflight:
            rec = check_artifact(
                release, saved, model, api, path, tolerance_overrides, inflight.phase, archived, pinned.get(model)
            )
        rec["loaded_fingerprint"] = env
        rec["seconds"] = round(time.time() - started, 4)
        rec["checked_at"] = record_schema.now()
        if rec["direction"] == "same":
            rec["noise_floor"] = True
            rec["nondeterministic"] = rec["verdict"] not in (verdicts.IDENTICAL, verdicts.UNSUPPORTED)
        artifacts.write_json_atomic(record_path, rec)
        records.append(rec)
        log(
            "[%d/%d] %s %s/%s -> %s: %s%s"
            % (
                i + 1,
                len(todo),
                saved + ("@" + archived if archived else ""),
                model,
                api,
                release,
                rec["verdict"],
                (" (%s)" % rec["reason"]) if rec["reason"] else "",
            )
        )
    return records


def table_rows(records):
    """Flat rows for the verdict table."""
    return [record_schema.flat_row(r) for r in records]


verdict_counts = record_schema.verdict_counts
