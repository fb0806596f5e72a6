"""Bytecode for an environment's kernels, written when it is built.

A kernel imports IPython, MXNet and the kit at every start, and compiles them from source each time where no
.pyc gets written (``PYTHONDONTWRITEBYTECODE``); uv's ``--compile-bytecode`` needs Python 3.7+. So the
environment's own interpreter compiles the kit's kernel side and the kernel's own packages whole, and of the
large packages (MXNet, NumPy, pandas, matplotlib, the exits' runtimes) what is imported: compiling all of
site-packages took 15 of a 1.9.1 build's 19 s.
"""

from __future__ import annotations

import os
from pathlib import Path

from kit.envs.uv import run_logged
from kit.home import REPO_ROOT

#: run by an environment's interpreter on folders and files: writes their bytecode, skips what does not compile
COMPILE_ALL = (
    "import compileall, os, sys\n"
    "for p in sys.argv[1:]:\n"
    "    compileall.compile_dir(p, quiet=2, workers=0) if os.path.isdir(p) else compileall.compile_file(p, quiet=2)\n"
)
#: run by an environment's interpreter on module names: imports each one it has with bytecode writing on, so every
#: module a kernel or runtime worker imports keeps its .pyc (compiling all of site-packages took 15 of a build's 19 s)
IMPORT_WITH_BYTECODE = (
    "import importlib, os, sys\n"
    "sys.dont_write_bytecode = False\n"
    "os.environ['MPLBACKEND'] = 'Agg'\n"
    "for name in sys.argv[1:]:\n"
    "    try:\n"
    "        importlib.import_module(name)\n"
    "    except Exception:\n"
    "        pass\n"
)
#: the kernel's own packages and modules, compiled whole (a kernel's start reaches into most of them: its debugger,
#: an old IPython's prompt and completer)
KERNEL_PACKAGES = (
    "ipykernel",
    "IPython",
    "debugpy",
    "jupyter_client",
    "jupyter_core",
    "zmq",
    "tornado",
    "traitlets",
    "comm",
    "psutil",
    "matplotlib_inline",
    "platformdirs",
    "pygments",
    "prompt_toolkit",
    "jedi",
    "parso",
    "pexpect",
    "ptyprocess",
    "wcwidth",
    "backcall",
    "ipython_genutils",
    "decorator.py",
    "entrypoints.py",
    "pickleshare.py",
    "typing_extensions.py",
)
#: what a kernel (or a runtime worker) imports of the large packages as it runs the kit's notebooks, where installed
KERNEL_IMPORTS = (
    "matplotlib.pyplot",
    "matplotlib.figure",
    "matplotlib.backends.backend_agg",
    "pandas",
    "mxnet",
    "mxnet.gluon.model_zoo.vision",
    "mxnet.contrib.onnx",
    "onnx",
    "onnx.reference",
    "onnxruntime",
    "openvino",
    "torch",
    "onnx2torch",
    "kit.kernel.entry.train_run",
    "kit.kernel.entry.reload_run",
    "kit.kernel.entry.plots",
    "kit.kernel.entry.probe",
    "kit.kernel.exits.runtime_worker",
)


def compile_for_kernels(python: str, purelib: str, log: Path, name: str) -> None:
    """Write the bytecode environment ``name``'s kernels and runtime workers read (its interpreter ``python``,
    its site-packages ``purelib``); the commands go to ``log``."""
    run_logged(
        [
            python,
            "-c",
            COMPILE_ALL,
            *(str(REPO_ROOT / "kit" / p) for p in ("__init__.py", "common", "kernel")),
            *(p for p in (os.path.join(purelib, package) for package in KERNEL_PACKAGES) if os.path.exists(p)),
        ],
        log,
        what=f"compiling the kit's kernel side and the kernel's packages to bytecode for {name}",
    )
    what = f"compiling {name}'s imports to bytecode"
    run_logged([python, "-c", IMPORT_WITH_BYTECODE, *KERNEL_IMPORTS], log, what=what)
