"""The end-to-end design's speed claim, in one release: fused graph against transforms run separately.

``fused``: ``e2e_resnet18`` exported and imported back as a ``SymbolBlock``, so
Resize(224), ToTensor, Normalize and ResNet-18 run as one graph. ``separate``:
the same transforms as eager (not hybridized) blocks, then the network alone
(hybridized), as a serving script without the fused design does it. Both on the
same weights; inputs are uniform 0-255 uint8 HWC images. Runs of the two modes
alternate, so a noisy machine slows both alike.

``python -m kit.kernel.entry.e2e_timing '{"runs": 20, "warmup": 3, "batch": 25}'`` prints one JSON line.
"""

import json
import os
import platform
import shutil
import sys
import tempfile
import time

import numpy as np

from kit.common.capabilities import has_feature

SINGLE_SHAPE = (1, 300, 300, 3)


def unsupported(release):
    """``None`` when ``release`` can fuse Resize into a graph, else why not."""
    ok, reason = has_feature(release, "batched_image_transforms")
    return None if ok else reason


def _models(release, folder):
    import mxnet as mx
    from mxnet import gluon

    from kit.kernel.models import vision_zoo

    mx.random.seed(0)
    net = vision_zoo.build_e2e_resnet18(release)
    net.initialize(mx.init.Xavier(), ctx=mx.cpu())
    net.hybridize()
    net(mx.nd.array(np.zeros(SINGLE_SHAPE, dtype=np.uint8), dtype=np.uint8))
    prefix = os.path.join(folder, "e2e")
    net.export(prefix)
    fused = gluon.SymbolBlock.imports(prefix + "-symbol.json", ["data"], prefix + "-0000.params", ctx=mx.cpu())
    return fused, vision_zoo.eager_front(), net.classifier


def _time(fn, x):
    started = time.perf_counter()
    fn(x).wait_to_read()
    return time.perf_counter() - started


def _stats(seconds, batch):
    a = np.array(seconds, dtype=np.float64)
    return {
        "runs": len(seconds),
        "mean_seconds": float(a.mean()),
        "median_seconds": float(np.median(a)),
        "std_seconds": float(a.std()),
        "min_seconds": float(a.min()),
        "per_sample_ms": float(a.mean() / batch * 1000.0),
        "per_sample_ms_median": float(np.median(a) / batch * 1000.0),
    }


def measure(release, runs=20, warmup=3, batch=25, seed=0):
    """Timings for a single request and a batch, both modes; ``{"unsupported": reason}`` where it cannot fuse."""
    import mxnet as mx

    out = {
        "release": release,
        "mxnet_version": mx.__version__,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "runs": runs,
        "warmup": warmup,
        "batch_size": batch,
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "mkldnn": _mkldnn(),
    }
    reason = unsupported(release)
    if reason:
        out["unsupported"] = reason
        return out
    folder = tempfile.mkdtemp(prefix="e2e-timing-")
    try:
        fused, eager, network = _models(release, folder)
        rng = np.random.RandomState(seed)
        modes = {"fused": lambda x: fused(x), "separate": lambda x: network(eager(x))}
        for case, shape in (("single", SINGLE_SHAPE), ("batch", (batch,) + SINGLE_SHAPE[1:])):
            x = mx.nd.array(rng.randint(0, 256, size=shape).astype(np.uint8), dtype=np.uint8)
            gap = float(np.abs(modes["fused"](x).asnumpy() - modes["separate"](x).asnumpy()).max())
            times = {"fused": [], "separate": []}
            for i in range(warmup + runs):
                order = ("fused", "separate") if i % 2 == 0 else ("separate", "fused")
                for mode in order:
                    t = _time(modes[mode], x)
                    if i >= warmup:
                        times[mode].append(t)
            out[case] = dict((mode, _stats(times[mode], shape[0])) for mode in times)
            out[case]["separate_over_fused"] = (
                out[case]["separate"]["mean_seconds"] / out[case]["fused"]["mean_seconds"]
            )
            out[case]["max_abs_output_difference"] = gap
            out[case]["input_shape"] = list(shape)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return out


def _mkldnn():
    try:
        from mxnet.runtime import Features

        return bool(Features().is_enabled("MKLDNN"))
    except Exception:  # releases before 1.5 have no runtime features
        return None


def main(argv=None):
    import mxnet as mx

    args = json.loads((argv or sys.argv[1:] or ["{}"])[0])
    result = measure(
        args.get("release") or mx.__version__,
        runs=int(args.get("runs", 20)),
        warmup=int(args.get("warmup", 3)),
        batch=int(args.get("batch", 25)),
    )
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
