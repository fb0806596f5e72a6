"""check-model's pre-flight: before anything is exported, the checkpoint's operators and attributes against each
exit's exporter (run in that exporter's environment) and what the kit measured each runtime to do with them."""

from __future__ import annotations

from pathlib import Path

from kit.envs import onnx_path
from kit.envs.manager import EnvManager
from kit.home import KitHome


def run(home: KitHome, folder: Path, exits: list[str]) -> list[dict]:
    """The pre-flight of the artifact in ``folder`` for ``exits`` (``--to`` names), one per exporter environment:
    ``kit.kernel.entry.preflight``'s answer with ``"environment"`` and ``"exits"`` added."""
    by_exporter: dict[str, list[str]] = {}
    for name in exits:
        api = onnx_path.exit_of(name)
        exporter = onnx_path.target(name)
        by_exporter.setdefault(exporter, [])
        if api not in by_exporter[exporter]:
            by_exporter[exporter].append(api)
    manager, found = EnvManager(home), []
    for exporter, apis in by_exporter.items():
        answer = manager.ready_env(exporter).run_main(
            "kit.kernel.entry.preflight",
            {"folder": str(folder), "exits": apis},
            f"pre-flight of {', '.join(apis)} in {exporter}",
        )
        found.append(dict(answer, environment=exporter, exits=apis))
    return found


def _values(attrs: dict) -> str:
    return ", ".join(f"{k}={'|'.join(v)}" for k, v in sorted(attrs.items()))


def lines(found: dict) -> list[str]:
    """What check-model prints: the operators, then each finding (blocks / wrong numbers) with its remedy."""
    operators = found["operators"]
    missing = [o["op"] for o in operators if o["converted"] is False]
    out = [
        f"pre-flight for {', '.join(found['exits'])} ({found['exporter']} in {found['environment']}): "
        f"{len(operators)} operator(s), "
        + (f"no converter for {', '.join(missing)}" if missing else "each with a converter")
        + f"; {len(found['findings'])} finding(s)"
    ]
    for o in operators:
        out.append(f"  {o['op']} x{o['count']}" + (f" ({_values(o['attrs'])})" if o["attrs"] else ""))
    for f in found["findings"]:
        answer = f"remedy {f['remedy']}" if f["remedy"] else "no remedy in the kit"
        out.append(f"  {f['effect']} in {', '.join(f['exits'])}: {f['node']} ({f['op']}): {f['says']} -> {answer}")
    for name in found["remedies"]:
        out.append(f"  remedy {name}: {found['titles'][name]}")
    if not found["findings"]:
        out.append("  nothing the kit knows will block or change the numbers; the check that follows measures")
    return out
