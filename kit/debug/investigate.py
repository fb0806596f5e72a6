"""Running investigate.ipynb for one cell of a run, on the loading release's kernel, and saying what it found.

A cell whose artifact does not load or run (a load or infer error) is investigated like any other: the
notebook says what failed and where, which remedies were tried (the run's record says) and compares layer
by layer under the one that works. An exit's cell (``onnx``, ``openvino``, ``torch``) runs on its exporter's
kernel: the exported file, the nodes it names made outputs, runs in the exit's runtime against the saving
release's internals. The investigation completing is exit 0 whatever it finds, as for a
numeric regression; a notebook that itself breaks is a :class:`KitError` (exit 3) naming its executed copy.
What the kernels and MXNet print goes to ``RUN/logs/investigate-<cell>.log``, its tail shown when it fails.
"""

from __future__ import annotations

from pathlib import Path

from papermill.exceptions import PapermillExecutionError

from kit.common import artifacts
from kit.common.capabilities import EXIT_APIS, EXIT_RUNTIMES, ONNX_SOURCES
from kit.common.errors import KitError, UsageError
from kit.common.verdicts import PARAMS_AS_SAVED
from kit.debug.run_files import cell_artifact, read_record, record_path, run_store
from kit.envs import limits, onnx_path
from kit.envs.manager import EnvManager
from kit.execute import kernel_log, notebook_parameters
from kit.execute.notebooks import NOTEBOOKS, run_notebook
from kit.home import KitHome
from kit.results.cells import Cell
from kit.results.runs import Run, default_runs_dir


def investigate_cell(
    run_id: str,
    cell: Cell,
    *,
    runs_dir: str | Path | None = None,
    home: KitHome | None = None,
    recompute: bool = False,
    tolerance: dict | None = None,
) -> dict:
    """Execute investigate.ipynb for ``cell`` of run ``run_id``; paths of the notebook and its JSON.

    ``recompute`` evaluates the saving release's internals now, in its own environment,
    instead of using those recorded at train time.
    """
    home = home or KitHome()
    run = Run(runs_dir or default_runs_dir(), run_id)
    if not run.exists():
        raise UsageError(f"no run {run_id} in {run.dir.parent}")
    manifest = run.read_manifest()
    store = run_store(run, home)
    record = record_path(run, cell)
    manager = EnvManager(home)
    exit_runtimes = None
    source_api = cell.api
    if cell.api in EXIT_APIS:  # the exporter's kernel exports; the exit's runtime runs the file, nodes as outputs
        if not record.is_file():
            raise UsageError(f"run {run_id} has no record of {cell}: which artifact it exported is not known")
        source_api = read_record(run, cell).get("source_api") or ONNX_SOURCES[0]
        loading = manager.ready_env(onnx_path.env_name(cell.loaded))
        manager.ready_env(EXIT_RUNTIMES[cell.api])
        exit_runtimes = {cell.api: onnx_path.runtime_python(home, cell.api)}
    else:
        loading = manager.ready_env(cell.loaded)
    artifact = cell_artifact(store, cell, source_api)
    if not (artifact / artifacts.MANIFEST).is_file():
        raise UsageError(f"run {run_id}'s store {store} has no artifact {cell.saved}/{cell.model}/{source_api}")
    out_dir = run.dir / "investigate"
    out_dir.mkdir(parents=True, exist_ok=True)
    reference = ""
    log = run.dir / "logs" / f"investigate-{cell.slug}.log"  # what the kernels and MXNet print: not the terminal
    log.parent.mkdir(parents=True, exist_ok=True)
    if recompute:
        saving = manager.ready_env(cell.saved)
        reference = str(out_dir / f"{cell.slug}.reference.npz")
        saving.run_main(
            "kit.kernel.entry.recompute",
            {"folder": str(artifact), "out": reference, "release": cell.saved},
            f"computing {cell.saved}'s internals",
            timeout=600,
            log=log,
        )
    notebook = out_dir / f"{cell.slug}.ipynb"
    out_json = out_dir / f"{cell.slug}.json"
    out_json.unlink(missing_ok=True)  # an earlier investigation's findings are not this one's
    try:
        run_notebook(
            NOTEBOOKS / "investigate.ipynb",
            notebook,
            loading.kernel_name,
            notebook_parameters.investigate(
                release=cell.loaded,
                store=store,
                model=cell.model,
                api=cell.api,
                saved_with=cell.saved,
                tolerance=tolerance or manifest["request"].get("tolerance"),
                reference=reference,
                record=record if record.is_file() else None,
                out_json=out_json,
                exit_runtimes=exit_runtimes,
                exports=out_dir / f"{cell.slug}.files" if exit_runtimes else None,
            ),
            home=home,
            execution_timeout=int(limits.CELL_TIMEOUT),
            log=log,
        )
    except PapermillExecutionError as e:
        raise KitError(
            f"investigate.ipynb stopped in cell {e.cell_index} on kernel {loading.kernel_name}: {e.ename}: "
            + (e.evalue.strip().splitlines() or [""])[0],
            hint=f"the executed notebook shows the cell and its traceback: {notebook}; the kernel's log: {log}",
        ) from e
    except KitError:
        raise
    except Exception as e:  # noqa: BLE001 - the kernel died, did not start or ran past its time: its log says why
        raise KitError(
            f"investigate.ipynb did not complete on kernel {loading.kernel_name}: {type(e).__name__}: "
            + (str(e).strip().splitlines() or [""])[0]
            + "".join(f"\n  {line}" for line in kernel_log.tail(log).splitlines()),
            hint=f"the kernel's log: {log}",
        ) from e
    return {"notebook": notebook, "json": out_json}


def report_lines(result: dict, notebook: str | Path) -> list[str]:
    """What ``mxcompat investigate`` prints: for a cell that does not load or run, what failed and where, the
    remedies tried and the layers under the one that works (``message``); then where the difference starts,
    the parameters not loaded as saved, and the executed notebook."""
    lines = []
    failure = result.get("failure")
    if failure:
        lines += result["message"].splitlines()
    if result.get("exported"):
        exported = result["exported"]
        lines.append(
            f"exported file: {exported['file']}; {exported['exposed']} of its tensors compared as MXNet's nodes "
            f"({exported['layers']}, run in {exported['runtime']['name']})"
        )
    under = result.get("compared_under")
    if result["rows"]:  # the artifact as it is, or under the remedy that works
        where = f" under remedy {under['name']}" if under else ""
        first = result["first_divergence"]
        if first:
            lines.append(
                f"first node past tolerance{where}: #{first['index']} {first['node']} (op {first['op']}, "
                f"max abs {first.get('max_abs')})"
            )
        else:
            compared = [r for r in result["rows"] if r["ok"] is not None]  # an exit's file lacks fused nodes
            lines.append(f"no node past tolerance{where} ({len(compared)} nodes)")
        if result.get("node_matching", "by name") != "by name":
            lines.append(f"nodes matched {result['node_matching']}")
        if result["parameters"] is None:
            lines.append("the artifact records no table of its saved parameters")
        else:
            changed = [p for p in result["parameters"] if p["status"] not in PARAMS_AS_SAVED]
            lines.append(
                f"{len(changed)} parameter(s) not loaded as saved"
                + (": " + ", ".join(f"{p['name']} ({p['status']})" for p in changed) if changed else "")
            )
    lines.append(f"notebook: {notebook}")
    return lines
