"""``--save`` / ``--load`` values: release names, ``all``, ``last:N`` and ranges, against the release table.

The releases to pick from are the table's and the custom ones built on this machine
(``mxcompat env create NAME --wheel ...``), in release order: a custom release sorts by
the MXNet version it reports, or after the table when that is unknown.
"""

from __future__ import annotations

import re

from kit.common.errors import UsageError
from kit.common.versions import REPORTS, base_version, release_key
from kit.envs import releases
from kit.envs.manager import EnvManager

LAST = re.compile(r"^last:(\d+)$")
HELP = (
    "comma-separated: release names, 'all', 'last:N' (the newest N), or ranges 'A..B' "
    "('A..' and '..B' are open), in release order; custom builds on this machine included; runtimes by name "
    "(RELEASE+TAG..., e.g. 1.9.1+py3.12+numpy1.26.4, 1.6.0+mkl)"
)


def release_order(manager: EnvManager) -> list[str]:
    """Every release a run can name: the table's and this machine's custom builds, oldest first."""
    custom = []
    for env in manager.list():
        release = env.release
        if release is not None and release.custom:
            custom.append(release)
    names = {r: r for r in releases.RELEASES}
    for r in custom:
        names[r.name] = r.expected_version or ""
    return sorted(names, key=lambda n: _key(names[n], n))


def _key(version: str, name: str):
    try:
        return (0, release_key(version), name)
    except ValueError:
        return (1, ((), (), (0, 0)), name)


def expand(text: str | None, manager: EnvManager, *, flag: str = "--save") -> list[str]:
    """The releases ``text`` names, in the order given, each once; names are checked later (unknown ones
    get an error listing the known releases)."""
    order: list[str] | None = None
    out: list[str] = []
    for term in [t.strip() for t in (text or "").split(",") if t.strip()]:
        if term == "all" or LAST.match(term) or ".." in term:
            order = order if order is not None else release_order(manager)
            picked = _pick(term, order, flag)
        else:
            picked = [term]
        out.extend(p for p in picked if p not in out)
    return out


def _pick(term: str, order: list[str], flag: str) -> list[str]:
    if term == "all":
        return list(order)
    last = LAST.match(term)
    if last:
        n = int(last.group(1))
        if n < 1:
            raise UsageError(f"{flag} {term}: N must be 1 or more")
        return order[-n:]
    low, _, high = term.partition("..")
    start = _locate(low, order, flag, term) if low else 0
    stop = _locate(high, order, flag, term) + 1 if high else len(order)
    if start >= stop:
        raise UsageError(f"{flag} {term}: the range is empty ({low} comes after {high})", hint="write OLDER..NEWER")
    return order[start:stop]


def _locate(end: str, order: list[str], flag: str, term: str) -> int:
    """Where a range's end stands: by name, or by the version MXNet reports (1.8.0 is 1.8.0.post0)."""
    if end in order:
        return order.index(end)
    try:
        same = [i for i, name in enumerate(order) if _reported(name) == base_version(end)]
    except ValueError:
        same = []
    if len(same) == 1:
        return same[0]
    raise UsageError(f"{flag} {term}: {end!r} is not a known release", hint="known releases: " + ", ".join(order))


def _reported(name: str) -> str | None:
    try:
        return base_version(REPORTS.get(name, name))
    except ValueError:
        return None
