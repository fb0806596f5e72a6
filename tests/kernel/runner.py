"""Runs the kernel-side unit tests without pytest, inside an MXNet environment.

``<env>/bin/python tests/kernel/runner.py`` imports every ``test_*.py`` beside this file and in
``tests/common/`` (the code both sides share) and calls each ``test_*`` function (no fixtures: plain asserts
only), so the same tests run under pytest on the host and under Python 3.6 in the oldest env.
Prints one JSON line ``{"passed": [...], "failed": {...}}``; exits 1 on any failure.
"""

import importlib
import json
import os
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))
    from kit.kernel.mx import mxapi

    mxapi.prepare_kernel()  # as every kit notebook's first cell does: numpy semantics on in MXNet 2.0
    passed, failed = [], {}
    common = os.path.join(os.path.dirname(HERE), "common")
    sys.path.insert(0, common)
    found = [("tests.kernel.", f) for f in sorted(os.listdir(HERE))]
    found += [("", f) for f in sorted(os.listdir(common))]
    for package, fname in found:
        if not (fname.startswith("test_") and fname.endswith(".py")):
            continue
        module = importlib.import_module(package + fname[:-3])
        for name in sorted(dir(module)):
            fn = getattr(module, name)
            if name.startswith("test_") and callable(fn):
                key = "%s::%s" % (fname, name)
                try:
                    fn()
                    passed.append(key)
                except Exception:
                    failed[key] = traceback.format_exc()
    print(json.dumps({"passed": passed, "failed": failed}))
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main())
