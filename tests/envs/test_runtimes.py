"""Runtimes built for real: 1.9.1 on Python 3.13 with NumPy 2.1.3 (imports only under the runtime remedies),
1.7.0.post2's mxnet-native build (MKL-DNN off), 1.2.1 on Python 3.11 (cannot be made to import) and a remedy
that changes numbers (a fault injected into it); then a matrix over them, checked on the records' values."""

from __future__ import annotations

import json
import os

import pytest
from conftest import NEWEST, matrix_run, require_python, run_cli

pytestmark = pytest.mark.envs

NUMPY2 = "1.9.1+py3.13+numpy2.1.3"
NATIVE = "1.7.0.post2+native"
BROKEN = "1.2.1+py3.11+numpy1.23.5"  # 1.2.1's dataloader has a SyntaxError on Python 3.8+
SKEWED = "1.9.1+py3.12+numpy1.26.4"


def marker(kit_home, name) -> dict:
    return json.loads((kit_home / "envs" / name / "mxcompat-env.json").read_text())


@pytest.fixture(scope="module")
def created(kit_home):
    for minor in ("3.7", "3.12", "3.13"):
        require_python(minor)
    good = run_cli("env", "create", NUMPY2, NATIVE, home=kit_home, timeout=1200)
    bad = run_cli("env", "create", BROKEN, home=kit_home, timeout=900)
    return {"good": good, "bad": bad}


def test_a_numpy2_runtime_imports_under_the_remedies_its_errors_called_for(created, kit_home):
    assert created["good"].returncode == 0, created["good"].stdout + created["good"].stderr
    runtime = marker(kit_home, NUMPY2)["runtime"]
    assert runtime["verdict"] == "imports under remedy"
    assert "`np.PZERO` was removed in the NumPy 2.0 release" in runtime["error"]  # the bare import, verbatim
    remedies = {r["name"]: r for r in runtime["remedies"]}
    assert set(remedies) == {"numpy-names", "distutils"}
    names = remedies["numpy-names"]["names"]
    assert names["PZERO"] == "0.0" and names["NINF"] == "-np.inf" and names["round_"] == "np.round"
    assert names["product"] == "np.prod" and names["pv"] == "removed"
    assert len(names) >= 15  # found by trying, one import at a time
    assert remedies["distutils"]["paste"] == ['pip install "setuptools<81"']
    assert "np.PZERO = 0.0" in remedies["numpy-names"]["paste"]
    verified = runtime["verified"]
    assert verified["ok"] and verified["against"] == NEWEST and verified["operators"] == 14
    assert verified["max_abs"] < 1e-6 and not verified["differ"] and not verified["fails"]
    probe = marker(kit_home, NUMPY2)["probe"]
    assert probe["numpy"] == "2.1.3" and probe["python"].startswith("3.13") and probe["mxnet"] == "1.9.1"
    assert probe["runtime_fix"]["aliases"] == sorted(names)
    assert "imports under remedy numpy-names (" in created["good"].stderr  # each build says how it imports


def test_a_flavour_runtime_is_the_same_release_in_another_build(created, kit_home):
    runtime = marker(kit_home, NATIVE)
    assert runtime["runtime"]["verdict"] == "imports" and runtime["runtime"]["remedies"] == []
    assert runtime["release"]["requirements"][0] == "mxnet-native==1.7.0"
    assert "MKLDNN" not in runtime["probe"]["mxnet_features"]
    assert "MKLDNN" in marker(kit_home, "1.7.0.post2")["probe"]["mxnet_features"]  # built first, as its canonical
    assert runtime["runtime"]["verified"]["ok"] and runtime["runtime"]["verified"]["against"] == "1.7.0.post2"
    listed = run_cli("env", "list", home=kit_home, check=True).stdout
    row = next(line for line in listed.splitlines() if line.startswith(NATIVE))
    assert "ready" in row and "imports; reproduces 1.7.0.post2" in row


def test_a_runtime_no_remedy_makes_import_fails_with_its_error_verbatim(created, kit_home):
    bad = created["bad"]
    assert bad.returncode == 3
    assert f"runtime {BROKEN} does not import" in bad.stderr
    assert "SyntaxError: 'yield' inside list comprehension" in bad.stderr
    assert marker(kit_home, BROKEN)["runtime"]["verdict"] == "does not import"
    doctor = run_cli("env", "doctor", BROKEN, home=kit_home)
    assert doctor.returncode == 3 and "runtime does not import: SyntaxError" in doctor.stdout


def test_a_remedy_that_changes_outputs_is_reported_as_failing(created, kit_home):
    proc = run_cli(
        "env", "create", SKEWED, home=kit_home, env={**os.environ, "MXCOMPAT_FAULT": "skew:runtime-fix"}, timeout=900
    )
    assert proc.returncode == 3
    assert f"runtime {SKEWED} imports under remedies numpy-names, distutils but does not reproduce 1.9.1" in (
        proc.stderr
    )
    runtime = marker(kit_home, SKEWED)["runtime"]
    assert runtime["verdict"] == "remedy changes outputs"
    assert runtime["verified"]["differ"]["dense"] == pytest.approx(0.01, abs=1e-4)  # the injected skew, measured
    assert not list((kit_home / "jupyter" / "kernels").glob("mxnet-1.9.1_py3.12*"))  # no kernel runs it
    listed = run_cli("env", "list", home=kit_home, check=True).stdout
    assert "remedy changes outputs" in next(line for line in listed.splitlines() if line.startswith(SKEWED))


@pytest.fixture(scope="module")
def runtimes_run(created, kit_home, tmp_path_factory):
    return matrix_run(
        kit_home,
        tmp_path_factory,
        "runtimes",
        save=f"1.7.0.post2,{NEWEST},{NUMPY2}",
        load=f"1.7.0.post2,{NEWEST},{NUMPY2},{NATIVE},{BROKEN}",
        models="lenet,lstm",
        more=("--apis", "export,save_parameters,module_checkpoint"),
    )


def test_runtime_cells_load_the_release_artifacts_both_ways(runtimes_run):
    proc, records = runtimes_run["proc"], runtimes_run["records"]
    assert proc.returncode == 0, proc.stdout + proc.stderr  # runtime cells are reported apart by default
    for model in ("lenet", "lstm"):
        for api in ("export", "save_parameters", "module_checkpoint"):
            there = records[(NEWEST, model, api, NUMPY2)]  # 1.9.1's file read under NumPy 2
            back = records[(NUMPY2, model, api, NEWEST)]  # written under NumPy 2, read under 1.23.5
            for rec in (there, back):
                assert rec["direction"] == "runtime"
                assert rec["verdict"] == "identical", rec.get("reason")
                assert rec["summary"]["max_abs"] == 0.0
            assert there["loaded_fingerprint"]["numpy"] == "2.1.3"
            assert there["loaded_fingerprint"]["runtime_fix"]["aliases"]
            assert back["saved_fingerprint"]["numpy"] == "2.1.3"
            native = records[("1.7.0.post2", model, api, NATIVE)]
            assert native["direction"] == "runtime" and native["verdict"] in ("identical", "close")
            older = records[("1.7.0.post2", model, api, NUMPY2)]
            assert older["direction"] == "backward" and older["verdict"] in ("identical", "close")
    assert not any(BROKEN in key for key in records)  # it runs nothing
    assert f"NOT CHECKED --runtime {BROKEN}: runtime does not import: SyntaxError" in proc.stdout


def test_the_summary_shows_every_runtime(runtimes_run):
    summary = (runtimes_run["dir"] / "summary.md").read_text()
    assert f"runtimes: {NUMPY2} imports under remedy numpy-names, distutils (reproduces 1.9.1)" in summary
    section = summary.split("## Runtimes", 1)[1].split("\n## ", 1)[0]
    rows = {line.split(" | ")[0].strip("| "): line for line in section.splitlines() if line.startswith("| 1.")}
    assert set(rows) == {NUMPY2, NATIVE, BROKEN}
    assert "| imports under remedy | numpy-names, distutils | yes (14 operators" in rows[NUMPY2]
    assert "| does not import |" in rows[BROKEN] and "SyntaxError" in rows[BROKEN]
    assert "| off |" in rows[NATIVE]  # MKLDNN
    assert "np.PZERO = 0.0" in section and 'pip install "setuptools<81"' in section
    manifest = json.loads((runtimes_run["dir"] / "run.json").read_text())
    assert manifest["steps"]["summary"]["status"] == "ok"
    nb = json.loads((runtimes_run["dir"] / "summary.ipynb").read_text())
    shown = "".join("".join(o.get("data", {}).get("text/html", "")) for c in nb["cells"] for o in c.get("outputs", []))
    assert NUMPY2 in shown and "imports under remedy" in shown


def test_report_json_and_strict_runtimes(runtimes_run, kit_home):
    runs = runtimes_run["runs"]
    report = run_cli("report", "runtimes", "--json", "--runs-dir", str(runs), home=kit_home, check=True)
    payload = json.loads(report.stdout)
    by_name = {r["runtime"]: r for r in payload["runtimes"]}
    assert by_name[NUMPY2]["imports"] == "imports under remedy"
    assert [r["name"] for r in by_name[NUMPY2]["remedies"]] == ["numpy-names", "distutils"]
    assert by_name[BROKEN]["imports"] == "does not import"
    strict = run_cli(
        "run",
        "--runs-dir",
        str(runs),
        "--store",
        str(runtimes_run["store"]),
        "--load",
        f"{NEWEST},{BROKEN}",
        "--cells",
        "lenet:export",
        "--strict-runtimes",
        "--run-id",
        "strict",
        home=kit_home,
    )
    assert strict.returncode == 1, strict.stdout + strict.stderr  # the runtime that does not import decides it


def test_a_runtime_without_wheels_for_its_python_is_refused_before_any_work(kit_home):
    proc = run_cli("env", "create", "1.9.1+py3.12", home=kit_home, timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "runtime '1.9.1+py3.12' does not exist on Python 3.12" in proc.stderr
    assert "numpy==1.23.5" in proc.stderr  # the release's own numpy has no wheel for 3.12
    assert "numpy1.26.4 on 3.12" in proc.stderr
    assert not (kit_home / "envs" / "1.9.1+py3.12").exists()


def test_a_bundle_of_a_runtime_cell_says_how_the_runtime_imports(runtimes_run, kit_home):
    import zipfile

    cell = f"lenet/export/{NEWEST}/{NUMPY2}"
    proc = run_cli("bundle", "runtimes", "--cell", cell, "--runs-dir", str(runtimes_run["runs"]), home=kit_home)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with zipfile.ZipFile(proc.stdout.strip().splitlines()[-1]) as z:
        readme = z.read(next(n for n in z.namelist() if n.endswith("README.md"))).decode()
    assert f"Runtime `{NUMPY2}` (Python 3.13, numpy 2.1.3): imports under remedy numpy-names, distutils." in readme
    assert "np.PZERO = 0.0" in readme and "runtime direction" in readme


def test_check_model_loads_a_checkpoint_in_a_runtime(created, kit_home, tmp_path):
    import subprocess

    from test_check_model import DETECTOR, DETECTOR_ARGS

    python = kit_home / "envs" / NEWEST / "bin" / "python"
    subprocess.run([str(python), "-c", DETECTOR, str(tmp_path / "detector")], check=True, capture_output=True)
    proc = run_cli(
        "check-model",
        str(tmp_path / "detector"),
        *DETECTOR_ARGS,
        "--label-names",
        "cls_label",
        "--saved-with",
        NEWEST,
        "--load",
        NUMPY2,
        "--store",
        str(tmp_path / "store"),
        "--runs-dir",
        str(tmp_path / "runs"),
        "--run-id",
        "cm",
        home=kit_home,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [record] = [json.loads(p.read_text()) for p in (tmp_path / "runs" / "cm" / "records").glob("[!.]*.json")]
    assert record["direction"] == "runtime" and record["loaded_with"] == NUMPY2
    assert record["verdict"] == "identical" and record["summary"]["max_abs"] == 0.0


def test_a_switch_runtime_sets_its_variable_in_its_kernel_and_programs(kit_home):
    name = "1.9.1+MXNET_MKLDNN_ENABLED=0"
    run_cli("env", "create", name, home=kit_home, check=True, timeout=900)
    built = marker(kit_home, name)
    assert built["runtime"]["verdict"] == "imports"  # a switch is no remedy: the runtime is usable as it is
    # measured: 1.9.1 with MKL-DNN switched off cannot run the fused LSTM operator on the CPU at all
    verified = built["runtime"]["verified"]
    assert not verified["ok"] and list(verified["fails"]) == ["lstm"] and not verified["differ"]
    assert "Check failed: in_data.size() == num_inputs (4 vs. 3)" in verified["fails"]["lstm"]
    listed = run_cli("env", "list", home=kit_home, check=True).stdout
    assert "imports; differs from 1.9.1: lstm: MXNetError: Check failed" in listed
    assert built["probe"]["env"]["MXNET_MKLDNN_ENABLED"] == "0"  # the probe ran with the switch set
    assert built["probe"]["runtime_fix"] == {"aliases": [], "switches": ["MXNET_MKLDNN_ENABLED=0"]}
    [spec] = list((kit_home / "jupyter" / "kernels").glob("mxnet-1.9.1_mxnet_mkldnn_enabled_0-*/kernel.json"))
    assert json.loads(spec.read_text())["env"] == {"MXNET_MKLDNN_ENABLED": "0"}


def test_the_lines_a_user_pastes_make_the_runtime_import_without_the_kit(created, kit_home):
    import subprocess

    python = str(kit_home / "envs" / NUMPY2 / "bin" / "python")
    env = {**os.environ, "MXCOMPAT_RUNTIME_FIX": "off"}  # the kit's own remedy off: the bare runtime
    bare = subprocess.run([python, "-c", "import mxnet"], capture_output=True, text=True, env=env, cwd="/")
    assert bare.returncode != 0 and "`np.PZERO` was removed" in bare.stderr
    [remedy] = [r for r in marker(kit_home, NUMPY2)["runtime"]["remedies"] if r["name"] == "numpy-names"]
    script = "\n".join(remedy["paste"]) + "\nprint(mx.__version__, mx.nd.ones((2,)).sum().asscalar())\n"
    pasted = subprocess.run([python, "-c", script], capture_output=True, text=True, env=env, cwd="/")
    assert pasted.returncode == 0, pasted.stderr[-2000:]
    assert pasted.stdout.split() == ["1.9.1", "2.0"]
