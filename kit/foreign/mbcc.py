"""Import the models MXNet's own nightly backwards-compatibility checker (MBCC) saved into a kit store."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from kit.common import artifacts
from kit.common.capabilities import APIS, GLUON2, MBCC_MODELS, has_api
from kit.common.errors import EnvBuildError, KitError, UsageError
from kit.common.names import SAFE_NAME, is_safe_relative
from kit.common.versions import at_least, parse_release, release_key, same_release
from kit.envs import releases
from kit.envs.manager import Env, EnvManager
from kit.home import KitHome

HELP = """Import the models MXNet's nightly backwards-compatibility checker saved (SOURCE: a folder or
s3://bucket/prefix) into a kit store, as artifacts any run reloads.

SOURCE holds what apache/mxnet tests/nightly/model_backwards_compatibility_check/ writes (its models/
folder, or the S3 bucket it uploads that folder to): <mx.__version__>/<model_name>/<model_name>-... with
module_checkpoint_api (-symbol.json, -0001.params), lenet_gluon_save_params_api (-params),
lenet_gluon_hybrid_export_api (-symbol.json, -0000.params) and lstm_gluon_save_parameters_api (-params),
each with its -data (test inputs) and -inference (the outputs the saving release computed).

Each model folder becomes an artifact of the saving release (the folder 1.7.0 is the release
1.7.0.post2): mbcc_mlp/module_checkpoint, mbcc_lenet/save_params, mbcc_lenet/export and
mbcc_lstm/save_parameters, with hashes, the -data/-inference arrays as its reference, and the kit's
re-implementation of the checker's model code to rebuild the parameter-file ones. The checker's files
are read in the saving release's environment where it is ready (which also reloads each artifact there
and compares it with the checker's outputs), else in the newest ready 1.x environment. The cells the
checker has no files for are written as unsupported, so that a run trains nothing over the imported
files. Then reload them like any model group:

\b
  mxcompat store import-mbcc ./models --store ./mbcc-store
  mxcompat store import-mbcc s3://bucket/mbcc-models --store ./mbcc-store
  mxcompat run --save 1.4.1,1.9.1 --load 1.9.1 --models mbcc --store ./mbcc-store

Every file or folder of SOURCE that is not imported is listed with the reason, never skipped silently.
"""

#: the top-level folder of the checker's bucket that holds no models (its inference script skips it too)
DATA_FOLDER = "mxnet-model-backwards-compatibility-data"
#: the kit release an MXNet 1.x checker layout needs at least to be read (0.11 cannot read 1.x NDArray files)
OLDEST_CONVERTER = "1.0.0"


@dataclass(frozen=True)
class CheckerModel:
    """One model folder the checker writes, and the kit artifact it becomes."""

    name: str  # the checker's model_name: its folder and the prefix of its files
    model: str  # the kit's zoo model (kit.kernel.models.mbcc_models)
    api: str  # the kit's save/load API
    graph: bool  # -symbol.json + -NNNN.params (True) or a bare -params file (False)
    epoch: int | None = None  # the checkpoint epoch the checker saves with
    batch_size: int | None = None  # the batches its inference predicts in (None: all samples at once)
    since: str = "1.0.0"  # the first MXNet version the checker saves this model in
    variant: dict = field(default_factory=dict)

    def roles(self) -> tuple[str, ...]:
        return ("symbol", "params", "data", "inference") if self.graph else ("params", "data", "inference")


#: model_name -> what it becomes, as model_backwards_compat_train.py (1.x) saves each
CHECKER_MODELS = {
    m.name: m
    for m in (
        # Module.save_checkpoint(prefix, 1): symbol + epoch 1; predicted through NDArrayIter(batch_size=10)
        CheckerModel("module_checkpoint_api", "mbcc_mlp", "module_checkpoint", True, epoch=1, batch_size=10),
        # Net (a gluon.Block).save_params(prefix-params): block-prefix-stripped names
        CheckerModel("lenet_gluon_save_params_api", "mbcc_lenet", "save_params", False, variant={"block": "Net"}),
        # HybridNet hybridized, export(prefix, epoch=0) (1.0: export(prefix), also epoch 0)
        CheckerModel(
            "lenet_gluon_hybrid_export_api", "mbcc_lenet", "export", True, epoch=0, variant={"block": "HybridNet"}
        ),
        # SimpleLSTMModel (a gluon.Block).save_parameters(prefix-params), from 1.2.1 on
        CheckerModel("lstm_gluon_save_parameters_api", "mbcc_lstm", "save_parameters", False, since="1.2.1"),
    )
}
assert {m.model for m in CHECKER_MODELS.values()} == set(MBCC_MODELS)


@dataclass
class _Model:
    """A checker model folder found in SOURCE: its files by role (source-relative paths)."""

    version: str
    checker: CheckerModel
    files: dict[str, str]


@dataclass
class _Layout:
    root: str  # source-relative folder holding the version folders ("" or "models")
    models: dict[str, list[_Model]]  # version -> model folders to import
    skipped: list[tuple[str, str]]
    problems: dict[tuple[str, str], str] = field(default_factory=dict)  # (version, model_name) -> why not imported


def _is_version(name: str) -> bool:
    try:
        parse_release(name)
    except ValueError:
        return False
    return name[:1].isdigit()


def release_for(version: str) -> str | None:
    """The kit's release whose ``mx.__version__`` is ``version`` (``1.7.0`` is 1.7.0.post2), None if no table
    release reports it."""
    found = []
    for name in releases.RELEASES:
        try:
            if same_release(name, version):
                found.append(name)
        except ValueError:
            continue
    return max(found, key=release_key) if found else None


def read_layout(paths: list[str]) -> _Layout:
    """What the checker's layout in ``paths`` (source-relative file paths, '/'-separated) holds, and what it does
    not; raises :class:`UsageError` when it is not the checker's layout at all."""
    tops = {p.split("/", 1)[0] for p in paths if "/" in p}
    root = ""
    if not any(_is_version(t) for t in tops) and "models" in tops:  # the checker's working folder, models/ inside
        root = "models"
    skipped: list[tuple[str, str]] = []
    by_folder: dict[tuple[str, str], list[str]] = {}
    unknown_versions: dict[str, tuple[int, str]] = {}
    for path in sorted(paths):
        rel = path[len(root) + 1 :] if root and path.startswith(root + "/") else (None if root else path)
        if rel is None:
            skipped.append((path, f"outside {root}/, the folder that holds the version folders"))
            continue
        parts = rel.split("/")
        if any(not SAFE_NAME.match(p) for p in parts):
            skipped.append((path, "a path component that is not a plain name (hidden, '..', or odd characters)"))
            continue
        if len(parts) == 1:
            skipped.append((path, "not in a <mx.__version__>/<model_name>/ folder"))
            continue
        version = parts[0]
        if version == DATA_FOLDER:
            unknown_versions[version] = (unknown_versions.get(version, (0, ""))[0] + 1, "the checker's data folder")
            continue
        if not _is_version(version):
            n = unknown_versions.get(version, (0, ""))[0] + 1
            unknown_versions[version] = (n, "not an MXNet version folder (<mx.__version__>/)")
            continue
        if len(parts) == 2:
            skipped.append((path, "a file directly in a version folder, not in a <model_name>/ folder"))
            continue
        if len(parts) > 3:
            skipped.append((path, "nested deeper than <mx.__version__>/<model_name>/<file>"))
            continue
        by_folder.setdefault((version, parts[1]), []).append(parts[2])
    for version, (n, why) in sorted(unknown_versions.items()):
        skipped.append((_join(root, version) + "/", f"{why} ({n} file(s))"))
    if not any(name in CHECKER_MODELS for _, name in by_folder):
        found = ", ".join(sorted({f"{v}/{n}/" for v, n in by_folder})[:6]) or "no <version>/<model>/ folders"
        raise UsageError(
            "not the layout of MXNet's backwards-compatibility checker: no <mx.__version__>/<model_name>/ folder "
            f"of a checker model (found: {found})",
            hint="SOURCE is the checker's models/ folder or its bucket, with folders such as "
            "1.9.1/lenet_gluon_save_params_api/; its models: " + ", ".join(CHECKER_MODELS),
        )
    models: dict[str, list[_Model]] = {}
    problems: dict[tuple[str, str], str] = {}
    for (version, name), files in sorted(by_folder.items()):
        folder = _join(root, version, name) + "/"
        checker = CHECKER_MODELS.get(name)
        if checker is None:
            skipped.append((folder, f"unknown checker model {name!r} (known: {', '.join(CHECKER_MODELS)})"))
            continue
        if parse_release(version)[0][0] >= 2:
            skipped.append(
                (
                    folder,
                    "a layout of the MXNet 2 checker (mx.npx.savez files, Block.save): import-mbcc reads the 1.x "
                    "checker's files",
                )
            )
            continue
        found, extra, problem = _model_files(checker, files)
        for f in extra:
            skipped.append((folder + f, f"not a file the checker writes for {name}"))
        if problem:
            skipped.append((folder, problem))
            problems[(version, name)] = problem
            continue
        models.setdefault(version, []).append(
            _Model(version, checker, {role: _join(root, version, name, f) for role, f in found.items()})
        )
    return _Layout(root, models, skipped, problems)


def _join(*parts: str) -> str:
    return "/".join(p for p in parts if p)


def _model_files(checker: CheckerModel, files: list[str]) -> tuple[dict[str, str], list[str], str | None]:
    """``(role -> file name, files the checker does not write, what is missing or None)`` of one model folder."""
    name, found, extra = checker.name, {}, []
    epochs = []
    for f in sorted(files):
        suffix = f[len(name) :] if f.startswith(name + "-") else None
        if suffix == "-data":
            found["data"] = f
        elif suffix == "-inference":
            found["inference"] = f
        elif checker.graph and suffix == "-symbol.json":
            found["symbol"] = f
        elif checker.graph and suffix and len(suffix) == 12 and suffix.endswith(".params") and suffix[1:5].isdigit():
            epochs.append((int(suffix[1:5]), f))
        elif not checker.graph and suffix == "-params":
            found["params"] = f
        else:
            extra.append(f)
    if epochs:
        chosen = [e for e in epochs if e[0] == checker.epoch] or (epochs if len(epochs) == 1 else [])
        if chosen:
            found["params"] = chosen[0][1]
        extra += [f for e, f in epochs if not chosen or f != chosen[0][1]]
    missing = [r for r in checker.roles() if r not in found]
    if missing:
        want = {
            "symbol": f"{name}-symbol.json",
            "params": f"{name}-{checker.epoch:04d}.params" if checker.graph else f"{name}-params",
            "data": f"{name}-data",
            "inference": f"{name}-inference",
        }
        return found, extra, "incomplete, not imported: no " + ", ".join(want[r] for r in missing)
    return found, extra, None


def _epoch_of(params_file: str) -> int:
    return int(params_file[-len("0000.params") : -len(".params")])


def converter_env(manager: EnvManager, release: str) -> Env:
    """The environment that reads ``release``'s checker files: its own when ready, else the newest ready 1.x."""
    try:
        env = manager.get(release)
        if env.state == "ready":
            return env
    except KitError:
        pass
    ready = []
    for env in manager.list():
        try:
            ok = at_least(env.name, OLDEST_CONVERTER) and not at_least(env.name, GLUON2)
        except ValueError:  # a custom name (rc-build): not in release order
            ok = False
        if ok and env.state == "ready":
            ready.append(env)
    if not ready:
        raise UsageError(
            f"no ready environment can read the checker's files of {release}: neither {release}'s own nor any "
            "MXNet 1.x one",
            hint=f"create one first: mxcompat env create {release}",
        )
    return max(ready, key=lambda e: release_key(e.name))


def _placeholder_reason(release: str, version: str, model: str, api: str, problems: dict) -> str:
    """Why the cell (model, api) of ``release`` has no artifact in the checker's layout."""
    ok, why = has_api(release, api)
    if not ok:
        return why
    makers = [m for m in CHECKER_MODELS.values() if m.model == model]
    saved = [m for m in makers if m.api == api]
    if not saved:
        how = " and ".join(f"{m.api} ({m.name})" for m in makers)
        return f"not in the MBCC checker's layout: the checker saves {model} with {how} only"
    checker = saved[0]
    problem = problems.get((version, checker.name))
    if problem:
        return f"the MBCC checker's {checker.name}/ of MXNet {version} was not imported: {problem}"
    if not at_least(version, checker.since):
        return f"the MBCC checker saves {checker.name} from MXNet {checker.since} on (this layout is {version})"
    return f"the MBCC layout of MXNet {version} has no {checker.name}/ folder"


def _open_target(store, home: KitHome, endpoint_url: str | None):
    from kit import store as stores

    if hasattr(store, "refs") and hasattr(store, "remote"):
        return store
    return stores.open_store(store, home=home, endpoint_url=endpoint_url)


def _source_files(source: str, home: KitHome, endpoint_url: str | None, tmp: Path) -> tuple[str, list[str], object]:
    """``(display name, source-relative file paths, fetch)``: ``fetch(rel)`` gives a local path of one file."""
    from kit import store as stores

    if "://" in source:
        opened = stores.open_store(source, home=home, endpoint_url=endpoint_url)
        if opened.remote:
            keys = list(opened.iter_blobs(""))

            def fetch(rel: str) -> str:
                if not is_safe_relative(rel):  # the layout skips such keys; never a path out of tmp
                    raise UsageError(f"refusing the bucket key {rel!r}: not a plain relative path")
                return str(opened.download_blob(rel, tmp))  # streamed, under the store's size cap

            return opened.url.rstrip("/"), keys, fetch
        source = str(opened.root)
    root = Path(source).expanduser()
    if not root.is_dir():
        raise UsageError(f"SOURCE {source!r} is not a folder", hint="a folder or s3://bucket/prefix")
    root = root.resolve()
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    return str(root), files, lambda rel: str(root / rel)


def import_mbcc(
    source: str,
    store=None,
    *,
    home: KitHome | None = None,
    endpoint_url: str | None = None,
    on_event: Callable[[str], None] = print,
) -> dict:
    """Import the models MXNet's nightly backwards-compatibility checker saved in SOURCE into a kit store.

    ``source``: a folder or ``s3://bucket/prefix`` holding ``<mx.__version__>/<model_name>/<model_name>-...``;
    ``store``: a location (folder, ``s3://``, None for the kit home's store) or an opened store. Returns
    ``{"imported": [(release, model, api)], "skipped": [(path, reason)], "unsupported": [(release, model,
    api, reason)], "roundtrips": {(release, model, api): {"release", "max_abs"} | {"error"} | {"unavailable"}},
    "store": url}``; ``on_event`` is told each imported artifact and each skipped path as it goes. Raises
    :class:`UsageError` when SOURCE is not the checker's layout, or no environment can read it (before any work).
    """
    from kit import store as stores

    home = home or KitHome()
    manager = EnvManager(home)
    target = _open_target(store, home, endpoint_url)
    local = target.working_copy(home)
    result: dict = {"imported": [], "skipped": [], "unsupported": [], "roundtrips": {}, "store": target.url}
    with tempfile.TemporaryDirectory(prefix="mxcompat-mbcc-") as tmp_name:
        tmp = Path(tmp_name)
        shown, paths, fetch = _source_files(str(source), home, endpoint_url, tmp / "source")
        layout = read_layout(paths)
        result["skipped"].extend(layout.skipped)
        plans = []
        for version, found in sorted(layout.models.items(), key=lambda kv: release_key(kv[0])):
            release = release_for(version)
            if release is None:
                for m in found:
                    folder = _join(layout.root, version, m.checker.name) + "/"
                    result["skipped"].append(
                        (folder, f"MXNet {version} is no release the kit knows ({', '.join(releases.known_names())})")
                    )
                continue
            plans.append((release, version, found, converter_env(manager, release)))
        if plans:
            local.root.mkdir(parents=True, exist_ok=True)
        if plans and target.remote:  # what the bucket holds of these releases is kept, as in a local store
            stores.pull(target, local, releases=[p[0] for p in plans], models=list(MBCC_MODELS))
        for release, version, found, env in plans:
            _import_release(release, version, found, layout.problems, env, local, shown, fetch, tmp, result, on_event)
    for path, reason in result["skipped"]:
        on_event(f"skipped {path}: {reason}")
    if result["imported"] or result["unsupported"]:
        if target.remote:
            touched = sorted({r for r, *_ in result["imported"] + result["unsupported"]})
            stores.push(local, target, releases=touched, models=list(MBCC_MODELS), versions=False)
        else:
            local.write_index()
    on_event(
        f"{len(result['imported'])} artifact(s) imported into {target.url}, {len(result['unsupported'])} cell(s) "
        f"written as unsupported, {len(result['skipped'])} path(s) skipped"
    )
    return result


def _import_release(release, version, found, problems, env, local, shown, fetch, tmp, result, on_event) -> None:
    """Stage, convert (one kernel process for the release) and commit the artifacts of one version folder.

    Every (mbcc model, API) cell of the release ends with a manifest: the imported artifact, one already in
    the store (an earlier import, or kit-trained: kept), or an ``unsupported`` one saying why there is none.
    """
    store = str(local.root)
    staged: dict[tuple[str, str], str] = {}
    jobs, placeholders = [], []
    try:
        for m in found:
            c = m.checker
            staged[(c.model, c.api)] = artifacts.staging_dir(artifacts.artifact_dir(store, release, c.model, c.api))
            files = {role: fetch(rel) for role, rel in m.files.items()}
            jobs.append(
                {
                    "mbcc_model": c.name,
                    "model": c.model,
                    "api": c.api,
                    "variant": c.variant,
                    "epoch": _epoch_of(files["params"]) if c.graph else None,
                    "batch_size": c.batch_size,
                    "files": files,
                    "folder": staged[(c.model, c.api)],
                    "source": f"{shown}/{_join(layout_folder(m))}/",
                }
            )
        for model in MBCC_MODELS:
            for api in APIS:
                final = artifacts.artifact_dir(store, release, model, api)
                if (model, api) in staged or os.path.isfile(os.path.join(final, artifacts.MANIFEST)):
                    continue  # imported now, or an artifact already there (an earlier import, kit-trained): kept
                staged[(model, api)] = artifacts.staging_dir(final)
                reason = _placeholder_reason(release, version, model, api, problems)
                placeholders.append({"model": model, "api": api, "folder": staged[(model, api)], "reason": reason})
        try:
            results = _convert(env, release, version, jobs, placeholders)
        except KitError as e:
            for job in jobs:
                result["skipped"].append((job["source"], f"not imported: {e.message}"))
            return
        for p in placeholders:
            _commit(staged.pop((p["model"], p["api"])), store, release, p["model"], p["api"])
            result["unsupported"].append((release, p["model"], p["api"], p["reason"]))
        for row, job in zip(results, jobs):
            key, cell = (job["model"], job["api"]), (release, job["model"], job["api"])
            if not row["ok"]:
                result["skipped"].append((job["source"], f"not imported (read in {env.name}): {row['error']}"))
                final = artifacts.artifact_dir(store, release, *key)
                if not os.path.isfile(os.path.join(final, artifacts.MANIFEST)):  # else: what was there is kept
                    _commit(staged.pop(key), store, release, *key)
                    result["unsupported"].append(cell + (row["reason"],))
                continue
            _commit(staged.pop(key), store, release, *key)
            result["imported"].append(cell)
            result["roundtrips"][cell] = row["roundtrip"]
            on_event(f"imported {'/'.join(cell)} from {job['source']} ({_roundtrip_text(row['roundtrip'])})")
    finally:
        for folder in staged.values():
            shutil.rmtree(folder, ignore_errors=True)


def layout_folder(m: _Model) -> str:
    """The source-relative folder of a checker model."""
    return m.files["data"].rsplit("/", 1)[0]


def _commit(folder: str, store: str, release: str, model: str, api: str) -> None:
    archive = artifacts.archive_dir(store, release, model, api)
    artifacts.commit_dir(folder, artifacts.artifact_dir(store, release, model, api), archive=archive)


def _roundtrip_text(info: dict | None) -> str:
    info = info or {}
    if "max_abs" in info:
        return f"reloaded in {info['release']}: max abs {info['max_abs']:.3g} against the checker's outputs"
    if "error" in info:
        return f"reloading it in the saving release failed: {info['error']}"
    return info.get("unavailable", "not reloaded")


def _convert(env: Env, release: str, version: str, jobs: list, placeholders: list) -> list[dict]:
    """Run ``kit.kernel.entry.mbcc_import`` on ``jobs`` and ``placeholders`` in ``env``: one result per job."""
    spec = {"release": release, "version": version, "converting": env.name, "jobs": jobs, "placeholders": placeholders}
    try:
        answer = env.run_main(
            "kit.kernel.entry.mbcc_import", spec, f"reading the checker's files of MXNet {version} in {env.name}"
        )
    except UsageError as e:  # the environment is not the one it should be
        hint = e.hint or f"check the environment: mxcompat env doctor {env.name}"
        raise EnvBuildError(e.message, hint=hint) from None
    return answer["results"]
