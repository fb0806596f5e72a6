"""Two runs side by side by incompatibility signature: what appeared, what disappeared, what changed cells.

Yesterday's nightly against today's: a signature is the same fact in both runs when its direction and
id match (:mod:`kit.results.signatures`), whatever the cells; its cells say how far it reaches in each.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kit.common.errors import EXIT_OK, EXIT_REGRESSIONS
from kit.results import reports
from kit.results.records import load_finished
from kit.results.runs import Run
from kit.results.signatures import Group, line


@dataclass
class Comparison:
    before: str
    after: str
    appeared: list[Group] = field(default_factory=list)
    disappeared: list[Group] = field(default_factory=list)
    changed: list[tuple[Group, Group]] = field(default_factory=list)  # (before, after): other cells
    unchanged: list[Group] = field(default_factory=list)

    @property
    def new_regressions(self) -> list[Group]:
        """Groups that appeared with cells that fail the later run (backward or same release, not allowed)."""
        return [g for g in self.appeared if g.failing]

    @property
    def exit_code(self) -> int:
        return EXIT_REGRESSIONS if self.new_regressions else EXIT_OK

    def as_dict(self) -> dict:
        return {
            "before": self.before,
            "after": self.after,
            "appeared": [g.as_dict() for g in self.appeared],
            "disappeared": [g.as_dict() for g in self.disappeared],
            "changed": [
                {
                    "id": a.id,
                    "direction": a.direction,
                    "signature": a.signature,
                    "cells_added": sorted(set(a.cells) - set(b.cells)),
                    "cells_removed": sorted(set(b.cells) - set(a.cells)),
                }
                for b, a in self.changed
            ],
            "unchanged": [g.id for g in self.unchanged],
            "exit_code": self.exit_code,
        }


def run_groups(run: Run) -> list[Group]:
    """A finished run's incompatibility groups, with its own allow-list."""
    _, records, split = load_finished(run)
    return reports.groups_of(records, split)


def compare_groups(before: list[Group], after: list[Group], names: tuple[str, str] = ("A", "B")) -> Comparison:
    old = {(g.direction, g.id): g for g in before}
    new = {(g.direction, g.id): g for g in after}
    out = Comparison(*names)
    for key, g in new.items():
        if key not in old:
            out.appeared.append(g)
        elif set(old[key].cells) != set(g.cells):
            out.changed.append((old[key], g))
        else:
            out.unchanged.append(g)
    out.disappeared = [g for key, g in old.items() if key not in new]
    return out


def compare_runs(before: Run, after: Run) -> Comparison:
    return compare_groups(run_groups(before), run_groups(after), (before.id, after.id))


def lines(c: Comparison) -> list[str]:
    """The comparison for a terminal: a count line, then one line per group that differs."""
    out = [
        f"{c.before} -> {c.after}: {len(c.appeared)} appeared, {len(c.disappeared)} disappeared, "
        f"{len(c.changed)} changed cells, {len(c.unchanged)} unchanged"
    ]
    out += [f"APPEARED {'(fails the run) ' if g in c.new_regressions else ''}{line(g)}" for g in c.appeared]
    out += [f"DISAPPEARED {line(g)}" for g in c.disappeared]
    for b, a in c.changed:
        added, removed = sorted(set(a.cells) - set(b.cells)), sorted(set(b.cells) - set(a.cells))
        out.append(
            f"CHANGED [{a.id}] {a.direction}: {a.signature}: {len(b.cells)} -> {len(a.cells)} cells"
            + (f"; added {', '.join(added)}" if added else "")
            + (f"; removed {', '.join(removed)}" if removed else "")
        )
    return out
