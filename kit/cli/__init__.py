"""The ``mxcompat`` command line: a thin click group over the library, one module per command group.

    options.py   what several commands share: each option once, the error handler
    env.py       env create, list, remove, doctor, jupyter-path
    run.py       run (and how a run's outcome is printed)
    foreign.py   check-model
    debug.py     investigate, convert, bisect, bundle
    results.py   report, compare
    store.py     store ls, verify, push, pull, import-mbcc
    lab.py       lab
    warm.py      warm start, status, stop
    tables.py    plain-text tables

This module builds the group and adds the commands; the command modules never import it back.
Exit codes (kit.common.errors): 0 compatible / healthy, 1 regressions found, 2 usage error, 3 the run or an
environment itself broke.
"""

from __future__ import annotations

import click

from kit.cli.debug import bisect_cmd, bundle_cmd, convert_cmd, investigate_cmd
from kit.cli.env import env_group
from kit.cli.foreign import check_model_cmd
from kit.cli.lab import lab_cmd
from kit.cli.results import compare_cmd, report_cmd
from kit.cli.run import run_cmd
from kit.cli.store import store_group
from kit.cli.warm import warm_group
from kit.execute.quick_exit import freeze_heap_at_exit

freeze_heap_at_exit()  # first registered, last run: after every exit handler the command's modules register


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="mxnet-compat-kit")
def main():
    """Prove whether models saved with older MXNet releases still load and infer the same on newer ones.

    Each MXNet release lives in its own virtualenv, registered as Jupyter kernel
    mxnet-<release> in the kit's home (.kit/ at the repository root, or $MXCOMPAT_HOME).
    """


for command in (
    env_group,
    run_cmd,
    check_model_cmd,
    investigate_cmd,
    convert_cmd,
    bisect_cmd,
    bundle_cmd,
    report_cmd,
    compare_cmd,
    store_group,
    lab_cmd,
    warm_group,
):
    main.add_command(command)
