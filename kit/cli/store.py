"""`mxcompat store`: list, verify, push and pull artifact stores; import MXNet's own checker's models."""

from __future__ import annotations

import sys

import click

from kit import store as stores  # the store API (this module defines the `store` group)
from kit.cli.options import handle_errors, store_option
from kit.cli.tables import format_table
from kit.common.errors import EXIT_OK, EXIT_REGRESSIONS, UsageError
from kit.foreign.mbcc import HELP as MBCC_HELP


@click.group("store", short_help="List, verify, push and pull artifact stores.")
def store_group():
    """List, verify, push and pull artifact stores (a folder, or s3://bucket/prefix).

    S3: credentials come from the usual AWS variables or files; without any, reads are
    anonymous (unsigned), which works on a public bucket. AWS_ENDPOINT_URL_S3 or
    --endpoint-url points at an S3-compatible server.
    """


endpoint_option = click.option(
    "--endpoint-url", metavar="URL", help="S3-compatible endpoint (default: AWS_ENDPOINT_URL_S3)."
)


def transfer_options(f):
    """What push and pull share: which artifacts they move, and the S3 endpoint."""
    return selection_options(endpoint_option(f))


def selection_options(f):
    """--release, --model, --api: which artifacts push and pull move."""
    for opt in (
        click.option("--release", "releases", multiple=True, help="Only these releases (repeatable)."),
        click.option("--model", "models", multiple=True, help="Only these models (repeatable)."),
        click.option("--api", "apis", multiple=True, help="Only these APIs (repeatable)."),
    ):
        f = opt(f)
    return f


@store_group.command("ls", short_help="List a store's artifacts, each with its last check.")
@click.argument("location", required=False)
@click.option("--versions", is_flag=True, help="Also list replaced versions kept under .versions/.")
@endpoint_option
@handle_errors
def store_ls(location, versions, endpoint_url):
    """List the artifacts of LOCATION (default: the kit home's store), each with its last check.

    A replaced version is named by its identity (model version and param version, a hash of its
    weights) and reloaded by `mxcompat run --versions all`."""
    st = stores.open_store(location, endpoint_url=endpoint_url)
    try:
        checks = stores.read_checks(st)
    except stores.StoreError as e:  # the artifacts are listed all the same, without their last checks
        click.secho(f"warning: {e.message}", fg="yellow", err=True)
        checks = {}
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


@store_group.command("verify", short_help="Re-hash every artifact; list corrupt or missing files.")
@click.argument("location", required=False)
@endpoint_option
@handle_errors
def store_verify(location, endpoint_url):
    """Re-hash every artifact of LOCATION; list corrupt or missing files (exit 1 when any)."""
    st = stores.open_store(location, endpoint_url=endpoint_url)
    refs = st.refs()
    bad = 0
    with click.progressbar(refs, label=f"verifying {len(refs)} artifacts", file=sys.stderr) as bar:
        for ref in bar:
            problems = st.problems(ref)
            if problems:
                bad += 1
                click.secho(f"\nCORRUPT {ref.rel}: {', '.join(problems)}", fg="red")
    click.echo(f"{len(refs) - bad} of {len(refs)} artifacts verify in {st.url}")
    sys.exit(EXIT_REGRESSIONS if bad else EXIT_OK)


@store_group.command("push", short_help="Upload a local store's artifacts to an S3 store.")
@click.argument("destination")
@click.option("--from", "source", metavar="PATH", help="Local store to push (default: the kit home's store).")
@click.option("--public-read", is_flag=True, help="Make the uploaded objects publicly readable (never by default).")
@transfer_options
@handle_errors
def store_push(destination, source, public_read, endpoint_url, **selection):
    """Upload a local store's artifacts to DESTINATION (s3://bucket/prefix), verified first."""
    dest = _remote_store(destination, "push", endpoint_url=endpoint_url, public_read=public_read)
    counts = stores.push(stores.open_store(source), dest, **selection, on_event=click.echo)
    kept = f", {counts['superseded']} kept as the store holds them (newer there)" if counts["superseded"] else ""
    click.echo(f"{counts['uploaded']} uploaded, {counts['unchanged']} already there{kept}: {dest.url}")


@store_group.command("pull", short_help="Download an S3 store's artifacts into a local store.")
@click.argument("source")
@click.option("--to", "target", metavar="PATH", help="Local store to fill (default: the kit home's store).")
@click.option("--versions", is_flag=True, help="Also pull replaced versions.")
@transfer_options
@handle_errors
def store_pull(source, target, endpoint_url, **selection):
    """Download SOURCE's (s3://bucket/prefix) artifacts into a local store, each verified before use."""
    src = _remote_store(source, "pull", endpoint_url=endpoint_url)
    counts = stores.pull(src, stores.open_store(target), **selection, on_event=click.echo)
    click.echo(f"{counts['downloaded']} downloaded, {counts['unchanged']} up to date")


def _remote_store(location: str, command: str, **options):
    """The remote store at ``location`` for ``store push``/``pull``: a folder is refused."""
    opened = stores.open_store(location, **options)
    if not opened.remote:
        raise UsageError(f"{command} needs an s3:// store, not the folder {location!r}", hint="s3://bucket/prefix")
    return opened


@store_group.command(
    "import-mbcc", help=MBCC_HELP, short_help="Import MXNet's own checker's saved models into a store."
)
@click.argument("source")
@store_option(help="The store to import into: a folder or s3://bucket/prefix (default: the kit home's store/).")
@endpoint_option
@handle_errors
def store_import_mbcc(source, store, endpoint_url):
    from kit.foreign.mbcc import import_mbcc

    import_mbcc(source, store, endpoint_url=endpoint_url, on_event=click.echo)  # it prints its own totals
