"""What bounds the kit's kernels and kernel-side programs: a step's time, a cell's time, a kernel's memory.

A step that runs past its time, a cell (one artifact in one release) that does not finish in its time, or a
kernel that reaches its memory is stopped; the step or the cell is broken with that cause and the run goes
on. Defaults here; ``mxcompat run --step-timeout/--cell-timeout/--kernel-memory`` change them for a run.
"""

from __future__ import annotations

import re
import resource
from dataclasses import asdict, dataclass

from kit.common.errors import UsageError

#: a train or reload step: the vision zoo's training is the longest measured (about 300 s a release)
STEP_TIMEOUT = 3 * 3600
#: one artifact loaded, run on its reference cases and, if it fails, retried with every remedy
CELL_TIMEOUT = 900
#: a kernel's address space, as a share of the machine's memory (MXNet reserves about 1 GB idle)
KERNEL_MEMORY_SHARE = 0.75
#: never less than this: an idle MXNet 1.9 kernel's address space is about 1 GB
KERNEL_MEMORY_FLOOR = 4 << 30

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?\s*\Z", re.IGNORECASE)
_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*\Z")


def machine_memory() -> int:
    import psutil

    return psutil.virtual_memory().total


def kernel_memory(value: str | int | None = None) -> int:
    """A kernel's address-space limit in bytes: ``value`` as bytes, ``"8G"``, ``"512M"`` or ``"60%"`` of the
    machine's memory; None: :data:`KERNEL_MEMORY_SHARE` of it, at least :data:`KERNEL_MEMORY_FLOOR`."""
    if value is None:
        return max(KERNEL_MEMORY_FLOOR, int(KERNEL_MEMORY_SHARE * machine_memory()))
    if isinstance(value, int) and not isinstance(value, bool):
        limit = value
    else:
        size, percent = _SIZE.match(value), _PERCENT.match(value)
        if percent:
            limit = int(float(percent.group(1)) / 100 * machine_memory())
        elif size:
            limit = int(float(size.group(1)) * 1024 ** " KMGT".index((size.group(2) or " ").upper()))
        else:
            raise UsageError(
                f"--kernel-memory {value!r}: give bytes, a size such as 8G or 512M, or a share such as 60%"
            )
    if limit < 256 << 20:
        raise UsageError(f"--kernel-memory {value!r} is under 256 MiB: no MXNet kernel starts in that")
    return limit


def limit_memory(pid: int, limit: int | None = None) -> None:
    """Limit process ``pid``'s address space to ``limit`` bytes (default :func:`kernel_memory`): past it, an
    allocation fails in that process (MXNet raises, or the kernel dies), not in the machine. The soft limit only
    (a kernel kept for the next step gets that step's), never above the hard one."""
    limit = kernel_memory() if limit is None else limit
    try:
        _soft, hard = resource.prlimit(pid, resource.RLIMIT_AS)
        resource.prlimit(pid, resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(hard, limit), hard))
    except (ProcessLookupError, PermissionError, OSError):
        pass  # it ended already (its outcome says so), or the system refuses: it runs unlimited, as before


@dataclass(frozen=True)
class Limits:
    """A run's bounds, carried by each of its steps (seconds, seconds, bytes)."""

    step_timeout: float = STEP_TIMEOUT
    cell_timeout: float = CELL_TIMEOUT
    kernel_memory: int | None = None  # None: kernel_memory() of the machine the step runs on

    def __post_init__(self):
        for name in ("step_timeout", "cell_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise UsageError(f"--{name.replace('_', '-')} must be a number of seconds above 0, got {value!r}")
        if self.kernel_memory is not None:
            kernel_memory(self.kernel_memory)  # refuses what no kernel starts in

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict | None) -> Limits:
        d = d or {}
        return cls(**{k: d[k] for k in ("step_timeout", "cell_timeout", "kernel_memory") if d.get(k) is not None})

    @classmethod
    def from_options(cls, step_timeout: float | None, cell_timeout: float | None, kernel_memory_: str | None):
        """From the command line: ``--kernel-memory`` as :func:`kernel_memory` reads it."""
        memory = kernel_memory(kernel_memory_) if kernel_memory_ else None
        return cls.from_dict({"step_timeout": step_timeout, "cell_timeout": cell_timeout, "kernel_memory": memory})
