#!/usr/bin/env python
"""What a runtime costs: building it (with its remedies found and verified), and its cells in a matrix.

In a fresh kit home (the uv cache as it is: say whether it was warm), builds the canonical releases, then the
runtimes, and reads from each environment's marker its build time, how long finding its remedies took and in
how many imports, and its verification against its release. Then runs one matrix that saves with the
releases (and the NumPy 2 runtime) and loads in the releases and every runtime, and records the wall, each
reload step's time (a runtime's beside its release's) and the cells' verdicts per direction.

With ``--onnx``: whether a remedied runtime (NumPy >= 1.24) lets MXNet and ONNX Runtime share one
interpreter, and what the ONNX path would gain: onnxruntime and 1.9.1's exporter pins installed into
``1.9.1+py3.12+numpy1.26.4``, one model exported, then ONNX Runtime started and run in the kernel's own
interpreter against the kit's worker process in the ONNX Runtime environment (start, first run, each run).

    .venv/bin/python bench/runtime_bench.py [--releases 1.6.0,1.7.0.post2,1.9.1] [--runtimes R,...] [--onnx]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from demo_bench import commit_of  # noqa: E402

PY = str(REPO / ".venv" / "bin" / "python")
RUNTIMES = "1.9.1+py3.12+numpy1.26.4,1.9.1+py3.13+numpy2.1.3,1.6.0+mkl,1.7.0.post2+native"
SAVE_RUNTIME = "1.9.1+py3.13+numpy2.1.3"

ONNX_PROBE = r"""
import json, os, sys, tempfile, time
import numpy as np
started = time.monotonic()
import mxnet as mx
import onnxruntime as ort
imported = time.monotonic() - started
from kit.kernel.exits import runtime_client

net = mx.gluon.nn.HybridSequential()
net.add(mx.gluon.nn.Conv2D(8, 3, activation="relu"), mx.gluon.nn.MaxPool2D(), mx.gluon.nn.Dense(10))
net.initialize(mx.init.Xavier(rnd_type="gaussian"))
net.hybridize()
x = np.random.RandomState(0).rand(4, 1, 28, 28).astype(np.float32)
net(mx.nd.array(x))
folder = tempfile.mkdtemp()
net.export(os.path.join(folder, "m"))
path = mx.onnx.export_model(os.path.join(folder, "m-symbol.json"), os.path.join(folder, "m-0000.params"),
                            [x.shape], np.float32, os.path.join(folder, "m.onnx"))
name = ort.InferenceSession(path).get_inputs()[0].name
out = {"import_mxnet_and_onnxruntime_s": imported}
t = time.monotonic()
s = ort.InferenceSession(path)
a = s.run(None, {name: x})
out["in_process_first_s"] = time.monotonic() - t
t = time.monotonic()
for _ in range(50):
    s.run(None, {name: x})
out["in_process_per_run_s"] = (time.monotonic() - t) / 50
runtime_client.configure("onnxruntime", sys.argv[1])
t = time.monotonic()
w = runtime_client.session("onnxruntime", path, [name])
b = w.run({name: x})
out["worker_first_s"] = time.monotonic() - t
t = time.monotonic()
for _ in range(50):
    w.run({name: x})
out["worker_per_run_s"] = (time.monotonic() - t) / 50
out["max_abs_between"] = float(np.abs(a[0] - b[0]).max())
out["max_abs_vs_mxnet"] = float(np.abs(a[0] - net(mx.nd.array(x)).asnumpy()).max())
runtime_client.close()
print("BENCH " + json.dumps(out))
"""


def cli(home: Path, *args, env=None, check=True) -> subprocess.CompletedProcess:
    full = dict(os.environ, MXCOMPAT_HOME=str(home), **(env or {}))
    proc = subprocess.run([PY, "-m", "kit", *args], capture_output=True, text=True, env=full, cwd=REPO)
    if check and proc.returncode not in (0, 1):
        raise SystemExit(f"mxcompat {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


def marker(home: Path, name: str) -> dict:
    return json.loads((home / "envs" / name / "mxcompat-env.json").read_text())


def builds(home: Path, releases: list[str], runtimes: list[str]) -> dict:
    out = {}
    started = time.monotonic()
    cli(home, "env", "create", *releases)
    out["releases_wall_s"] = round(time.monotonic() - started, 1)
    started = time.monotonic()
    proc = cli(home, "env", "create", *runtimes, check=False)
    out["runtimes_wall_s"] = round(time.monotonic() - started, 1)
    out["runtimes_exit"] = proc.returncode
    for name in releases + runtimes:
        m = marker(home, name)
        runtime = m.get("runtime") or {}
        out[name] = {
            "build_s": m.get("build_seconds"),
            "verdict": runtime.get("verdict"),
            "settle_s": runtime.get("settle_seconds"),
            "imports_tried": runtime.get("tries"),
            "remedies": [r["name"] for r in runtime.get("remedies", [])],
            "names_given_back": len(
                next((r.get("names", {}) for r in runtime.get("remedies", []) if "names" in r), {})
            ),
            "verified": runtime.get("verified"),
            "python": (m.get("probe") or {}).get("python"),
            "numpy": (m.get("probe") or {}).get("numpy"),
            "mkldnn": "MKLDNN" in ((m.get("probe") or {}).get("mxnet_features") or []),
        }
    return out


def matrix(home: Path, releases: list[str], runtimes: list[str], tmp: Path) -> dict:
    save = releases + [SAVE_RUNTIME] if SAVE_RUNTIME in runtimes else releases
    started = time.monotonic()
    cli(
        home,
        "run",
        "--save",
        ",".join(save),
        "--load",
        ",".join(releases + runtimes),
        "--jobs",
        "2",
        "--runs-dir",
        str(tmp / "runs"),
        "--store",
        str(tmp / "store"),
        "--run-id",
        "runtimes",
    )
    wall = time.monotonic() - started
    run = tmp / "runs" / "runtimes"
    manifest = json.loads((run / "run.json").read_text())
    steps = {k: v.get("seconds") for k, v in manifest["steps"].items()}
    counts: dict = {}
    per_loader: dict = {}
    for path in (run / "records").glob("[!.]*.json"):
        rec = json.loads(path.read_text())
        counts.setdefault(rec["direction"], {}).setdefault(rec["verdict"], 0)
        counts[rec["direction"]][rec["verdict"]] += 1
        mine = per_loader.setdefault(rec["loaded_with"], {"cells": 0, "max_abs": 0.0})
        mine["cells"] += 1
        max_abs = (rec.get("summary") or {}).get("max_abs")
        if max_abs is not None:
            mine["max_abs"] = max(mine["max_abs"], max_abs)
    return {
        "wall_s": round(wall, 1),
        "steps_s": steps,
        "verdicts": counts,
        "per_loader": per_loader,
        "summary_headline": (run / "summary.md").read_text().split("\n\n")[2],
    }


def onnx_same_interpreter(home: Path) -> dict:
    """onnxruntime and 1.9.1's exporter pins installed into the remedied 1.9.1+py3.12+numpy1.26.4."""
    name = "1.9.1+py3.12+numpy1.26.4"
    python = home / "envs" / name / "bin" / "python"
    from kit.envs.onnx_path import EXPORTER_PINS, RUNTIME_NAME
    from kit.envs.uv import uv_binary

    cli(home, "env", "create", RUNTIME_NAME)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as over:
        over.write("numpy==1.26.4\n")
    # the exporter's own pins first (they hold protobuf at 3.20.3), then onnx without its protobuf pin,
    # and an onnx with Python 3.12 wheels that still has onnx.mapping (the 1.9.1 exporter imports it; 1.19 removed it)
    tries = [
        list(EXPORTER_PINS["1.9.1"]),
        [p for p in EXPORTER_PINS["1.9.1"] if not p.startswith("protobuf")],
        ["onnx==1.16.2"],
    ]
    out: dict = {"tries": []}
    for pins in tries:
        started = time.monotonic()
        argv = [uv_binary(), "pip", "install", "--python", str(python), "--override", over.name]
        install = subprocess.run(argv + ["onnxruntime==1.32.0", *pins], capture_output=True, text=True)
        out["tries"].append(
            {
                "requirements": ["onnxruntime==1.32.0", *pins],
                "exit": install.returncode,
                "seconds": round(time.monotonic() - started, 1),
                "tail": install.stderr.strip().splitlines()[-3:],
            }
        )
        if install.returncode == 0:
            break
    else:
        return out
    worker = home / "envs" / RUNTIME_NAME / "bin" / "python"
    proc = subprocess.run([str(python), "-c", ONNX_PROBE, str(worker)], capture_output=True, text=True, cwd="/")
    answer = [line[6:] for line in proc.stdout.splitlines() if line.startswith("BENCH ")]
    out.update(json.loads(answer[-1]) if answer else {"error": proc.stderr.strip().splitlines()[-5:]})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--releases", default="1.6.0,1.7.0.post2,1.9.1")
    ap.add_argument("--runtimes", default=RUNTIMES)
    ap.add_argument("--onnx", action="store_true", help="also measure ONNX Runtime in a remedied runtime")
    ap.add_argument("--only-onnx", action="store_true", help="build 1.9.1 and its Python 3.12 runtime, then --onnx")
    ap.add_argument("--uv-cache", default="warm", help="what the uv cache was: written into the JSON")
    ap.add_argument("--out", help="JSON to write (default bench/results/runtimes-<timestamp>.json)")
    args = ap.parse_args()
    releases, runtimes = args.releases.split(","), args.runtimes.split(",")
    with tempfile.TemporaryDirectory(prefix="mxcompat-runtime-bench-") as tmp:
        home = Path(tmp) / "home"
        result = {
            "commit": commit_of(REPO),
            "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "machine": {"cpus": os.cpu_count()},
            "uv_cache": args.uv_cache,
        }
        if args.only_onnx:
            result["builds"] = builds(home, ["1.9.1"], ["1.9.1+py3.12+numpy1.26.4"])
        else:
            result["builds"] = builds(home, releases, runtimes)
            result["matrix"] = matrix(home, releases, runtimes, Path(tmp))
        if args.onnx or args.only_onnx:
            result["onnx_same_interpreter"] = onnx_same_interpreter(home)
    out = Path(args.out) if args.out else REPO / "bench" / "results" / f"runtimes-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    print(f"written: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
