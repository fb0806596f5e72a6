#!/usr/bin/env python
"""What the exits out of MXNet cost and give: their environments (size, build time) and one matrix through them.

In a fresh kit home (the uv cache as it is: the result says whether torch's wheel was in it), builds 1.9.1, the exporter
(``onnx-1.9.1``) and the three runtimes (``onnxruntime``, ``openvino``, ``torch``) and reads each environment's
build time from its marker and its size from the disk. Then runs one matrix: 1.9.1's graphs of LeNet, ResNet-BN,
the LSTM and the families (PReLU, SoftmaxActivation, BiGRU, a converted checkpoint's ignored gamma and misread
defaults, LRN's knorm) out through ``--load onnx,openvino,torch``, and
records per (model, exit) the verdict, the remedy that made it leave and its max abs error, and the wall.

    .venv/bin/python bench/exits_bench.py
"""

from __future__ import annotations

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
ENVS = ("onnx-1.9.1", "onnxruntime", "openvino", "torch")
MODELS = "lenet,resnet_bn,lstm,families"


def size_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def torch_wheel_cached() -> bool:
    cache = Path(os.environ.get("UV_CACHE_DIR", Path.home() / ".cache" / "uv"))
    return any(cache.glob("wheels-v*/pypi/torch"))  # a torch wheel, of whichever version


def main() -> int:
    home = Path(tempfile.mkdtemp(prefix="exits-bench-"))
    env = dict(os.environ, MXCOMPAT_HOME=str(home))
    out = {"commit": commit_of(REPO), "torch_wheel_in_uv_cache": torch_wheel_cached(), "envs": {}}
    started = time.monotonic()
    create = [PY, "-m", "kit", "env", "create", "1.9.1", "onnx", "openvino", "torch"]
    subprocess.run(create, env=env, check=True, cwd=REPO)
    out["env_create_wall_s"] = round(time.monotonic() - started, 1)
    for name in ENVS:
        marker = json.loads((home / "envs" / name / "mxcompat-env.json").read_text())
        out["envs"][name] = {
            "build_s": marker["build_seconds"],
            "bytes": size_bytes(home / "envs" / name),
            "requirements": marker["release"]["requirements"],
        }
    runs = home / "runs"
    started = time.monotonic()
    proc = subprocess.run(
        [PY, "-m", "kit", "run", "--save", "1.9.1", "--models", MODELS, "--apis", "export,module_checkpoint",
         "--load", "onnx,openvino,torch", "--runs-dir", str(runs), "--run-id", "exits"],
        env=env, cwd=REPO, capture_output=True, text=True,
    )  # fmt: skip
    out["matrix"] = {"wall_s": round(time.monotonic() - started, 1), "exit_code": proc.returncode, "cells": {}}
    for path in sorted((runs / "exits" / "records").glob("[!.]*.json")):
        rec = json.loads(path.read_text())
        if rec.get("direction") != "onnx":
            continue
        remedy = rec.get("remedy") or {}
        summary = rec.get("summary") or remedy.get("summary") or {}
        out["matrix"]["cells"][f"{rec['model']}:{rec['api']}"] = {
            "verdict": rec["verdict"],
            "remedy": remedy.get("name") if remedy.get("fixed") else None,
            "remedy_verdict": remedy.get("verdict"),
            "max_abs": summary.get("max_abs"),
            # a file that ran with wrong numbers: those as exported, then the remedy's
            "as_exported": (rec.get("summary") or {}) if rec["verdict"] in ("drift", "mismatch") else None,
            "remedy_max_abs": (remedy.get("summary") or {}).get("max_abs") if remedy.get("fixed") else None,
            "blocked_by": None if remedy.get("fixed") or rec["verdict"] in ("identical", "close") else rec.get("error"),
        }
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = REPO / "bench" / "results" / f"exits-{stamp}.json"
    target.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({k: v for k, v in out.items() if k != "matrix"}, indent=1))
    print(f"{len(out['matrix']['cells'])} cells in {out['matrix']['wall_s']} s -> {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
