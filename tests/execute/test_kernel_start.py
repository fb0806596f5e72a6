"""A kernel that cannot bind its ports ends at once, so the step that waits for it starts another."""

from __future__ import annotations

import socket
import time

from jupyter_core.utils import run_sync

from kit.envs import kernelspecs
from kit.home import KitHome


def test_a_kernel_whose_port_was_taken_ends_at_once_instead_of_hanging(tmp_path):
    """The race a busy machine runs into: a port jupyter_client chose is taken before the kernel binds it. With
    ipykernel's own launcher the kernel then hangs in its exit handlers, alive, until the start timeout."""
    home = KitHome(tmp_path / "home")
    kernelspecs.ensure_host_kernel(home)
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    km = kernelspecs.kernel_manager(home, kernelspecs.HOST_KERNEL)
    km.cache_ports = False  # else the provisioner picks every port again
    km.iopub_port = taken.getsockname()[1]  # bound after the shell, stdin and control sockets: as in the race
    log = open(tmp_path / "kernel.log", "w")
    km.mxcompat_output = log
    try:
        run_sync(km.start_kernel)()
        assert km.provisioner.process.args[1:3] == ["-m", "kit.kernel.runtime.kernel_start"]
        deadline = time.monotonic() + 30
        while run_sync(km.is_alive)() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not run_sync(km.is_alive)(), "the kernel hangs with its port taken"
        assert km.provisioner.process.returncode == 1
    finally:
        if run_sync(km.is_alive)():
            run_sync(km.shutdown_kernel)(now=True)
        taken.close()
        log.close()
    assert "Address already in use" in (tmp_path / "kernel.log").read_text()


def test_only_ipykernels_launcher_is_replaced():
    python = "/envs/1.9.1/bin/python"
    launched = kernelspecs.launch_command([python, "-m", "ipykernel_launcher", "-f", "{connection_file}", "-c", "x"])
    assert launched == [python, "-m", kernelspecs.KERNEL_START, "-f", "{connection_file}", "-c", "x"]
    other = [python, "-m", "other_kernel", "-f", "{connection_file}"]
    assert kernelspecs.launch_command(other) == other
