"""After a run: `mxcompat investigate`, `convert`, `bisect` and `bundle`, one cell (or run) at a time."""

from __future__ import annotations

import json
import sys

import click

from kit.cli.options import handle_errors, run_id_option, runs_dir_option, store_option
from kit.common.capabilities import APIS
from kit.common.errors import EXIT_OK, EXIT_REGRESSIONS

CELL_METAVAR = "MODEL/API/SAVED/LOADED"


@click.command("investigate", short_help="Where in the model a cell's difference starts.")
@click.argument("run_id")
@click.option("--cell", required=True, metavar=CELL_METAVAR, help="The matrix cell to investigate.")
@click.option(
    "--recompute",
    is_flag=True,
    help="Compute the saving release's internals now, in its environment, instead of the recorded ones.",
)
@runs_dir_option
@handle_errors
def investigate_cmd(run_id, cell, recompute, runs_dir):
    """Where in the model a cell's difference starts: investigate.ipynb on the loading release's kernel.

    A cell that does not load or run: what failed and where, the remedies tried, and the layers compared
    under the one that works. Exit 0 when the investigation completes, whatever it finds.
    """
    from kit.debug.investigate import investigate_cell, report_lines
    from kit.results.cells import Cell

    out = investigate_cell(run_id, Cell.parse(cell), runs_dir=runs_dir, recompute=recompute)
    for line in report_lines(json.loads(out["json"].read_text()), out["notebook"]):
        click.echo(line)


@click.command("convert", short_help="Convert a failing cell's artifact with its verified remedy.")
@click.argument("run_id")
@click.option("--cell", required=True, metavar=CELL_METAVAR, help="A failing cell with a verified remedy.")
@click.option("--remedy", metavar="NAME", help="Which verified remedy (default: the first that changes files).")
@click.option(
    "--out",
    metavar="DIR",
    help="Write the converted artifact into DIR/CELL/ (default: RUN/converted/); nothing else in DIR is touched, "
    "and a DIR/CELL/ convert did not write is refused.",
)
@runs_dir_option
@handle_errors
def convert_cmd(run_id, cell, remedy, out, runs_dir):
    """Write a failing cell's artifact as its verified remedy makes it, then reload it natively in the
    loading release (no remedy) on the saving release's reference cases; record.json beside it says how
    close it came. Exit 0 when it loads natively identical or close, 1 otherwise.

    \b
      mxcompat convert RUN --cell lstm/save_parameters/1.9.1/2.0.0b1   # 2.0's rnn_param, a native 2.0 file
      mxcompat convert RUN --cell lenet/export/1.9.1/1.4.1             # the graph without 'layout'
    """
    from kit.debug.convert import convert_cell
    from kit.results.cells import Cell

    done = convert_cell(run_id, Cell.parse(cell), remedy=remedy, out=out, runs_dir=runs_dir)
    rec = done["record"]
    max_abs = (rec.get("summary") or {}).get("max_abs")
    click.echo(f"converted {cell} with {done['remedy']}: {done['out']}")
    click.echo(
        f"reloaded natively in {rec['loaded_with']} via {rec.get('load_path')}: {rec['verdict']}"
        + (f", max abs {max_abs:.3g}" if max_abs is not None else "")
        + ("" if rec.get("native") else f" ({rec.get('reason')})")
    )
    click.echo(f"record: {done['out']}/record.json")
    sys.exit(EXIT_OK if rec.get("native") else EXIT_REGRESSIONS)


@click.command("bisect", short_help="The first release where a cell's verdict changes.")
@click.option("--model", required=True, metavar="MODEL", help="The cell's model, e.g. lenet or lstm.")
@click.option("--api", required=True, metavar="API", help="The cell's save/load API: " + ", ".join(APIS) + ".")
@click.option("--good", required=True, metavar="V1", help="A release where the cell is good.")
@click.option("--bad", required=True, metavar="V2", help="A release where it is bad.")
@click.option("--saved-with", metavar="V", help="The release whose artifact is reloaded (default: --good).")
@store_option()
@run_id_option("bisect-<timestamp>")
@runs_dir_option
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
        runs_dir=runs_dir,
        allow_fallback=allow_fallback,
        on_event=click.echo,
    )
    click.echo(
        f"first release with the changed verdict: {result.first_changed} "
        f"(last unchanged: {result.last_unchanged}); {result.reloads} reloads over {len(result.releases)} releases"
    )
    click.echo(f"run folder: {result.run_dir}")


@click.command("bundle")
@click.argument("run_id")
@click.option("--cell", metavar=CELL_METAVAR, help="One cell's evidence (default: the whole run).")
@click.option(
    "--out", metavar="PATH", help="Zip to write (default: runs/<run-id>/bundles/<cell>.zip or run-<run-id>.zip)."
)
@runs_dir_option
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
        path = make_bundle(run_id, Cell.parse(cell), runs_dir=runs_dir, out=out)
    else:
        path = make_run_bundle(run_id, runs_dir=runs_dir, out=out)
    click.echo(str(path))
