"""Commands print their answer, not the kernel's chatter: what kernel-side programs, kernels and the Jupyter
libraries print goes to the command's log, and a failure names the log and shows its last lines (host-only:
the host's Python plays the kernel-side program and the kernel)."""

from __future__ import annotations

import logging
import sys
import textwrap
import warnings
from pathlib import Path

import nbformat
import pytest

from kit.common.errors import KitError
from kit.envs import kernel_process, kernelspecs
from kit.execute import kernel_log
from kit.home import KitHome

REPO = Path(__file__).resolve().parents[2]
NATIVE = "[12:00:00] src/nnvm/legacy_json_util.cc:209: Loading symbol saved by previous version v1.2.1"

PROGRAM = f"""
import os, sys
sys.path.insert(0, {str(REPO)!r})
from kit.common.errors import KitError
from kit.common.main_protocol import serve

def handle(request):
    os.write(2, {NATIVE!r}.encode() + b"\\n")  # as MXNet's C++ logging writes: to the process's fd 2
    sys.stderr.write("a Python warning\\n")
    if request["do"] == "fail":
        raise KitError("it broke", hint="look there")
    if request["do"] == "crash":
        raise RuntimeError("native crash")
    return {{"ok": True}}

sys.exit(serve(handle))
"""


@pytest.fixture
def program(tmp_path):
    """``python -m chatty_program``: answers, fails or crashes, printing like MXNet first."""
    (tmp_path / "chatty_program.py").write_text(PROGRAM)
    log = tmp_path / "logs" / "convert-cell.log"
    log.parent.mkdir()

    def run(do):
        return kernel_process.run_kernel_main(
            sys.executable, "chatty_program", {"do": do}, what="the chatty program", cwd=tmp_path, log=log
        )

    return run, log


def test_a_kernel_side_programs_output_goes_to_the_log_not_the_terminal(program, capfd):
    run, log = program
    assert run("answer") == {"ok": True}
    terminal = capfd.readouterr()
    assert NATIVE not in terminal.out + terminal.err and "a Python warning" not in terminal.out + terminal.err
    text = log.read_text()
    assert NATIVE in text and "a Python warning" in text and "[exit 0 after" in text


def test_a_failing_programs_error_names_the_log_and_shows_its_tail(program, capfd):
    run, log = program
    with pytest.raises(kernel_process.KernelProgramError) as crashed:
        run("crash")
    assert crashed.value.message.splitlines()[-1] == "RuntimeError: native crash"  # the log's last lines
    assert crashed.value.hint == f"full log: {log}"
    with pytest.raises(KitError) as failed:
        run("fail")
    assert (failed.value.message, failed.value.hint) == ("it broke", f"look there\nfull log: {log}")
    terminal = capfd.readouterr()
    assert NATIVE not in terminal.out + terminal.err
    assert log.read_text().count(NATIVE) == 2


def test_warnings_and_jupyter_log_records_go_to_the_log_for_its_duration(tmp_path, capfd):
    log = tmp_path / "logs" / "investigate.log"
    client = logging.getLogger("jupyter_client")
    before = (list(client.handlers), client.propagate)
    with kernel_log.to_log(log, "a notebook on a kernel") as out:
        warnings.warn("Kernel is running over TCP without encryption", UserWarning, stacklevel=1)
        client.warning("Kernel restarted")
        logging.getLogger("papermill").error("Kernel died")
        out.write("the kernel's own line\n")
    terminal = capfd.readouterr()
    for said in ("without encryption", "Kernel restarted", "Kernel died", "the kernel's own line"):
        assert said not in terminal.out + terminal.err
    text = log.read_text()
    assert text.startswith("\n== a notebook on a kernel (")
    assert "UserWarning: Kernel is running over TCP without encryption" in text
    assert "[jupyter_client WARNING] Kernel restarted" in text and "[papermill ERROR] Kernel died" in text
    assert (list(client.handlers), client.propagate) == before  # only for its duration
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        warnings.warn("after", UserWarning, stacklevel=1)
    assert [str(w.message) for w in seen] == ["after"] and "after" not in log.read_text()


def test_tail_is_the_last_lines_that_say_something(tmp_path):
    log = tmp_path / "k.log"
    log.write_text("".join(f"line {i}\n\n" for i in range(20)))
    assert kernel_log.tail(log, 3) == "line 17\nline 18\nline 19"
    assert kernel_log.tail(tmp_path / "none.log") == ""


def test_a_notebooks_kernel_writes_to_the_log_not_the_terminal(tmp_path, capfd):
    """A real kernel (the host's): ipykernel's start-up warnings and what a cell writes to fd 2 (MXNet's C++
    logging) go to the log; the notebook still runs."""
    from kit.execute.notebooks import run_notebook

    home = KitHome(tmp_path / "home")
    kernel = kernelspecs.ensure_host_kernel(home)
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            textwrap.dedent(
                f"""
                import os
                os.write(2, {NATIVE!r}.encode() + b"\\n")
                print("the cell's answer")
                """
            )
        )
    ]
    nbformat.write(nb, tmp_path / "chatty.ipynb")
    log = tmp_path / "logs" / "investigate-cell.log"
    run_notebook(tmp_path / "chatty.ipynb", tmp_path / "ran.ipynb", kernel, {}, home=home, log=log)
    terminal = capfd.readouterr()
    assert NATIVE not in terminal.out + terminal.err and "Kernel is running over TCP" not in terminal.err
    text = log.read_text()
    assert f"== chatty.ipynb on {kernel}" in text and NATIVE in text
    ran = nbformat.read(tmp_path / "ran.ipynb", as_version=4)
    assert "the cell's answer" in "".join(o.get("text", "") for o in ran.cells[0].outputs)
