"""A command's kernel log: what a notebook's kernel and the Jupyter libraries print goes to a file, not the terminal.

A kernel writes to its stdout and stderr before any cell runs (ipykernel's "Kernel is running over TCP without
encryption") and while cells run (MXNet's C++ log lines, "Loading symbol saved by previous version ..."); the
host's jupyter_client, nbclient, papermill and traitlets warn and log in the host process. A command that prints
an answer (``investigate``) sends all of it to its log, and shows the log's tail only when it fails.
"""

from __future__ import annotations

import contextlib
import logging
import time
import warnings
from pathlib import Path
from typing import IO, Iterator

#: the host-side loggers that speak while a notebook runs
JUPYTER_LOGGERS = ("jupyter_client", "nbclient", "papermill", "traitlets", "asyncio")
#: how many of its last lines a failure shows
TAIL_LINES = 8


@contextlib.contextmanager
def to_log(path: str | Path, what: str) -> Iterator[IO[str]]:
    """For its duration, this process's warnings and the records of :data:`JUPYTER_LOGGERS` are appended to
    ``path`` (and not shown elsewhere); yields the open log, for a kernel started meanwhile to write to.
    ``what``: the header line that opens this part of the log."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", buffering=1) as log, warnings.catch_warnings():
        log.write(f"\n== {what} ({time.strftime('%Y-%m-%d %H:%M:%S')})\n")

        def show(message, category, filename, lineno, file=None, line=None):
            log.write(warnings.formatwarning(message, category, filename, lineno, line))

        warnings.showwarning = show
        handler = logging.StreamHandler(log)
        handler.setFormatter(logging.Formatter("[%(name)s %(levelname)s] %(message)s"))
        loggers = [logging.getLogger(name) for name in JUPYTER_LOGGERS]
        propagates = [logger.propagate for logger in loggers]
        for logger in loggers:
            logger.addHandler(handler)
            logger.propagate = False  # a handler above (the root's, a console) would print it too
        try:
            yield log
        finally:
            for logger, propagate in zip(loggers, propagates):
                logger.removeHandler(handler)
                logger.propagate = propagate


def tail(path: str | Path, lines: int = TAIL_LINES) -> str:
    """The last ``lines`` non-empty lines of the log at ``path`` ("" when there is none)."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join([line for line in text.splitlines() if line.strip()][-lines:])
