"""mxcompat run: the whole matrix through papermill, its run folder, exit codes, resume and parallelism."""

from __future__ import annotations

import base64
import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import nbformat
import pytest
from conftest import NEWEST, OLDEST, REPO, group_line, read_records, rehash, run_cli, scale_weight
from helpers import run_kit_in_terminal

pytestmark = pytest.mark.envs

SAVE = f"{OLDEST},{NEWEST}"


def run(home, runs, *args, env=None):
    return run_cli("run", "--runs-dir", str(runs), *args, home=home, env=env, timeout=1200)


def comparable(records: dict) -> dict:
    """Records without what legitimately differs between two runs (timings, timestamps, paths)."""
    out = {}
    for key, rec in records.items():
        out[key] = (
            rec["verdict"],
            rec["reason"],
            json.dumps(rec.get("summary"), sort_keys=True),
            json.dumps(rec.get("cases"), sort_keys=True),
        )
    return out


@pytest.fixture(scope="module")
def first_run(built_envs, kit_home, tmp_path_factory):
    """A real two-release run from an empty store: trains, reloads, summarizes."""
    runs = tmp_path_factory.mktemp("runs")
    store = tmp_path_factory.mktemp("matrix-store")
    proc = run(kit_home, runs, "--save", SAVE, "--run-id", "first", "--store", str(store), "--jobs", "2")
    return {"proc": proc, "dir": runs / "first", "runs": runs, "store": store}


def test_run_folder_holds_every_piece_of_evidence(first_run):
    proc, d = first_run["proc"], first_run["dir"]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for rel in (
        f"train/mxnet-{OLDEST}.ipynb",
        f"train/mxnet-{NEWEST}.ipynb",
        f"reload/mxnet-{OLDEST}.ipynb",
        f"reload/mxnet-{NEWEST}.ipynb",
        "summary.ipynb",
        "summary.html",
        "summary.md",
        "junit.xml",
        "records.csv",
        "run.json",
    ):
        assert (d / rel).is_file(), rel
    manifest = json.loads((d / "run.json").read_text())
    assert manifest["exit_code"] == 0
    assert [manifest["steps"][i]["status"] for i in manifest["order"]] == ["ok"] * 5
    assert manifest["request"]["save"] == [OLDEST, NEWEST]
    records = read_records(d)
    # newest reloads 2 x (28 + 7 c_predict) cells, oldest only its own 35 (no --forward)
    assert len(records) == 105
    assert {r["direction"] for r in records.values()} == {"backward", "same"}
    assert "[5/5] " in proc.stdout and "backward: close" in proc.stdout


def test_records_table_junit_and_markdown_agree(first_run):
    d = first_run["dir"]
    lines = (d / "records.csv").read_text().splitlines()
    assert lines[0].startswith("saved_with,model,api,loaded_with,direction,verdict") and len(lines) == 106
    suites = ET.parse(d / "junit.xml").getroot().findall("testsuite")
    assert sorted(s.get("name") for s in suites) == sorted(
        ["c_predict", "export", "module_checkpoint", "save_params", "save_parameters"]
    )
    assert sum(int(s.get("tests")) for s in suites) == 105
    assert sum(int(s.get("failures")) for s in suites) == 0
    md = (d / "summary.md").read_text()
    assert "**Exit code 0 (compatible)**: no incompatibility found." in md and "| backward | close |" in md
    assert lines[0].split(",")[-6:] == [
        "signature_id",
        "signature",
        "remedy",
        "remedy_verdict",
        "notebook",
        "record_file",
    ]


def test_executed_notebooks_record_their_kernel_and_string_parameters(first_run):
    nb = nbformat.read(first_run["dir"] / "reload" / f"mxnet-{NEWEST}.ipynb", 4)
    assert nb.metadata["kernelspec"]["name"] == f"mxnet-{NEWEST}"
    params = nb.metadata["papermill"]["parameters"]
    assert params["release"] == NEWEST and params["saved_with"] == [OLDEST, NEWEST]
    # one kernel per release: the train step's kernel ran the reload step, its copy numbered from 1
    assert nb.metadata["mxcompat"]["kernel"].startswith("kept from the previous step")
    counts = [c.execution_count for c in nb.cells if c.cell_type == "code"]
    assert counts == list(range(1, len(counts) + 1))
    train = nbformat.read(first_run["dir"] / "train" / f"mxnet-{NEWEST}.ipynb", 4)
    assert "mxcompat" not in train.metadata


def test_summary_notebook_shows_figures_and_tables(first_run):
    nb = nbformat.read(first_run["dir"] / "summary.ipynb", 4)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    svgs = [o["data"]["image/svg+xml"] for o in outputs if "image/svg+xml" in o.get("data", {})]
    pngs = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(svgs) == 1 and len(pngs) == 1  # heatmaps (labels as SVG text) and error distributions
    assert "saved with" in svgs[0] and "module_checkpoint" in svgs[0] and "<text" in svgs[0]
    html = (first_run["dir"] / "summary.html").read_text()
    assert html.count('src="data:image/png;base64') == 1
    assert base64.b64encode(svgs[0].encode()).decode()[:400] in html  # nbconvert embeds the SVG as a data URI
    assert "Environments side by side" in html
    assert "1.0.0.post4" in html and "MKLDNN" in html


@pytest.fixture(scope="module")
def serial_run(first_run, kit_home):
    """The same request again, one job: its baselines come from the store (first_run trained them)."""
    runs, store = first_run["runs"], first_run["store"]
    proc = run(kit_home, runs, "--save", SAVE, "--run-id", "serial", "--store", str(store), "--jobs", "1")
    return {"proc": proc, "dir": runs / "serial", "runs": runs, "store": store}


def test_jobs_2_gives_the_same_records_as_jobs_1(first_run, serial_run):
    proc = serial_run["proc"]
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"train:{OLDEST}: cached" in proc.stdout  # baselines are frozen: not retrained
    assert comparable(read_records(serial_run["dir"])) == comparable(read_records(first_run["dir"]))
    assert "cell 1/" not in proc.stdout  # no live progress lines when stdout is not a terminal


def test_the_train_notebook_travels_with_its_artifacts(first_run, serial_run, kit_home):
    store = first_run["store"]
    artifact = store / NEWEST / "lenet" / "export"
    manifest = json.loads((artifact / "manifest.json").read_text())
    assert manifest["saved_by"] == f"first/train:{NEWEST}"
    kept = nbformat.read(artifact / "train.ipynb", 4)
    assert kept.metadata["papermill"]["parameters"]["saved_by"] == f"first/train:{NEWEST}"
    from kit.common.artifacts import sha256_file

    assert manifest["files"]["train.ipynb"] == sha256_file(str(artifact / "train.ipynb"))
    assert not (serial_run["dir"] / "train" / f"mxnet-{NEWEST}.ipynb").exists()  # serial trained nothing

    cell = f"lenet/export/{OLDEST}/{NEWEST}"
    proc = run_cli("bundle", "serial", "--cell", cell, "--runs-dir", str(serial_run["runs"]), home=kit_home)
    assert proc.returncode == 0, proc.stderr
    slug = f"{OLDEST}__lenet__export__{NEWEST}"
    with zipfile.ZipFile(proc.stdout.strip().splitlines()[-1]) as z:
        names = set(z.namelist())
        readme = z.read(f"{slug}/README.md").decode()
        train = nbformat.reads(z.read(f"{slug}/notebooks/train-mxnet-{OLDEST}.ipynb").decode(), 4)
    assert f"{slug}/notebooks/train-mxnet-{OLDEST}.html" in names
    assert train.metadata["kernelspec"]["name"] == f"mxnet-{OLDEST}"  # the cached baseline's own notebook
    assert f"executed as step `first/train:{OLDEST}`" in readme
    assert f"mxcompat run --save {OLDEST} --load {NEWEST} --cells lenet:export --store {store}" in readme


def test_runs_latest_and_a_whole_run_bundle(first_run, serial_run, kit_home):
    runs = first_run["runs"]
    latest = runs / "latest"
    assert latest.is_symlink() and os.readlink(latest) == "serial"  # the newest run so far
    proc = run_cli("bundle", "serial", "--runs-dir", str(runs), home=kit_home)
    assert proc.returncode == 0, proc.stderr
    path = Path(proc.stdout.strip().splitlines()[-1])
    assert path == runs / "serial" / "bundles" / "run-serial.zip"
    with zipfile.ZipFile(path) as z:
        names = set(z.namelist())
    for member in ("run.json", "summary.md", "summary.html", "records.csv", f"reload/mxnet-{NEWEST}.ipynb"):
        assert f"run-serial/{member}" in names, member
    records = read_records(runs / "serial")
    assert sum(1 for n in names if n.startswith("run-serial/records/")) == len(records)
    checked = [r for r in records.values() if r["verdict"] != "unsupported"]  # each loaded an artifact
    assert any(r["api"] == "c_predict" for r in checked)
    for saved, model, api in {(r["saved_with"], r["model"], r["source_api"] or r["api"]) for r in checked}:
        assert f"run-serial/store/{saved}/{model}/{api}/manifest.json" in names
    assert f"run-serial/store/{OLDEST}/lenet/export/train.ipynb" in names
    assert not [n for n in names if "/bundles/" in n or n.endswith(".lock")]
    refused = run(kit_home, runs, "--save", NEWEST, "--run-id", "latest")
    assert refused.returncode == 2 and "names the link to the newest run" in refused.stderr


def test_a_terminal_sees_a_live_line_per_running_step(first_run, kit_home):
    """Under a pseudo-terminal the run draws each running step's cells and last kernel line."""
    # four models: the reload's work cell runs for seconds, not under the 0.5 s the drawing polls at
    models = "lenet,resnet_bn,lstm,embedding"
    args = ["--save", OLDEST, "--load", NEWEST, "--models", models, "--store", str(first_run["store"])]
    code, text = run_kit_in_terminal(
        "run", "--runs-dir", str(first_run["runs"]), "--run-id", "tty", *args, home=kit_home, timeout=600
    )
    assert code == 0, text[-3000:]
    # papermill's cell events, drawn while the step ran (the kernel's own lines beside them are drawn when a
    # poll catches one; tests/execute/test_progress.py proves those without a race)
    assert re.search(rf"reload:{re.escape(NEWEST)}: cell \d+/\d+ \d\d:\d\d", text), text[-3000:]
    assert f"[2/3] reload:{NEWEST}: ok" in text
    assert not list((first_run["runs"] / "tty").glob(".progress/*.json"))  # each step's file ends with it


def test_killed_run_is_resumed_without_redoing_finished_steps(first_run, kit_home):
    runs, store = first_run["runs"], first_run["store"]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kit",
            "run",
            "--runs-dir",
            str(runs),
            "--save",
            SAVE,
            "--run-id",
            "killed",
            "--store",
            str(store),
            "--jobs",
            "1",
        ],
        env=dict(os.environ, MXCOMPAT_HOME=str(kit_home)),
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    manifest_path = runs / "killed" / "run.json"
    deadline = time.monotonic() + 300
    while True:
        assert time.monotonic() < deadline and proc.poll() is None, "the run ended before it could be killed"
        try:
            steps = json.loads(manifest_path.read_text())["steps"]
        except (OSError, ValueError):
            steps = {}
        if sum(1 for s in steps.values() if s["kind"] == "reload" and s["status"] == "ok") == 1:
            break
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = json.loads(manifest_path.read_text())
    finished = [i for i, s in before["steps"].items() if s["status"] in ("ok", "cached")]
    assert "summary" not in finished and "exit_code" not in before
    done_reload = next(i for i in finished if i.startswith("reload:"))
    output = Path(before["steps"][done_reload]["output"])
    mtime = output.stat().st_mtime_ns

    resumed = run(kit_home, runs, "--resume", "killed")
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    assert f"{len(finished)} of 5 steps already finished" in resumed.stdout
    assert done_reload not in resumed.stdout  # not redone
    assert output.stat().st_mtime_ns == mtime
    after = json.loads(manifest_path.read_text())
    assert all(s["status"] in ("ok", "cached") for s in after["steps"].values()) and after["exit_code"] == 0
    assert comparable(read_records(runs / "killed")) == comparable(read_records(first_run["dir"]))
    assert not list((runs / "killed" / "records").glob("*.tmp-*"))


def _perturbed_store(src: Path, dest: Path, kit_home: Path) -> None:
    shutil.copytree(src, dest)
    scale_weight(kit_home, dest / OLDEST / "mlp" / "save_params" / "model.params", "dense1_weight", "w[::-1]")


def test_regressions_exit_1_unless_allowed_until_expiry(first_run, kit_home, tmp_path):
    store = tmp_path / "store"
    _perturbed_store(first_run["store"], store, kit_home)
    runs = tmp_path / "runs"
    args = ("--save", SAVE, "--load", NEWEST, "--models", "mlp", "--apis", "save_params", "--store", str(store))
    failing = run(kit_home, runs, *args, "--run-id", "bad")
    assert failing.returncode == 1, failing.stdout[-2000:]
    cell = f"mlp/save_params/{OLDEST}/{NEWEST}"
    assert f": 1 cell ({cell}): " in group_line(failing.stdout, "FAIL", "outputs of mlp moved past tolerance")
    junit = (runs / "bad" / "junit.xml").read_text()
    assert "<failure" in junit and "mismatch" in junit
    assert "## Cells that fail the run" in (runs / "bad" / "summary.md").read_text()

    allow = tmp_path / "allow.yml"
    allow.write_text(f"- cell: mlp/save_params/{OLDEST}/*\n  reason: known, tracked upstream\n  expires: 2999-01-01\n")
    allowed = run(kit_home, runs, *args, "--run-id", "allowed", "--allow-list", str(allow))
    assert allowed.returncode == 0, allowed.stdout[-2000:]
    assert f"({cell})" in group_line(allowed.stdout, "allowed", "outputs of mlp moved past tolerance")
    md = (runs / "allowed" / "summary.md").read_text()
    assert "known, tracked upstream" in md
    assert f"--models mlp --apis save_params --allow-list {allow} --store {store}`" in md  # reproduce: same verdicts
    allow.write_text(f"- cell: mlp/save_params/{OLDEST}/*\n  reason: known\n  expires: 2020-01-01\n")
    expired = run(kit_home, runs, *args, "--run-id", "expired", "--allow-list", str(allow))
    assert expired.returncode == 1


def _unknown_op(folder: Path) -> None:
    """An export whose graph names an operator no release has (rehashed: past the hash check)."""
    sym = folder / "model-symbol.json"
    graph = json.loads(sym.read_text())
    next(n for n in graph["nodes"] if n["op"] != "null")["op"] = "NoSuchOp"
    sym.write_text(json.dumps(graph))
    rehash(folder, sym.name)


def test_injected_failures_form_one_group_each_and_compare_names_the_new_one(first_run, kit_home, tmp_path):
    """Run "one" has one injected failure (mlp's weights reversed), run "two" a second one beside it (lenet's
    export names an unknown operator, and the C predict API loads that export too): two groups with exactly
    their cells, and `compare one two` reports the second signature alone."""
    one, two = tmp_path / "one", tmp_path / "two"
    _perturbed_store(first_run["store"], one, kit_home)
    shutil.copytree(one, two)
    _unknown_op(two / OLDEST / "lenet" / "export")
    runs = tmp_path / "runs"
    args = ("--save", SAVE, "--load", NEWEST, "--models", "mlp,lenet", "--apis", "save_params,export")
    assert run(kit_home, runs, *args, "--store", str(one), "--run-id", "one").returncode == 1
    proc = run(kit_home, runs, *args, "--store", str(two), "--run-id", "two")
    assert proc.returncode == 1, proc.stdout[-2000:]

    numeric, unknown = "outputs of mlp moved past tolerance", "Operator NoSuchOp is not registered"
    mlp_cell = f"mlp/save_params/{OLDEST}/{NEWEST}"
    lenet_cells = [f"lenet/c_predict/{OLDEST}/{NEWEST}", f"lenet/export/{OLDEST}/{NEWEST}"]
    assert f"({mlp_cell})" in group_line(proc.stdout, "FAIL", numeric)
    assert ": 2 cells: lenet via c_predict, export; " in group_line(proc.stdout, "FAIL", unknown)
    assert sum(x.startswith("FAIL ") for x in proc.stdout.splitlines()) == 2  # one line per group
    with open(runs / "two" / "records.csv") as f:
        signed = {(r["model"], r["api"], r["saved_with"]): r["signature"] for r in csv.DictReader(f) if r["signature"]}
    assert signed == {
        ("mlp", "save_params", OLDEST): numeric,
        ("lenet", "export", OLDEST): unknown,
        ("lenet", "c_predict", OLDEST): unknown,
    }
    md = (runs / "two" / "summary.md").read_text()
    assert (
        "**Exit code 1 (regressions found)**: 2 distinct backward incompatibilities (3 cells; 0 with a verified "
        "remedy, 2 without)." in md
    )  # an unknown operator and a perturbed weight: nothing a migrating user could change
    assert f"- `{unknown}`: saved with {OLDEST}; 2 cells (lenet; c_predict, export)" in md
    failures = [f for s in ET.parse(runs / "two" / "junit.xml").getroot() for c in s for f in c.findall("failure")]
    assert len(failures) == 3 and {f.get("message").split("] ")[1] for f in failures} == {
        f"infer-error: {unknown}",  # C predict fails at its first forward
        f"load-error: {unknown}",
        f"mismatch: {numeric}",
    }
    nb = nbformat.read(runs / "two" / "summary.ipynb", 4)
    shown = "".join(
        o.get("data", {}).get("text/html", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs
    )
    assert unknown in shown and f'<a href="reload/mxnet-{NEWEST}.ipynb">' in shown
    html = (runs / "two" / "summary.html").read_text()
    assert "summary.heatmaps(" not in html and "<details>" in html  # no code; per-cell tables collapse
    assert html.index("Exit code 1") < html.index("Verdicts by API") < html.index(unknown + "</td>")

    compared = run_cli("compare", "one", "two", "--runs-dir", str(runs), "--json", home=kit_home)
    assert compared.returncode == 1, compared.stdout + compared.stderr
    result = json.loads(compared.stdout)
    assert [(g["signature"], g["cells"]) for g in result["appeared"]] == [(unknown, lenet_cells)]
    assert result["disappeared"] == [] and result["changed"] == [] and len(result["unchanged"]) == 1
    back = run_cli("compare", "two", "one", "--runs-dir", str(runs), home=kit_home)
    assert back.returncode == 0 and back.stdout.splitlines()[1].startswith("DISAPPEARED [S-")


def test_a_broken_step_exits_3_and_the_run_goes_on(first_run, kit_home, tmp_path):
    """A release whose kernel cannot start: its reload step fails, the others still run."""
    home = tmp_path / "home"
    (home / "envs").mkdir(parents=True)
    for release in (OLDEST, NEWEST):
        (home / "envs" / release).symlink_to(kit_home / "envs" / release)
        shutil.copytree(
            kit_home / "jupyter" / "kernels" / f"mxnet-{release}", home / "jupyter" / "kernels" / f"mxnet-{release}"
        )
    spec_path = home / "jupyter" / "kernels" / f"mxnet-{OLDEST}" / "kernel.json"
    spec = json.loads(spec_path.read_text())
    spec["argv"][0] = "/nonexistent/python"
    spec_path.write_text(json.dumps(spec))
    proc = run(home, tmp_path / "runs", "--save", SAVE, "--store", str(first_run["store"]), "--run-id", "broken")
    assert proc.returncode == 3, proc.stdout[-2000:]
    manifest = json.loads((tmp_path / "runs" / "broken" / "run.json").read_text())
    assert manifest["steps"][f"reload:{OLDEST}"]["status"] == "failed"
    assert "nonexistent" in manifest["steps"][f"reload:{OLDEST}"]["error"]
    assert manifest["steps"][f"reload:{NEWEST}"]["status"] == "ok" and manifest["steps"]["summary"]["status"] == "ok"
    assert f"BROKEN step reload:{OLDEST}" in proc.stdout
    assert 'type="step-failed"' in (tmp_path / "runs" / "broken" / "junit.xml").read_text()


def test_two_runs_on_one_run_id_are_refused(first_run, kit_home):
    from kit.results.runs import Run

    held = Run(first_run["runs"], "first")
    held.lock()
    try:
        proc = run(kit_home, first_run["runs"], "--resume", "first")
    finally:
        held.unlock()
    assert proc.returncode == 2 and "in progress in another process" in proc.stderr


@pytest.mark.parametrize(
    "args,message",
    [
        (["--save", NEWEST, "--models", "mlp,nope"], "unknown model(s): nope"),
        (["--save", NEWEST, "--apis", "pickle"], "unknown API(s): pickle"),
        (["--save", NEWEST, "--load", OLDEST], "nothing to check"),
        (["--save", NEWEST, "--run-id", "first"], "run first already exists"),
        (["--save", NEWEST, "--allow-list", "/nonexistent.yml"], "cannot read allow-list"),
    ],
)
def test_run_usage_errors_with_environments(first_run, kit_home, args, message):
    proc = run(kit_home, first_run["runs"], *args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr
