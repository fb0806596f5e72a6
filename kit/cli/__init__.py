"""The ``mxcompat`` command line: a thin click group over the library.

Exit codes: 0 compatible / healthy, 1 regressions found, 2 usage error, 3 the run
or an environment itself broke.
"""

from __future__ import annotations

import functools
import json
import os
import sys

import click

from kit.envs import kernelspecs
from kit.envs import releases
from kit.execute.executors import EXECUTORS
from kit.foreign.mbcc import HELP as MBCC_HELP
from kit.envs.selection import HELP as SELECTION_HELP
from kit.envs.manager import EnvManager
from kit.common.errors import KitError, UsageError
from kit.home import KitHome
from kit.cli.tables import format_table, human_size


def handle_errors(fn):
    """Turn a KitError into its message on stderr and its exit code."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except KitError as e:
            click.secho(f"error: {e}", fg="red", err=True)
            sys.exit(e.exit_code)

    return wrapper


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="mxnet-compat-kit")
def main():
    """Prove whether models saved with older MXNet releases still load and infer the same on newer ones.

    Each MXNet release lives in its own virtualenv, registered as Jupyter kernel
    mxnet-<release> in the kit's home (.kit/ at the repository root, or $MXCOMPAT_HOME).
    """


@main.group()
def env():
    """Create, list, verify and remove the per-release environments."""


@env.command("create")
@click.argument("versions", nargs=-1)
@click.option("--all", "all_", is_flag=True, help="Every release in the table.")
@click.option(
    "--allow-fallback",
    is_flag=True,
    help="When a release's own Python is missing, use the documented --no-deps build on the host Python "
    "(marked as a fallback wherever the env is shown or recorded).",
)
@click.option("--python", "python", metavar="PATH", help="The interpreter to build with, instead of discovery.")
@click.option(
    "--jobs", "-j", default=2, show_default=True, type=click.IntRange(1, 16), help="Environments built at once."
)
@click.option("--force", is_flag=True, help="Rebuild even if the environment is ready.")
@click.option("--name", metavar="NAME", help="Name of a custom release (a release candidate or a local build).")
@click.option("--wheel", metavar="PATH", help="Custom release: a local MXNet wheel.")
@click.option("--spec", metavar="REQ", help="Custom release: any pip requirement, e.g. 'mxnet==1.9.1'.")
@click.option("--python-version", default="3.11", show_default=True, help="Custom release: the Python it needs.")
@click.option(
    "--pin",
    multiple=True,
    metavar="REQ",
    help="Custom release: extra requirement, repeatable (default pin: numpy<1.24).",
)
@click.option("--expect-version", metavar="V", help="Custom release: the mx.__version__ it must report.")
@handle_errors
def env_create(
    versions, all_, allow_fallback, python, jobs, force, name, wheel, spec, python_version, pin, expect_version
):
    """Create environments for VERSIONS (e.g. 1.0.0.post4 1.4.1 1.9.1), or a custom release.

    Creation is idempotent (a ready environment is kept), safe to interrupt (a
    half-built one is never reported healthy and is rebuilt next time) and runs
    several builds in parallel. Examples:

    \b
      mxcompat env create 1.0.0.post4 1.4.1 1.9.1
      mxcompat env create --all --allow-fallback
      mxcompat env create --name 1.9.2rc0 --wheel ./mxnet-1.9.2rc0-py3-none-linux_x86_64.whl
    """
    manager = EnvManager()
    custom = name or wheel or spec
    if custom:
        if versions or all_:
            raise UsageError("give either release names or a custom release (--name with --wheel/--spec), not both")
        if not name:
            raise UsageError("a custom release needs --name NAME")
        wanted = [
            releases.custom_release(
                name, python=python_version, wheel=wheel, spec=spec, pins=pin, expected_version=expect_version
            )
        ]
    else:
        if all_:
            versions = tuple(releases.known_names())
        if not versions:
            raise UsageError(
                "name at least one release, or --all", hint="known releases: " + ", ".join(releases.known_names())
            )
        wanted = [releases.get(v) for v in dict.fromkeys(versions)]
    plans = [manager.plan(r, allow_fallback=allow_fallback, python=python) for r in wanted]
    for p in plans:
        how = " (fallback: --no-deps on the host Python)" if p.fallback else ""
        click.echo(
            f"{p.name}: Python {'.'.join(map(str, p.interpreter.version))} "
            f"from {p.interpreter.source} ({p.interpreter.path}){how}"
        )
    failed = []
    click.echo(f"building {len(plans)} environment(s), {jobs} at a time; logs in {manager.home.logs}")

    def done(result):
        done.count += 1
        click.echo(f"[{done.count}/{len(plans)}] {result.name}: {result.status} in {result.seconds:.1f}s")
        for note in result.notes:
            click.secho(f"  {note}", fg="yellow", err=True)
        if result.error is not None:
            failed.append(result)
            click.secho(f"  {result.error}", fg="red", err=True)

    done.count = 0

    manager.create(plans, jobs=jobs, force=force, on_done=done)
    if failed:
        raise KitError(f"{len(failed)} of {len(plans)} environments failed: " + ", ".join(r.name for r in failed))
    click.echo(f"kernels are in {manager.home.kernels}; `mxcompat env jupyter-path` prints JUPYTER_PATH")


@env.command("list")
@handle_errors
def env_list():
    """Show every environment: release, Python, numpy, matplotlib, pandas, kernel, size, health, fallback."""
    manager = EnvManager()
    rows = []
    for e in manager.list():
        rows.append(
            [
                e.name,
                e.info("mxnet", "-"),
                e.info("python", "-"),
                e.info("numpy", "-"),
                e.info("matplotlib") or "-",
                e.info("pandas") or "-",
                e.kernel_name,
                human_size(e.size_bytes()),
                e.state,
                "yes" if e.fallback else "no",
            ]
        )
    if not rows:
        click.echo(f"no environments in {manager.home.envs}; create some with `mxcompat env create 1.9.1`")
        return
    click.echo(
        format_table(
            ["release", "mxnet", "python", "numpy", "matplotlib", "pandas", "kernel", "size", "health", "fallback"],
            rows,
        )
    )


@env.command("remove")
@click.argument("names", nargs=-1)
@click.option("--all", "all_", is_flag=True, help="Remove every environment.")
@handle_errors
def env_remove(names, all_):
    """Remove environments and their kernels."""
    manager = EnvManager()
    if all_:
        names = [e.name for e in manager.list()]
    if not names:
        raise UsageError("name at least one environment, or --all")
    for n in names:
        manager.remove(n)
        click.echo(f"removed {n}")


@env.command("doctor")
@click.argument("names", nargs=-1)
@click.option("--jobs", "-j", default=2, show_default=True, type=click.IntRange(1, 16))
@handle_errors
def env_doctor(names, jobs):
    """Re-verify environments: kernel registered, mxnet imports at the expected version, a forward pass runs,
    matplotlib draws and pandas renders a table.

    Exits 3 when any environment is unhealthy.
    """
    from kit.execute import reaper

    manager = EnvManager()
    for line in reaper.end_strays(manager.home.root):  # what an earlier crash of this kit left running
        click.echo(line)
    healths = manager.doctor(list(names) or None, jobs=jobs)
    if not healths:
        click.echo("no environments to check")
        return
    rows = []
    for h in healths:
        fb = "yes" if manager.get(h.name).fallback else "no"
        probe = h.probe or {}
        rows.append(
            [
                h.name,
                probe.get("mxnet", "-"),
                probe.get("python", "-"),
                probe.get("numpy", "-"),
                probe.get("matplotlib") or "-",
                probe.get("pandas") or "-",
                fb,
                "healthy" if h.ok else "UNHEALTHY",
                "; ".join(h.problems),
            ]
        )
    click.echo(
        format_table(
            ["release", "mxnet", "python", "numpy", "matplotlib", "pandas", "fallback", "health", "problems"], rows
        )
    )
    if not all(h.ok for h in healths):
        sys.exit(3)


@env.command("jupyter-path")
@click.option("--export", "export", is_flag=True, help="Print a shell `export JUPYTER_PATH=...` line.")
def env_jupyter_path(export):
    """Print the JUPYTER_PATH under which every environment's kernel is visible."""
    value = kernelspecs.jupyter_path(KitHome())
    click.echo(f"export JUPYTER_PATH={value}" if export else value)


def _csv(value):
    return [v.strip() for v in (value or "").split(",") if v.strip()]


@main.command("run")
@click.option(
    "--save",
    "save",
    metavar="V,...",
    help="Releases whose artifacts are checked; each trains and saves them unless the store holds them all "
    "(no environment needed then). Without --save: every release the store holds. Takes " + SELECTION_HELP + ".",
)
@click.option("--load", "load", metavar="V,...", help="Releases that reload them (default: the --save releases).")
@click.option(
    "--models",
    metavar="M,...",
    help="Zoo models or groups: core (the default: small hand-written models), vision "
    "(ResNet-18 v1/v2, MobileNet v1/v2, SqueezeNet 1.1, DenseNet-121, VGG-11-BN, e2e ResNet-18 "
    "from gluon's model zoo; about 1 GB of artifacts per release), all (core and vision), mbcc "
    "(MXNet's own checker's models, see store import-mbcc). With --load alone: any model in the store. "
    "MODEL@ARCH pins a model to one architecture version (a prefix of its model_version).",
)
@click.option("--apis", metavar="A,...", help="Save/load APIs (default: all).")
@click.option(
    "--cells",
    metavar="MODEL:API,...",
    help="Only these (model, API) cells; globs on either side, a group name on the left, e.g. "
    "mlp:module_checkpoint,lenet:save_params,lenet:export,lstm:save_parameters (MXNet's own checker's "
    "four cases), lenet:*, *:export. Narrows --models and --apis; without --models any zoo model matches.",
)
@click.option("--forward", is_flag=True, help="Also load artifacts of newer releases in older ones (reported apart).")
@click.option(
    "--jobs", "-j", default=1, show_default=True, type=click.IntRange(1, 16), help="Steps (notebook runs) at once."
)
@click.option("--run-id", metavar="ID", help="Name of the run folder under runs/ (default: a timestamp).")
@click.option("--store", metavar="PATH", help="Artifact store (default: the kit home's store/).")
@click.option(
    "--tolerance",
    metavar="JSON|FILE",
    help='Tolerance overrides, e.g. \'{"float32": {"rtol": 1e-3}, "models": {"lstm": {"atol": 1e-4}}}\'.',
)
@click.option("--retrain", is_flag=True, help="Retrain and replace artifacts already in the store.")
@click.option(
    "--epochs",
    default=0,
    type=click.IntRange(0),
    metavar="N",
    help="Training epochs of every model that trains (0, the default: each model's own); "
    "fewer make a quicker, rougher baseline.",
)
@click.option(
    "--versions",
    type=click.Choice(["current", "all"]),
    default="current",
    show_default=True,
    help="all: also reload every replaced weights version the store keeps (.versions/), each a cell of its own.",
)
@click.option(
    "--allow-list",
    metavar="FILE",
    help="Known incompatibilities (YAML/JSON list of cell: MODEL/API/SAVED/LOADED glob, reason, expires).",
)
@click.option(
    "--resume", "resume_id", metavar="RUN-ID", help="Finish an interrupted run: redo only what did not finish."
)
@click.option("--runs-dir", metavar="PATH", help="Where run folders go (default: runs/ at the repository root).")
@click.option(
    "--executor",
    type=click.Choice(list(EXECUTORS)),
    default="local",
    show_default=True,
    help="Where steps run: a local process pool, or a Dask cluster (needs --scheduler and --store).",
)
@click.option(
    "--scheduler",
    metavar="ADDRESS",
    envvar="DASK_SCHEDULER_ADDRESS",
    help="The Dask scheduler for --executor dask, e.g. tcp://10.0.0.5:8786 (or DASK_SCHEDULER_ADDRESS).",
)
@handle_errors
def run_cmd(
    save,
    load,
    models,
    apis,
    cells,
    forward,
    jobs,
    run_id,
    store,
    tolerance,
    retrain,
    epochs,
    versions,
    allow_list,
    resume_id,
    runs_dir,
    executor,
    scheduler,
):
    """Run the matrix: train per --save release, reload per --load release, then the summary.

    Every executed notebook, record and report lands in runs/<run-id>/. Exit codes:
    0 every backward cell identical or close, 1 regressions found, 2 bad arguments
    (checked before any work starts), 3 a step itself broke.

    \b
      mxcompat run --save 1.0.0.post4,1.4.1,1.9.1
      mxcompat run --save 1.3.1..1.9.1 --load last:1
      mxcompat run --load 1.9.2rc0 --store s3://bucket/kit     (reload what the store holds)
      mxcompat run --save 1.4.1 --load 1.9.1,rc1 --models lenet,e2e --jobs 2
      mxcompat run --save all --cells 'lenet:*,*:module_checkpoint'
      mxcompat run --resume 20261202-101500
      mxcompat run --save 1.4.1,1.9.1 --executor dask --scheduler tcp://10.0.0.5:8786 --store s3://bucket/kit
    """
    from kit.orchestrate import matrix
    from kit.orchestrate import request
    from kit.envs import selection

    # how the steps run (matrix.Execution's options): the same for a new run and a resumed one
    execution = dict(
        jobs=jobs, runs_root=runs_dir, executor=executor, scheduler=scheduler, on_event=click.echo, progress_line=None
    )
    if resume_id:
        given = [
            f
            for f, v in (
                ("--save", save),
                ("--load", load),
                ("--run-id", run_id),
                ("--models", models),
                ("--apis", apis),
                ("--cells", cells),
            )
            if v
        ]
        if given:
            raise UsageError(f"--resume takes the run's own arguments; do not give {', '.join(given)}")
        outcome = matrix.resume(resume_id, **execution)
    else:
        manager = EnvManager(KitHome())
        saves = selection.expand(save, manager, flag="--save")
        loads = selection.expand(load, manager, flag="--load") or saves
        if not saves and not loads:
            raise UsageError(
                "--save needs at least one release", hint="or give only --load to reload what the store holds"
            )
        req = request.RunRequest(
            save=saves,
            load=loads,
            reload_only=not saves,
            models=_csv(models),
            apis=_csv(apis),
            cells=_csv(cells),
            forward=forward,
            tolerance=request.parse_tolerance(tolerance),
            retrain=retrain,
            epochs=epochs,
            versions=versions,
            allow_list=allow_list,
            store=store,
        )
        outcome = matrix.run_matrix(req, run_id=run_id, **execution)
    _report(outcome)


def _report(outcome):
    """Print a run's outcome, one line per incompatibility (signature), and exit with its code."""
    from kit.results.reports import skipped_line
    from kit.results.signatures import line

    for direction, counts in sorted(outcome.counts.items()):
        click.echo(f"{direction}: " + ", ".join(f"{v} {n}" for v, n in sorted(counts.items())))
    for group in outcome.groups:
        if group.failing:
            excused = f" ({group.allowed} allowed)" if group.allowed else ""
            click.secho(f"FAIL {line(group)}{excused}", fg="red")
        elif group.allowed:
            click.echo(f"allowed {line(group)}")
        else:
            click.echo(line(group))
    for line_ in outcome.expired:
        click.secho(f"EXPIRED {line_.lstrip('- ')}", fg="red")
    for step in outcome.failed_steps:
        click.secho(f"BROKEN step {step}: {outcome.causes.get(step, 'cause unknown')}", fg="red")
    for entry in outcome.skipped:
        click.secho(f"NOT CHECKED {skipped_line(entry)}", fg="yellow")
    click.echo(f"run folder: {outcome.run_dir}")
    for name in ("summary.html", "summary.md", "junit.xml", "records.csv"):
        if (outcome.run_dir / name).exists():
            click.echo(f"  {name}: {outcome.run_dir / name}")
    sys.exit(outcome.exit_code)


@main.command("check-model")
@click.argument("prefix")
@click.option("--epoch", default=0, show_default=True, type=click.IntRange(0), help="Picks PREFIX-NNNN.params.")
@click.option(
    "--input",
    "inputs",
    multiple=True,
    metavar="NAME:SHAPE[:DTYPE]",
    help="A graph input and its shape with the batch first, e.g. data:1,3,224,224 (repeatable).",
)
@click.option("--label-names", metavar="N,...", help="Label inputs of loss heads such as SoftmaxOutput.")
@click.option(
    "--saved-with",
    "--reference-version",
    "reference_version",
    required=True,
    metavar="RELEASE",
    help="The release whose outputs are the reference (--reference-version: the old name).",
)
@click.option(
    "--load",
    "load",
    required=True,
    metavar="V,...",
    help="Releases to reload the checkpoint in: " + SELECTION_HELP + ".",
)
@click.option("--name", metavar="NAME", help="Model name in the store and the records (default: PREFIX's name).")
@click.option("--data", metavar="FILE", help="Inputs from a .npy (first input) or .npz (by name) instead of generated.")
@click.option("--image", metavar="FILE", help="An image file as the input, decoded by MXNet, see --preprocess.")
@click.option(
    "--preprocess",
    metavar="SPEC",
    help="For --image: 'resize=224,224;mean=0.485,0.456,0.406;std=0.229,0.224,0.225;layout=NCHW'.",
)
@click.option("--seed", default=0, show_default=True, help="Seed of the generated inputs.")
@click.option("--store", metavar="PATH", help="Store to keep the checkpoint's reference in (default: the kit home's).")
@click.option("--run-id", metavar="ID")
@click.option("--runs-dir", metavar="PATH")
@click.option("--jobs", "-j", default=1, show_default=True, type=click.IntRange(1, 16))
@click.option("--tolerance", metavar="JSON|FILE")
@click.option("--allow-list", metavar="FILE")
@click.option("--forward", is_flag=True, help="Also reload in releases older than the reference.")
@handle_errors
def check_model_cmd(
    prefix,
    epoch,
    inputs,
    label_names,
    reference_version,
    load,
    name,
    data,
    image,
    preprocess,
    seed,
    store,
    run_id,
    runs_dir,
    jobs,
    tolerance,
    allow_list,
    forward,
):
    """Will this checkpoint give the same outputs on the releases I upgrade to?

    PREFIX-symbol.json + PREFIX-NNNN.params (a Module checkpoint or a Gluon export, any
    release, legacy formats included) gets reference outputs in --saved-with on
    deterministic inputs (or --data / --image), then the same run as `mxcompat run`:
    records, summary, bundles, exit codes.

    \b
      mxcompat check-model ./resnet --epoch 12 --input data:1,3,224,224 \\
          --label-names softmax_label --saved-with 1.4.1 --load 1.6.0,1.9.1
    """
    from kit.foreign import check_model
    from kit.orchestrate import matrix
    from kit.orchestrate import request
    from kit.envs import selection
    from kit.home import KitHome
    from kit.store import open_store

    home = KitHome()
    parsed = [check_model.parse_input(i) for i in inputs]
    loads = selection.expand(load, EnvManager(home), flag="--load")
    req = request.RunRequest(
        save=[reference_version],
        load=loads,
        models=[],
        apis=[check_model.API],
        forward=forward,
        tolerance=request.parse_tolerance(tolerance),
        allow_list=allow_list,
        store=store,
        foreign=True,
    )
    request.validate(req, EnvManager(home))
    if store and open_store(store).remote:
        raise UsageError(
            "check-model keeps its reference in a local store; push it afterwards with mxcompat store push"
        )
    manifest = check_model.prepare(
        prefix,
        epoch,
        name=name,
        reference=reference_version,
        inputs=parsed,
        label_names=_csv(label_names),
        store=open_store(store, home=home).root,
        home=home,
        data=data,
        image=image,
        preprocess=check_model.parse_preprocess(preprocess),
        seed=seed,
    )
    recorded = manifest.get("symbol_mxnet_version") or "unrecorded (a legacy symbol file)"
    click.echo(
        f"{manifest['model']}: symbol saved by MXNet {recorded}; reference computed in {reference_version} "
        f"({len(manifest['reference']['cases']['batch']['outputs'])} output(s), "
        f"param_version {manifest['param_version']})"
    )
    req.models = [manifest["model"]]
    outcome = matrix.run_matrix(
        req, run_id=run_id, jobs=jobs, runs_root=runs_dir, on_event=click.echo, home=home, progress_line=None
    )
    _report(outcome)


@main.command("investigate")
@click.argument("run_id")
@click.option("--cell", required=True, metavar="MODEL/API/SAVED/LOADED", help="The matrix cell to investigate.")
@click.option(
    "--recompute",
    is_flag=True,
    help="Compute the saving release's internals now, in its environment, instead of the recorded ones.",
)
@click.option("--runs-dir", metavar="PATH", help="Where run folders are (default: runs/).")
@handle_errors
def investigate_cmd(run_id, cell, recompute, runs_dir):
    """Where in the model a cell's difference starts: investigate.ipynb on the loading release's kernel.

    A cell that does not load or run: what failed and where, the remedies tried, and the layers compared
    under the one that works. Exit 0 when the investigation completes, whatever it finds.
    """
    from kit.results.cells import Cell
    from kit.debug.investigate import investigate_cell, report_lines

    out = investigate_cell(run_id, Cell.parse(cell), runs_root=runs_dir, recompute=recompute)
    for line in report_lines(json.loads(out["json"].read_text()), out["notebook"]):
        click.echo(line)


@main.command("convert")
@click.argument("run_id")
@click.option("--cell", required=True, metavar="MODEL/API/SAVED/LOADED", help="A failing cell with a verified remedy.")
@click.option("--remedy", metavar="NAME", help="Which verified remedy (default: the first that changes files).")
@click.option("--out", metavar="DIR", help="Where to write the converted artifact (default: RUN/converted/CELL/).")
@click.option("--runs-dir", metavar="PATH", help="Where run folders are (default: runs/).")
@handle_errors
def convert_cmd(run_id, cell, remedy, out, runs_dir):
    """Write a failing cell's artifact as its verified remedy makes it, then reload it natively in the
    loading release (no remedy) on the saving release's reference cases; record.json beside it says how
    close it came. Exit 0 when it loads natively identical or close, 1 otherwise.

    \b
      mxcompat convert RUN --cell lstm/save_parameters/1.9.1/2.0.0b1   # 2.0's rnn_param, a native 2.0 file
      mxcompat convert RUN --cell lenet/export/1.9.1/1.4.1             # the graph without 'layout'
    """
    from kit.results.cells import Cell
    from kit.debug.convert import convert_cell

    done = convert_cell(run_id, Cell.parse(cell), remedy=remedy, out=out, runs_root=runs_dir)
    rec = done["record"]
    max_abs = (rec.get("summary") or {}).get("max_abs")
    click.echo(f"converted {cell} with {done['remedy']}: {done['out']}")
    click.echo(
        f"reloaded natively in {rec['loaded_with']} via {rec.get('load_path')}: {rec['verdict']}"
        + (f", max abs {max_abs:.3g}" if max_abs is not None else "")
        + ("" if rec.get("native") else f" ({rec.get('reason')})")
    )
    click.echo(f"record: {done['out']}/record.json")
    sys.exit(0 if rec.get("native") else 1)


@main.command("bisect")
@click.option("--model", required=True)
@click.option("--api", required=True)
@click.option("--good", required=True, metavar="V1", help="A release where the cell is good.")
@click.option("--bad", required=True, metavar="V2", help="A release where it is bad.")
@click.option("--saved-with", metavar="V", help="The release whose artifact is reloaded (default: --good).")
@click.option("--store", metavar="PATH", help="Artifact store (default: the kit home's store/).")
@click.option("--run-id", metavar="ID")
@click.option("--runs-dir", metavar="PATH")
@click.option("--allow-fallback", is_flag=True, help="Create missing environments with the host-Python fallback.")
@handle_errors
def bisect_cmd(model, api, good, bad, saved_with, store, run_id, runs_dir, allow_fallback):
    """Name the first release between --good and --bad where the verdict changes (ceil(log2 n)+1 reloads at most)."""
    from kit.debug.bisect import bisect

    result = bisect(
        model,
        api,
        good,
        bad,
        saved_with=saved_with,
        store=store,
        run_id=run_id,
        runs_root=runs_dir,
        allow_fallback=allow_fallback,
        on_event=click.echo,
    )
    click.echo(
        f"first release with the changed verdict: {result.first_changed} "
        f"(last unchanged: {result.last_unchanged}); {result.reloads} reloads over {len(result.releases)} releases"
    )
    click.echo(f"run folder: {result.run_dir}")


@main.command("bundle")
@click.argument("run_id")
@click.option("--cell", metavar="MODEL/API/SAVED/LOADED", help="One cell's evidence (default: the whole run).")
@click.option(
    "--out", metavar="PATH", help="Zip to write (default: runs/<run-id>/bundles/<cell>.zip or run-<run-id>.zip)."
)
@click.option("--runs-dir", metavar="PATH")
@handle_errors
def bundle_cmd(run_id, cell, out, runs_dir):
    """Zip evidence for a bug report; prints the zip's path.

    With --cell: that cell's notebooks (the train notebook that made its artifact too, also when
    an earlier run trained it) and their HTML, record, manifests and a Markdown summary with the
    command that reproduces it. Without: the whole run folder, with every checked artifact's
    manifest and train notebook from the store. RUN_ID may be `latest`.

    \b
      mxcompat bundle latest --cell lenet/export/1.0.0.post4/1.9.1
      mxcompat bundle 20261203-020000 --out nightly.zip
    """
    from kit.debug.bundle import make_bundle, make_run_bundle
    from kit.results.cells import Cell

    if cell:
        path = make_bundle(run_id, Cell.parse(cell), runs_root=runs_dir, out=out)
    else:
        path = make_run_bundle(run_id, runs_root=runs_dir, out=out)
    click.echo(str(path))


@main.command("report")
@click.argument("run_id")
@click.option("--issue", is_flag=True, help="Print a Markdown body for a bug report (the default prints summary.md).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary JSON a --webhook would get.")
@click.option("--webhook", metavar="URL", help="POST the run's summary as JSON to URL (any HTTP endpoint).")
@click.option("--runs-dir", metavar="PATH")
@handle_errors
def report_cmd(run_id, issue, as_json, webhook, runs_dir):
    """A finished run's outcome: summary.md, a bug report body (--issue), or JSON to a webhook.

    Exits 0 once it has printed or posted (the run's own exit code is in the JSON and in
    run.json); 2 for a missing or unfinished run, 3 when the webhook refuses or is unreachable.

    \b
      mxcompat report 20261203-020000 --issue > body.md
      mxcompat report 20261203-020000 --webhook https://hooks.example.com/T000/B000
    """
    from kit.results import issue_report
    from kit.results.runs import Run
    from kit.results.runs import runs_dir as default_runs_dir

    run = Run(runs_dir or default_runs_dir(), run_id)
    if issue:
        click.echo(issue_report.issue_markdown(run), nl=False)
    if as_json:
        click.echo(json.dumps(issue_report.summary_payload(run), indent=1))
    if webhook:
        payload = issue_report.summary_payload(run)
        status = issue_report.post_webhook(webhook, payload)
        click.echo(f"posted the summary of run {run_id} to {webhook} (HTTP {status})", err=issue or as_json)
    if not (issue or as_json or webhook):
        issue_report.summary_payload(run)  # refuses a missing or unfinished run
        click.echo((run.dir / "summary.md").read_text(), nl=False)


@main.command("compare")
@click.argument("before")
@click.argument("after")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@click.option("--runs-dir", metavar="PATH", help="Where run folders are (default: runs/).")
@handle_errors
def compare_cmd(before, after, as_json, runs_dir):
    """Compare two finished runs by incompatibility signature (e.g. yesterday's nightly and today's).

    Lists the signatures that appeared in AFTER, disappeared from BEFORE, and those whose cells
    changed. Exit codes: 0 no new regression, 1 a new backward (or same-release) signature appeared
    that fails AFTER, 2 a run is missing or unfinished.

    \b
      mxcompat compare nightly-20261204 nightly-20261205
      mxcompat compare 20261204-020000 latest --json
    """
    from kit.results.compare import compare_runs, lines
    from kit.results.runs import Run
    from kit.results.runs import runs_dir as default_runs_dir

    root = runs_dir or default_runs_dir()
    result = compare_runs(Run(root, before), Run(root, after))
    if as_json:
        click.echo(json.dumps(result.as_dict(), indent=1))
    else:
        for text in lines(result):
            red = text.startswith("APPEARED (fails")
            click.secho(text, fg="red" if red else None)
    sys.exit(result.exit_code)


@main.group()
def store():
    """List, verify, push and pull artifact stores (a folder, or s3://bucket/prefix).

    S3: credentials come from the usual AWS variables or files; without any, reads are
    anonymous (unsigned), which works on a public bucket. AWS_ENDPOINT_URL_S3 or
    --endpoint-url points at an S3-compatible server.
    """


_endpoint = click.option("--endpoint-url", metavar="URL", help="S3-compatible endpoint (default: AWS_ENDPOINT_URL_S3).")


@store.command("ls")
@click.argument("location", required=False)
@click.option("--versions", is_flag=True, help="Also list replaced versions kept under .versions/.")
@_endpoint
@handle_errors
def store_ls(location, versions, endpoint_url):
    """List the artifacts of LOCATION (default: the kit home's store), each with its last check.

    A replaced version is named by its identity (model version and param version, a hash of its
    weights) and reloaded by `mxcompat run --versions all`."""
    from kit import store as store_mod

    st = store_mod.open_store(location, endpoint_url=endpoint_url)
    checks = store_mod.read_checks(st)
    rows = []
    for ref in st.refs():
        if ref.version is not None and not versions:
            continue
        m = st.manifest(ref)
        last = sorted(checks.get(ref.rel, {}).items(), key=lambda kv: kv[1].get("checked_at") or "")
        rows.append(
            [
                ref.release,
                ref.model,
                ref.api,
                m.get("status"),
                m.get("model_version"),
                m.get("param_version"),
                ref.version or "current",
                len(m.get("files", {})),
                f"{last[-1][1].get('checked_at')} in {last[-1][0]}: {last[-1][1].get('verdict')}" if last else "never",
            ]
        )
    if not rows:
        click.echo(f"no artifacts in {st.url}")
        return
    columns = ["release", "model", "api", "status", "model_v", "param_v", "version", "files", "last checked"]
    click.echo(format_table(columns, rows))


@store.command("verify")
@click.argument("location", required=False)
@_endpoint
@handle_errors
def store_verify(location, endpoint_url):
    """Re-hash every artifact of LOCATION; list corrupt or missing files (exit 1 when any)."""
    from kit import store as store_mod

    st = store_mod.open_store(location, endpoint_url=endpoint_url)
    refs = st.refs()
    bad = 0
    with click.progressbar(refs, label=f"verifying {len(refs)} artifacts", file=sys.stderr) as bar:
        for ref in bar:
            problems = st.problems(ref)
            if problems:
                bad += 1
                click.secho(f"\nCORRUPT {ref.rel}: {', '.join(problems)}", fg="red")
    click.echo(f"{len(refs) - bad} of {len(refs)} artifacts verify in {st.url}")
    sys.exit(1 if bad else 0)


def _filters(f):
    for opt in (
        click.option("--release", "releases", multiple=True, help="Only these releases (repeatable)."),
        click.option("--model", "models", multiple=True, help="Only these models (repeatable)."),
        click.option("--api", "apis", multiple=True, help="Only these APIs (repeatable)."),
    ):
        f = opt(f)
    return f


@store.command("push")
@click.argument("destination")
@click.option("--from", "source", metavar="PATH", help="Local store to push (default: the kit home's store).")
@click.option("--public-read", is_flag=True, help="Make the uploaded objects publicly readable (never by default).")
@_filters
@_endpoint
@handle_errors
def store_push(destination, source, public_read, endpoint_url, **selection):
    """Upload a local store's artifacts to DESTINATION (s3://bucket/prefix), verified first."""
    from kit import store as store_mod

    dest = _remote_store(destination, "push", endpoint_url=endpoint_url, public_read=public_read)
    counts = store_mod.push(store_mod.open_store(source), dest, **selection, on_event=click.echo)
    kept = f", {counts['superseded']} kept as the store holds them (newer there)" if counts["superseded"] else ""
    click.echo(f"{counts['uploaded']} uploaded, {counts['unchanged']} already there{kept}: {dest.url}")


@store.command("pull")
@click.argument("source")
@click.option("--to", "target", metavar="PATH", help="Local store to fill (default: the kit home's store).")
@click.option("--versions", is_flag=True, help="Also pull replaced versions.")
@_filters
@_endpoint
@handle_errors
def store_pull(source, target, endpoint_url, **selection):
    """Download SOURCE's (s3://bucket/prefix) artifacts into a local store, each verified before use."""
    from kit import store as store_mod

    src = _remote_store(source, "pull", endpoint_url=endpoint_url)
    counts = store_mod.pull(src, store_mod.open_store(target), **selection, on_event=click.echo)
    click.echo(f"{counts['downloaded']} downloaded, {counts['unchanged']} up to date")


def _remote_store(location: str, command: str, **options):
    """The remote store at ``location`` for ``store push``/``pull``: a folder is refused."""
    from kit import store as store_mod

    opened = store_mod.open_store(location, **options)
    if not opened.remote:
        raise UsageError(f"{command} needs an s3:// store, not the folder {location!r}", hint="s3://bucket/prefix")
    return opened


@store.command("import-mbcc", help=MBCC_HELP, short_help="Import MXNet's own checker's saved models into a store.")
@click.argument("source")
@click.option("--store", "target", metavar="PATH|s3://...", help="The store to import into (default: the kit home's).")
@_endpoint
@handle_errors
def store_import_mbcc(source, target, endpoint_url):
    from kit.foreign.mbcc import import_mbcc

    import_mbcc(source, target, endpoint_url=endpoint_url, on_event=click.echo)  # it prints its own totals


@main.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.argument("lab_args", nargs=-1, type=click.UNPROCESSED)
@handle_errors
def lab(lab_args):
    """Start JupyterLab with every environment's kernel visible (extra arguments go to jupyter lab)."""
    home = KitHome()
    names = kernelspecs.kernel_names(home)
    if not names:
        raise UsageError("no kernels yet", hint="create environments first: `mxcompat env create 1.9.1`")
    click.echo("kernels: " + ", ".join(names), err=True)
    argv = [sys.executable, "-m", "jupyterlab"] + list(lab_args)
    if os.geteuid() == 0 and "--allow-root" not in argv:  # containers and CI run as root
        argv.append("--allow-root")
    os.execvpe(argv[0], argv, kernelspecs.jupyter_env(home))
