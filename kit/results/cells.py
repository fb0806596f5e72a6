"""A matrix cell: MODEL/API/SAVED/LOADED, as users write it and as files name it."""

from __future__ import annotations

from dataclasses import dataclass

from kit.common import artifacts
from kit.common.capabilities import LOAD_APIS, MODEL_NAMES
from kit.common.errors import UsageError
from kit.common.names import SAFE_NAME


@dataclass(frozen=True)
class Cell:
    model: str
    api: str
    saved: str
    loaded: str
    archived: str | None = None  # a replaced weights version: SAVED@<model_version>-<param_version>

    @classmethod
    def parse(cls, text: str) -> Cell:
        parts = (text or "").strip().split("/")
        if len(parts) != 4 or not all(parts):
            raise UsageError(
                f"--cell must be MODEL/API/SAVED/LOADED, got {text!r}", hint="e.g. lenet/export/1.0.0.post4/1.9.1"
            )
        saved, _, archived = parts[2].partition("@")
        cell = cls(parts[0], parts[1], saved, parts[3], archived or None)
        if cell.api not in LOAD_APIS:
            raise UsageError(f"unknown API {cell.api!r}", hint="known: " + ", ".join(LOAD_APIS))
        if cell.model not in MODEL_NAMES and not SAFE_NAME.match(cell.model):
            raise UsageError(f"unknown model {cell.model!r}", hint="zoo models: " + ", ".join(MODEL_NAMES))
        for release in (cell.saved, cell.loaded):
            if not SAFE_NAME.match(release):
                raise UsageError(f"invalid release name {release!r} in --cell")
        if cell.archived is not None and not SAFE_NAME.match(cell.archived):
            raise UsageError(f"invalid weights version {cell.archived!r} in --cell (SAVED@MODELVERSION-PARAMVERSION)")
        return cell

    def __str__(self) -> str:
        saved = self.saved + (f"@{self.archived}" if self.archived else "")
        return f"{self.model}/{self.api}/{saved}/{self.loaded}"

    @property
    def slug(self) -> str:
        """A file name for the cell (the record file's stem)."""
        return artifacts.cell_stem(self.saved, self.model, self.api, self.loaded, self.archived)
