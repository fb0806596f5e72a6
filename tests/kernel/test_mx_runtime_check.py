"""The operator battery a runtime is verified with runs in every environment, old and 2.0, and computes."""

import mxnet as mx
import numpy as np

from kit.kernel.entry import runtime_check


def test_the_battery_computes_and_reports_what_does_not_run():
    outputs = runtime_check.battery(mx)
    assert len(outputs) == 14
    dense = outputs["dense"]["values"]
    r = runtime_check._inputs(0)  # the dense operator's own inputs, drawn again
    x, w, b = r(4, 8), r(5, 8), r(5)
    assert np.abs(np.array(dense) - (x.dot(w.T) + b).ravel()).max() < 1e-5
    for name, out in outputs.items():
        assert ("values" in out) != ("error" in out), name
        if "values" in out:
            assert np.all(np.isfinite(out["values"])), name
    assert outputs["bool_mask"]["values"] == [2.0, 0.0, 2.0]
    assert "values" in outputs["convolution"] and "values" in outputs["save_load"]
