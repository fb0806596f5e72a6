#!/usr/bin/env python
"""Time to the answer of the commands a user waits for: ``check-model`` of a small third-party checkpoint
(reference in one release, loaded in another) and ``investigate`` of one of its cells, against the two bare
interpreters that do the same work (``import mxnet``, load the checkpoint, one forward, in each release).

A conv-BN-relu-pool-FC-SoftmaxOutput Module checkpoint is saved by --saved-with; then, in turns, --rounds
times: the two bare interpreters one after the other, ``mxcompat check-model PREFIX --saved-with A --load B``,
and ``mxcompat investigate`` of its B cell. Medians and ratios.

    .venv/bin/python bench/interactive_bench.py [--saved-with 1.4.1] [--load 1.9.1] [--rounds 3] [--warm]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PY = sys.executable
sys.path.insert(0, str(REPO))

from demo_bench import commit_of  # noqa: E402

from kit.envs.manager import EnvManager  # noqa: E402
from kit.home import KitHome  # noqa: E402

CHECKPOINT = """
import sys
import mxnet as mx
x = mx.sym.Convolution(mx.sym.var("data"), num_filter=8, kernel=(3, 3), pad=(1, 1), name="conv")
x = mx.sym.Activation(mx.sym.BatchNorm(x, name="bn"), act_type="relu")
x = mx.sym.Pooling(x, kernel=(2, 2), stride=(2, 2), pool_type="max")
x = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(mx.sym.Flatten(x), num_hidden=3, name="fc"), name="softmax")
mod = mx.mod.Module(x, data_names=["data"], label_names=["softmax_label"])
mod.bind(data_shapes=[("data", (2, 3, 16, 16))], label_shapes=[("softmax_label", (2,))], for_training=False)
mx.random.seed(3)
mod.init_params(initializer=mx.init.Xavier())
mod.save_checkpoint(sys.argv[1], 1)
"""

#: what a user does by hand in each release: import, load, one forward
BARE = """
import sys
import mxnet as mx
import numpy as np
sym, arg, aux = mx.model.load_checkpoint(sys.argv[1], 1)
mod = mx.mod.Module(sym, data_names=["data"], label_names=None)
mod.bind(data_shapes=[("data", (2, 3, 16, 16))], for_training=False)
mod.set_params(arg, aux, allow_missing=True)
mod.forward(mx.io.DataBatch([mx.nd.array(np.random.RandomState(0).rand(2, 3, 16, 16))]), is_train=False)
print(mod.get_outputs()[0].asnumpy().sum())
"""


def timed(command: list[str], env: dict | None = None) -> float:
    started = time.monotonic()
    proc = subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO)
    if proc.returncode not in (0, 1):
        raise RuntimeError(
            f"{' '.join(command[:4])} exited {proc.returncode}:\n{proc.stdout[-1500:]}\n{proc.stderr[-1500:]}"
        )
    return round(time.monotonic() - started, 3)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--saved-with", default="1.4.1")
    parser.add_argument("--load", default="1.9.1")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--home", default=str(REPO / ".kit"))
    parser.add_argument(
        "--warm",
        action="store_true",
        help="also time check-model with `mxcompat warm` keeping the loading release's and the summary's kernels "
        "started (the keeper started before that command and stopped after it, untimed)",
    )
    args = parser.parse_args(argv)
    home = Path(args.home)
    manager = EnvManager(KitHome(home))
    pythons = [str(manager.get(r).python) for r in (args.saved_with, args.load)]
    env = dict(os.environ, MXCOMPAT_HOME=str(home))
    work = Path(tempfile.mkdtemp(prefix="interactive-bench-"))
    try:
        prefix = work / "detector"
        subprocess.run([pythons[0], "-c", CHECKPOINT, str(prefix)], check=True, capture_output=True)
        rounds = []
        for i in range(args.rounds):  # in turns: the machine's noise falls on all alike
            bare = [timed([python, "-c", BARE, str(prefix)]) for python in pythons]
            store, runs = work / f"store-{i}", work / "runs"
            check = timed([PY, "-m", "kit", "check-model", str(prefix), "--epoch", "1", "--input", "data:2,3,16,16",
                           "--label-names", "softmax_label", "--saved-with", args.saved_with, "--load", args.load,
                           "--store", str(store), "--runs-dir", str(runs), "--run-id", f"check-{i}"], env)  # fmt: skip
            cell = f"detector/checkpoint/{args.saved_with}/{args.load}"
            investigate = timed([PY, "-m", "kit", "investigate", f"check-{i}", "--cell", cell, "--runs-dir",
                                 str(runs)], env)  # fmt: skip
            rounds.append({"bare": bare, "bare_total": round(sum(bare), 3), "check_model": check,
                           "investigate": investigate})  # fmt: skip
            if args.warm:
                subprocess.run([PY, "-m", "kit", "warm", "start", args.load], env=env, check=True, capture_output=True)
                try:
                    rounds[-1]["check_model_warm"] = timed(
                        [PY, "-m", "kit", "check-model", str(prefix), "--epoch", "1", "--input", "data:2,3,16,16",
                         "--label-names", "softmax_label", "--saved-with", args.saved_with, "--load", args.load,
                         "--store", str(work / f"store-warm-{i}"), "--runs-dir", str(runs), "--run-id",
                         f"warm-{i}"], env)  # fmt: skip
                    notebook = runs / f"warm-{i}" / "reload" / f"mxnet-{args.load}.ipynb"
                    rounds[-1]["warm_kernel_taken"] = "mxcompat warm" in notebook.read_text()
                finally:
                    subprocess.run([PY, "-m", "kit", "warm", "stop"], env=env, capture_output=True)
            print(f"round {i + 1}: {json.dumps(rounds[-1])}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    def median(key):
        return statistics.median(r[key] for r in rounds)

    result = {
        "what": "time to the answer: check-model of a small checkpoint and investigate of its cell, against the two "
        "bare interpreters (import mxnet, load, forward) in the saving and the loading release",
        "saved_with": args.saved_with,
        "load": args.load,
        "rounds": rounds,
        "commit": commit_of(REPO),
        "cpus": os.cpu_count(),
        "median": {k: median(k) for k in ("bare_total", "check_model", "investigate")},
        "check_model_over_bare": round(median("check_model") / median("bare_total"), 2),
        **(
            {
                "check_model_warm": median("check_model_warm"),
                "check_model_warm_over_bare": round(median("check_model_warm") / median("bare_total"), 2),
            }
            if args.warm
            else {}
        ),
        "investigate_over_bare": round(median("investigate") / median("bare_total"), 2),
        "targets": {"check_model_over_bare": 2.0},
    }
    target = REPO / "bench" / "results" / f"interactive-{time.strftime('%Y%m%d-%H%M%S')}.json"
    target.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "rounds"}, indent=1))
    print(f"-> {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
