"""`mxcompat lab`: JupyterLab with every environment's kernel visible."""

from __future__ import annotations

import os
import sys

import click

from kit.cli.options import handle_errors
from kit.common.errors import UsageError
from kit.envs import kernelspecs
from kit.home import KitHome


@click.command(
    "lab",
    short_help="Start JupyterLab with every environment's kernel visible.",
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
)
@click.argument("lab_args", nargs=-1, type=click.UNPROCESSED)
@handle_errors
def lab_cmd(lab_args):
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
