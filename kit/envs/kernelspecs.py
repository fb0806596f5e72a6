"""Jupyter kernels for the environments, in a kit-owned folder put on JUPYTER_PATH."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
from pathlib import Path

from kit.common.artifacts import write_json_atomic
from kit.envs import child_env, limits
from kit.home import KitHome

KERNEL_PREFIX = "mxnet-"
_JUPYTER_NAME = re.compile(r"^[a-z0-9._-]+\Z")  # what jupyter_client accepts as a kernel name


def kernel_name(env_name: str) -> str:
    """The kernel of environment ``env_name``: ``mxnet-1.9.1``; a runtime's name, which Jupyter would refuse
    (``+``, ``=``, capitals), as a readable slug with a short hash (``mxnet-1.9.1_py3.12-3f2a1c``)."""
    name = KERNEL_PREFIX + env_name
    if _JUPYTER_NAME.match(name):
        return name
    slug = re.sub(r"[^a-z0-9.-]+", "_", env_name.lower())
    return f"{KERNEL_PREFIX}{slug}-{hashlib.sha1(env_name.encode()).hexdigest()[:6]}"


def write_kernelspec(
    home: KitHome,
    kernel_name: str,
    python: str | os.PathLike,
    display_name: str,
    metadata: dict,
    env: dict | None = None,
) -> Path:
    """Register ``python`` as kernel ``kernel_name`` (with ``env`` set in its process); the kernelspec folder."""
    folder = home.kernels / kernel_name
    folder.mkdir(parents=True, exist_ok=True)
    spec = {
        "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": display_name,
        "language": "python",
        "metadata": {"mxcompat": metadata},
    }
    if env:
        spec["env"] = env
    write_json_atomic(str(folder / "kernel.json"), spec)
    return folder


def read_kernelspec(home: KitHome, kernel_name: str) -> dict | None:
    path = home.kernels / kernel_name / "kernel.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def remove_kernelspec(home: KitHome, kernel_name: str) -> None:
    shutil.rmtree(home.kernels / kernel_name, ignore_errors=True)


def kernel_names(home: KitHome) -> list[str]:
    if not home.kernels.is_dir():
        return []
    return sorted(p.name for p in home.kernels.iterdir() if (p / "kernel.json").is_file())


def jupyter_path(home: KitHome, env: dict | None = None) -> str:
    """JUPYTER_PATH with the kit's folder first and any existing entries after it."""
    existing = (os.environ if env is None else env).get("JUPYTER_PATH")
    parts = [str(home.jupyter_path)] + ([existing] if existing else [])
    return os.pathsep.join(parts)


def jupyter_env(home: KitHome, base: dict | None = None) -> dict:
    """A process environment in which Jupyter, papermill and nbclient see every kit kernel."""
    env = dict(os.environ if base is None else base)
    env["JUPYTER_PATH"] = jupyter_path(home, env)
    return env


def kernel_manager(home: KitHome, kernel_name: str, memory: int | None = None):
    """An (unstarted) kernel manager for ``kernel_name`` that looks for kernels in the kit's folder first.

    The kernel dirs are given to its KernelSpecManager, so no process environment is changed. Every kernel
    it starts gets the kernels' environment (:func:`kit.envs.child_env.for_kernels`: no AWS credentials),
    whoever starts it, and an address-space limit of ``memory`` bytes (default
    :func:`kit.envs.limits.kernel_memory`).
    """
    from jupyter_client.kernelspec import KernelSpecManager

    specs = KernelSpecManager()
    specs.kernel_dirs = [str(home.kernels)] + [d for d in specs.kernel_dirs if d != str(home.kernels)]
    km = _kernel_manager_class()(kernel_name=kernel_name, kernel_spec_manager=specs)
    km.mxcompat_memory = memory
    return km


#: the module a kit kernel is started with instead of ipykernel's launcher (see its docstring: a kernel that
#: cannot bind its ports ends at once instead of hanging until the start timeout)
KERNEL_START = "kit.kernel.runtime.kernel_start"


def launch_command(kernel_cmd: list[str]) -> list[str]:
    """A kernelspec's command (``PYTHON -m ipykernel_launcher ...``) as the kit launches it: the same with
    :data:`KERNEL_START`; any other command as it is. Every kit environment finds the kit (its .pth)."""
    if len(kernel_cmd) > 2 and kernel_cmd[1:3] == ["-m", "ipykernel_launcher"]:
        return [kernel_cmd[0], "-m", KERNEL_START] + list(kernel_cmd[3:])
    return list(kernel_cmd)


@functools.lru_cache(maxsize=None)
def _kernel_manager_class():
    """jupyter_client's async kernel manager (nbclient drives it with async clients), launching kit kernels
    (imported when a kernel is first needed: most commands start none)."""
    from jupyter_client.manager import AsyncKernelManager

    class KitKernelManager(AsyncKernelManager):
        mxcompat_memory = None
        mxcompat_on_start = None  # told the new kernel's PID (kit.execute.watchdog watches it)
        mxcompat_output = None  # an open file the kernel's stdout and stderr go to (default: this process's)

        async def _async_launch_kernel(self, kernel_cmd, **kw):  # jupyter_client's hook for how kernels launch
            kernel_cmd = launch_command(kernel_cmd)
            kw["env"] = child_env.for_kernels(kw.get("env") or os.environ)
            if self.mxcompat_output is not None and not self.mxcompat_output.closed:
                kw.update(stdout=self.mxcompat_output, stderr=self.mxcompat_output)
            await super()._async_launch_kernel(kernel_cmd, **kw)
            limits.limit_memory(self.provisioner.pid, self.mxcompat_memory)
            if self.mxcompat_on_start is not None:
                self.mxcompat_on_start(self.provisioner.pid)

    return KitKernelManager


HOST_KERNEL = "mxcompat-host"


KERNEL_ARGS = ["--HistoryManager.hist_file=:memory:"]  # what nbclient passes: no history database to lock
#: what a kernel prestarted for its step imports while the previous step runs: its notebook's first imports.
#: An import that fails here only prints; the notebook's own import then fails with the cause.
PRESTART_IMPORTS = {
    # the notebooks' plots and tables too; pandas only where it installed
    "release": "import mxnet, kit.kernel.entry.train_run, kit.kernel.entry.reload_run, kit.kernel.entry.plots; "
    "import matplotlib.figure, matplotlib.backends.backend_agg\n"
    "try:\n    import pandas\nexcept ImportError:\n    pass",
    HOST_KERNEL: "import kit.results.summary",
}


def prestart_arguments(kernel_name: str) -> list[str]:
    """The kernel's command-line arguments when it is prestarted."""
    kind = kernel_name if kernel_name == HOST_KERNEL else "release"
    # -c (InteractiveShellApp.code_to_run) is one string in every IPython; a list trait's syntax is not
    return KERNEL_ARGS + ["-c", PRESTART_IMPORTS[kind]]


def ensure_host_kernel(home: KitHome) -> str:
    """Register the kit's own Python (pandas, matplotlib) as kernel ``mxcompat-host``, for the summary."""
    import sys

    write_kernelspec(
        home,
        HOST_KERNEL,
        sys.executable,
        display_name="mxnet-compat-kit host (summary)",
        metadata={"release": None, "host": True},
    )
    return HOST_KERNEL
