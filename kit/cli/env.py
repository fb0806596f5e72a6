"""`mxcompat env`: create, list, verify and remove the per-release environments."""

from __future__ import annotations

import sys

import click

from kit.cli.options import handle_errors, jobs_option
from kit.cli.tables import format_table, human_size
from kit.common.errors import EXIT_BROKEN, KitError, UsageError
from kit.common.versions import is_runtime
from kit.envs import kernelspecs, onnx_path, releases
from kit.envs.manager import EnvManager
from kit.envs.runtime_remedies import runtime_line
from kit.home import KitHome


@click.group("env", short_help="Create, list, verify and remove per-release environments.")
def env_group():
    """Create, list, verify and remove the per-release environments."""


@env_group.command("create", short_help="Create environments for releases, or a custom release.")
@click.argument("versions", nargs=-1)
@click.option("--all", "all_", is_flag=True, help="Every release in the table.")
@click.option(
    "--allow-fallback",
    is_flag=True,
    help="When a release's own Python is missing, use the documented --no-deps build on the host Python "
    "(marked as a fallback wherever the env is shown or recorded).",
)
@click.option("--python", "python", metavar="PATH", help="The interpreter to build with, instead of discovery.")
@jobs_option(2, "Environments built")
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
      mxcompat env create onnx          (the ONNX path: 1.9.1 with its exporter, and ONNX Runtime)
      mxcompat env create onnx-1.5.1    (an older exporter, and ONNX Runtime)
      mxcompat env create openvino      (1.9.1 with its exporter, and OpenVINO)
      mxcompat env create torch         (1.9.1 with its exporter, and PyTorch with onnx2torch: over 5 GB)
      mxcompat env create 1.9.1+py3.12+numpy1.26.4 1.9.1+py3.13+numpy2.1.3 1.6.0+mkl 1.7.0.post2+native

    \b
    A runtime, RELEASE+TAG[+TAG...], is a release with what changes under it: pyX.Y (the interpreter),
    numpyX.Y.Z (installed past the release's own numpy pin), mkl / native (the mxnet-mkl / mxnet-native
    build of that version), MXNET_NAME=VALUE (a switch set in its kernel). One that does not import gets
    the runtime remedies its error calls for (the NumPy names it reads, given back; distutils from
    setuptools), kept only when it then computes what its release's environment computes (built first
    when missing). `env list` shows how each imports.
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
        wanted = []
        for v in dict.fromkeys(versions):  # a name of the ONNX path builds its exporter and the runtime
            if is_runtime(v):  # a runtime is checked against its release's environment: built first if missing
                runtime = manager.resolve(v)
                ready = manager.state_of(runtime.canonical) == "ready"
                picked = ([] if ready else [releases.get(runtime.canonical)]) + [runtime]
            else:
                picked = onnx_path.environments(v) or [releases.get(v)]
            for release in picked:
                if release not in wanted:
                    wanted.append(release)
    plans = [manager.build_plan(r, allow_fallback=allow_fallback, python=python) for r in wanted]
    for p in plans:
        how = " (fallback: --no-deps on the host Python)" if p.fallback else ""
        how += f" ({p.release.quirks[0]})" if p.release.is_runtime else ""
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


def env_table(rows: list[tuple[str, object, dict]]) -> str:
    """The table of `env list` and `env doctor`: a row per (release, its probe's ``get``, the command's columns).

    The probe's columns come first; matplotlib and pandas are optional, so an absent one shows as "-".
    """
    lines = []
    for name, probe, extra in rows:
        runtime = probe("runtime")
        versions = " ".join(f"{k} {v}" for k, v in (probe("versions") or {}).items())
        mxnet = f"- ({versions or runtime})" if runtime else probe("mxnet", "-")
        packages = (
            [mxnet] + [probe(k, "-") for k in ("python", "numpy")] + [probe(k) or "-" for k in ("matplotlib", "pandas")]
        )
        lines.append([name, *packages, *extra.values()])
    headers = ["release", "mxnet", "python", "numpy", "matplotlib", "pandas", *rows[0][2]]
    return format_table(headers, lines)


@env_group.command("list", short_help="Show every environment: versions, kernel, size, health.")
@handle_errors
def env_list():
    """Show every environment: release or runtime, Python, numpy, matplotlib, pandas, kernel, size, health,
    fallback, and how a runtime imports (under which remedies; whether it reproduces its release)."""
    manager = EnvManager()
    rows = [
        (
            e.name,
            e.info,
            {
                "kernel": e.kernel_name if e.release is None or e.release.has_mxnet else f"- ({e.release.name} worker)",
                "size": human_size(e.size_bytes()),
                "runtime": runtime_line(e.runtime) if e.runtime else "-",
                "health": e.state,
                "fallback": "yes" if e.fallback else "no",
            },
        )
        for e in manager.list()
    ]
    if not rows:
        click.echo(f"no environments in {manager.home.envs}; create some with `mxcompat env create 1.9.1`")
        return
    click.echo(env_table(rows))


@env_group.command("remove")
@click.argument("names", nargs=-1)
@click.option("--all", "all_", is_flag=True, help="Remove every environment.")
@handle_errors
def env_remove(names, all_):
    """Remove environments and their kernels.

    Takes only names that `mxcompat env list` shows (or --all) and deletes only their folders under the kit
    home's envs/ and their kernels: the store, the runs and anything else stay. A name it does not list
    is refused before anything is removed (exit 2).
    """
    manager = EnvManager()
    listed = [e.name for e in manager.list()]
    if all_:
        names = listed
    if not names:
        raise UsageError("name at least one environment, or --all")
    unknown = [n for n in names if n not in listed]
    if unknown:  # refused before anything is removed
        raise UsageError(
            f"no environment {', '.join(repr(n) for n in unknown)} in {manager.home.envs}: nothing was removed",
            hint="remove takes names `mxcompat env list` shows: " + (", ".join(listed) or "there are none"),
        )
    for n in names:
        manager.remove(n)
        click.echo(f"removed {n}")


@env_group.command("doctor", short_help="Re-verify environments (exit 3 when any is unhealthy).")
@click.argument("names", nargs=-1)
@jobs_option(2, "Environments verified")
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
    rows = [
        (
            h.name,
            (h.probe or {}).get,
            {
                "fallback": "yes" if manager.get(h.name).fallback else "no",
                "health": "healthy" if h.ok else "UNHEALTHY",
                "problems": "; ".join(h.problems),
            },
        )
        for h in healths
    ]
    click.echo(env_table(rows))
    if not all(h.ok for h in healths):
        sys.exit(EXIT_BROKEN)


@env_group.command("jupyter-path", short_help="Print the JUPYTER_PATH that shows every kernel.")
@click.option("--export", "export", is_flag=True, help="Print a shell `export JUPYTER_PATH=...` line.")
def env_jupyter_path(export):
    """Print the JUPYTER_PATH under which every environment's kernel is visible."""
    value = kernelspecs.jupyter_path(KitHome())
    click.echo(f"export JUPYTER_PATH={value}" if export else value)
