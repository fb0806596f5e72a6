"""Health probe run inside an environment: ``python -m kit.kernel.entry.probe REQUEST.json`` (``{"release"}``).

Imports MXNet, runs a tiny forward pass checked against numpy, draws a figure
with matplotlib and builds a pandas DataFrame, and answers (kit.common.main_protocol) the
fingerprint plus ``forward_ok``, ``forward_max_abs_error``, ``matplotlib`` and
``pandas`` (their versions, None with ``*_error`` where they fail).
"""

import sys

from kit.common.main_protocol import serve
from kit.kernel.runtime.fingerprint import fingerprint


def forward_check():
    """FullyConnected on a fixed random batch, compared with the same product in numpy."""
    import mxnet as mx
    import numpy as np

    rng = np.random.RandomState(0)
    x = rng.randn(4, 8).astype(np.float32)
    w = rng.randn(3, 8).astype(np.float32)
    b = rng.randn(3).astype(np.float32)
    out = mx.nd.FullyConnected(mx.nd.array(x), mx.nd.array(w), mx.nd.array(b), num_hidden=3).asnumpy()
    expected = x.dot(w.T) + b
    err = float(np.abs(out - expected).max())
    return err <= 1e-4, err


def plotting_check():
    """matplotlib's version after drawing a line to PNG in memory (also builds its font cache once)."""
    import io

    import matplotlib

    matplotlib.use("agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(2, 1))
    ax.plot([0, 1], [1, 0])
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    if not buf.getvalue().startswith(b"\x89PNG"):
        raise RuntimeError("savefig wrote no PNG")
    return matplotlib.__version__


def tables_check():
    """pandas' version after rendering a DataFrame as HTML."""
    import pandas

    if "<table" not in pandas.DataFrame([{"verdict": "identical", "max_abs": 0.0}])._repr_html_():
        raise RuntimeError("DataFrame rendered no HTML table")
    return pandas.__version__


def probe(request):
    """The fingerprint of this environment's MXNet for ``request["release"]``, with what works in it."""
    info = fingerprint(request.get("release"))
    if info.get("mxnet") is not None:
        try:
            ok, err = forward_check()
            info["forward_ok"], info["forward_max_abs_error"] = ok, err
        except Exception as e:  # reported as unhealthy with the reason
            info["forward_ok"], info["forward_error"] = False, "%s: %s" % (type(e).__name__, e)
    for key, check in (("matplotlib", plotting_check), ("pandas", tables_check)):
        try:
            info[key] = check()
        except Exception as e:  # reported with the reason; doctor decides whether it is a problem
            info[key], info[key + "_error"] = None, "%s: %s" % (type(e).__name__, e)
    return info


if __name__ == "__main__":
    sys.exit(serve(probe))
