"""`mxcompat run`: the matrix (train per --save release, reload per --load release, then the summary), and how a
run's outcome is printed (check-model prints its run the same way)."""

from __future__ import annotations

import sys

import click

from kit.cli.options import (
    csv_list,
    execution_options,
    handle_errors,
    matrix_options,
    store_option,
)
from kit.common.errors import UsageError
from kit.envs.limits import Limits
from kit.envs.manager import EnvManager
from kit.envs.release_selection import HELP as SELECTION_HELP
from kit.home import KitHome


@click.command("run", short_help="Run the matrix: train per --save release, reload per --load.")
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
    "--strict-runtimes",
    is_flag=True,
    help="Runtime cells (a release's artifacts in another runtime of it, RELEASE+TAG..., and back) and runtimes "
    "that do not import decide the exit code too; without it they are reported apart, like forward cells.",
)
@store_option()
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
    "--resume",
    "resume_id",
    metavar="RUN-ID",
    help="Finish an interrupted run: redo only what did not finish (its own arguments; "
    "--step-timeout, --cell-timeout, --kernel-memory given again replace its limits).",
)
@execution_options
@matrix_options
@handle_errors
def run_cmd(
    save,
    load,
    models,
    apis,
    cells,
    forward,
    strict_runtimes,
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
    step_timeout,
    cell_timeout,
    kernel_memory,
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
    from kit.envs import release_selection as selection
    from kit.orchestrate import matrix, request

    # how the steps run (matrix.Execution's options): the same for a new run and a resumed one
    execution = dict(
        jobs=jobs, runs_dir=runs_dir, executor=executor, scheduler=scheduler, on_event=click.echo, progress_line=None
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
        limits = None  # the run's own, unless given again: a step that timed out may be resumed with more time
        if step_timeout or cell_timeout or kernel_memory:
            limits = Limits.from_options(step_timeout, cell_timeout, kernel_memory).to_dict()
        outcome = matrix.resume(resume_id, limits=limits, **execution)
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
            models=csv_list(models),
            apis=csv_list(apis),
            cells=csv_list(cells),
            forward=forward,
            strict_runtimes=strict_runtimes,
            tolerance=request.parse_tolerance(tolerance),
            retrain=retrain,
            epochs=epochs,
            versions=versions,
            allow_list=allow_list,
            store=store,
            limits=Limits.from_options(step_timeout, cell_timeout, kernel_memory).to_dict(),
        )
        outcome = matrix.run_matrix(req, run_id=run_id, **execution)
    report_outcome(outcome)


def report_outcome(outcome):
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
