"""A matrix cell: MODEL/API/SAVED/LOADED, as users write it and as files name it."""

from __future__ import annotations

import re
from dataclasses import dataclass

from kit.common.errors import UsageError
from kit.common.capabilities import APIS, MODEL_NAMES


_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")  # names that are safe as path components


@dataclass(frozen=True)
class Cell:
    model: str
    api: str
    saved: str
    loaded: str

    @classmethod
    def parse(cls, text: str) -> Cell:
        parts = (text or "").strip().split("/")
        if len(parts) != 4 or not all(parts):
            raise UsageError(
                f"--cell must be MODEL/API/SAVED/LOADED, got {text!r}", hint="e.g. lenet/export/1.0.0.post4/1.9.1"
            )
        cell = cls(*parts)
        if cell.api not in APIS + ("checkpoint",):
            raise UsageError(f"unknown API {cell.api!r}", hint="known: " + ", ".join(APIS + ("checkpoint",)))
        if cell.model not in MODEL_NAMES and not _SAFE.match(cell.model):
            raise UsageError(f"unknown model {cell.model!r}", hint="zoo models: " + ", ".join(MODEL_NAMES))
        for release in (cell.saved, cell.loaded):
            if not _SAFE.match(release):
                raise UsageError(f"invalid release name {release!r} in --cell")
        return cell

    def __str__(self) -> str:
        return f"{self.model}/{self.api}/{self.saved}/{self.loaded}"

    @property
    def slug(self) -> str:
        """A file name for the cell (the record file's stem)."""
        return f"{self.saved}__{self.model}__{self.api}__{self.loaded}"
