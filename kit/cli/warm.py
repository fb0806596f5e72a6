"""`mxcompat warm`: kernels kept started between commands, for checks run again and again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import click

from kit.cli.options import handle_errors
from kit.common.errors import KitError, UsageError
from kit.envs import kernelspecs
from kit.envs import release_selection as selection
from kit.envs.manager import EnvManager
from kit.execute import warm_kernels
from kit.home import KitHome

#: how long `warm start` waits for its kernels to be ready
START_TIMEOUT = 300


@click.group("warm", short_help="Keep kernels started between commands (nightly checks, check-model).")
def warm_group():
    """Keep release kernels started, their imports done, between commands.

    A step takes a warm kernel instead of starting its own (about a second each, `import mxnet`
    included), and the keeper starts the next one. Each kernel runs one notebook and ends, as a kernel
    a step starts does; results are the same with or without warm kernels.
    """


def _parse_idle(text: str) -> float:
    units = {"s": 1, "m": 60, "h": 3600}
    try:
        value = float(text[:-1]) * units[text[-1]] if text and text[-1] in units else float(text)
    except ValueError:
        value = -1
    if not 0 < value < float("inf"):  # nan too
        raise UsageError(f"--idle {text!r}: give a duration such as 90s, 30m or 2h")
    return value


@warm_group.command("start", short_help="Start the keeper with kernels for RELEASES and the summary.")
@click.argument("releases", nargs=-1, required=True)
@click.option("--idle", default="30m", show_default=True, help="End after this long without a kernel taken.")
@handle_errors
def warm_start(releases, idle):
    """Start a keeper that holds one started kernel for each of RELEASES (environments `env list`
    shows, runtimes and globs included) and one for the summary, then wait until they are ready.

    \b
      mxcompat warm start 1.9.1            (then: mxcompat run --load 1.9.1 --store S ...)
      mxcompat warm start 1.4.1 1.9.1 --idle 2h
    """
    home = KitHome()
    seconds = _parse_idle(idle)
    running = warm_kernels.read_keeper(home)
    if running is not None:
        raise UsageError(
            f"a keeper runs already (pid {running['pid']}) with {', '.join(running['kernels'])}",
            hint="`mxcompat warm stop` first",
        )
    manager = EnvManager(home)
    names = selection.expand(",".join(releases), manager, flag="RELEASES")
    kernels = [manager.ready_env(n).kernel_name for n in names]
    kernels.append(kernelspecs.ensure_host_kernel(home))
    warm_kernels.folder(home).mkdir(parents=True, exist_ok=True)
    log = home.logs / "warm.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with open(log, "a") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kit.execute.warm_kernels", str(home.root), str(seconds), *kernels],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            cwd=warm_kernels.folder(home),
            start_new_session=True,  # it outlives this command and the terminal's Ctrl-C
        )
    while set(warm_kernels.ready_kernels(home)) != set(kernels):
        if proc.poll() is not None:
            raise KitError(
                f"the keeper exited (code {proc.returncode}) before its kernels were ready", hint=f"see {log}"
            )
        if time.monotonic() - started > START_TIMEOUT:
            os.kill(proc.pid, signal.SIGTERM)
            raise KitError(f"the kernels were not ready in {START_TIMEOUT} s", hint=f"see {log}")
        time.sleep(0.1)
    click.echo(
        f"warm: {', '.join(kernels)} ready in {time.monotonic() - started:.1f}s (keeper pid {proc.pid}, "
        f"ends after {idle} without a kernel taken; `mxcompat warm stop` ends it now)"
    )


@warm_group.command("status", short_help="The keeper and its ready kernels.")
@handle_errors
def warm_status():
    """Whether a keeper runs, with which kernels, and how many of each are ready now."""
    home = KitHome()
    keeper = warm_kernels.read_keeper(home)
    if keeper is None:
        click.echo("no keeper runs: `mxcompat warm start RELEASES` starts one")
        return
    ready = warm_kernels.ready_kernels(home)
    click.echo(f"keeper pid {keeper['pid']}, idle limit {keeper['idle']:.0f}s")
    for name in keeper["kernels"]:
        click.echo(f"  {name}: {ready.get(name, 0)} ready")


@warm_group.command("stop", short_help="End the keeper and its kernels.")
@handle_errors
def warm_stop():
    """End the keeper and the kernels it holds ready. A kernel a step has taken runs to its notebook's end, and
    the keeper ends after it."""
    home = KitHome()
    keeper = warm_kernels.read_keeper(home)
    if keeper is None:
        click.echo("no keeper runs")
        return
    os.kill(int(keeper["pid"]), signal.SIGTERM)
    for _ in range(100):
        if warm_kernels.read_keeper(home) is None:
            click.echo(f"stopped the keeper (pid {keeper['pid']}) and its ready kernels")
            return
        time.sleep(0.05)
    click.echo(
        f"stopped the keeper's ready kernels; the keeper (pid {keeper['pid']}) ends when the kernels steps took "
        "end with their notebooks"
    )
