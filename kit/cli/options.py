"""What several commands share: each option defined once, as a decorator, and the error handler.

An option's decorator takes only what differs between its commands (a default, the noun of --jobs); its
name, metavar and wording live here, so `mxcompat X --help` says the same thing for every X.
"""

from __future__ import annotations

import functools
import sys

import click

from kit.common.errors import KitError
from kit.envs import limits
from kit.execute.executors import EXECUTORS


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


def csv_list(value: str | None) -> list[str]:
    """A comma-separated option value as a list, blanks dropped."""
    return [v.strip() for v in (value or "").split(",") if v.strip()]


RUNS_DIR_HELP = "Where run folders are (default: $MXCOMPAT_RUNS_DIR, else the repository's runs/)."

runs_dir_option = click.option("--runs-dir", metavar="PATH", help=RUNS_DIR_HELP)


def run_id_option(default: str = "a timestamp"):
    """--run-id; ``default`` says what the run folder is named without it."""
    return click.option("--run-id", metavar="ID", help=f"Name of the run folder under --runs-dir (default: {default}).")


def store_option(help: str = "Artifact store: a folder or s3://bucket/prefix (default: the kit home's store/)."):
    """--store; ``help`` where a command takes only some stores (check-model's is local)."""
    return click.option("--store", metavar="PATH", help=help)


def jobs_option(default: int, what: str):
    """--jobs/-j: how many ``what`` (e.g. "Environments built") run at once, 1 to 16."""
    return click.option(
        "--jobs", "-j", default=default, show_default=True, type=click.IntRange(1, 16), help=f"{what} at once."
    )


tolerance_option = click.option(
    "--tolerance",
    metavar="JSON|FILE",
    help='Tolerance overrides, e.g. \'{"float32": {"rtol": 1e-3}, "models": {"lstm": {"atol": 1e-4}}}\'.',
)

allow_list_option = click.option(
    "--allow-list",
    metavar="FILE",
    help="Known incompatibilities (YAML/JSON list of cell: MODEL/API/SAVED/LOADED glob, reason, expires).",
)


def execution_options(f):
    """Where a run's steps execute: --executor and --scheduler."""
    f = click.option(
        "--scheduler",
        metavar="ADDRESS",
        envvar="DASK_SCHEDULER_ADDRESS",
        help="The Dask scheduler for --executor dask, e.g. tcp://10.0.0.5:8786 (or DASK_SCHEDULER_ADDRESS).",
    )(f)
    return click.option(
        "--executor",
        type=click.Choice(list(EXECUTORS)),
        default="local",
        show_default=True,
        help="Where steps run: a local process pool, or a Dask cluster (needs --scheduler and --store).",
    )(f)


limits_options = (
    click.option(
        "--step-timeout",
        type=click.FloatRange(min=1),
        metavar="SECONDS",
        help=f"A step (one notebook on one release) that runs longer is stopped and broken with that cause; "
        f"the run goes on (default: {limits.STEP_TIMEOUT:.0f}).",
    ),
    click.option(
        "--cell-timeout",
        type=click.FloatRange(min=1),
        metavar="SECONDS",
        help=f"A cell (one artifact loaded, run and remedied in one release) that takes longer is recorded as "
        f"load-error/infer-error 'timed out' and its kernel replaced (default: {limits.CELL_TIMEOUT:.0f}).",
    ),
    click.option(
        "--kernel-memory",
        metavar="SIZE",
        help="Each kernel's address-space limit: 8G, 512M or a share of the machine's memory such as 60% "
        f"(default: {limits.KERNEL_MEMORY_SHARE:.0%}, at least {limits.KERNEL_MEMORY_FLOOR >> 30} GiB). "
        "Past it an allocation fails in that kernel, not the machine.",
    ),
)


def matrix_options(f):
    """What every command that runs a matrix takes: its run's name and folder, steps at once, tolerance, allow-list,
    and the limits of its steps, cells and kernels (``Limits.from_options(step_timeout, cell_timeout,
    kernel_memory)``)."""
    for option in reversed(
        (run_id_option(), runs_dir_option, jobs_option(1, "Steps (notebook runs)"), tolerance_option, allow_list_option)
        + limits_options
    ):
        f = option(f)
    return f
