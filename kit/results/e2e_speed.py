"""What e2e_speed.ipynb shows: the fused-vs-separate benchmark (bench/e2e_bench.py) across releases."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from kit.common.errors import UsageError
from kit.common.versions import release_key
from kit.results.summary import plt, show  # noqa: F401 (show is re-exported for the notebook)

RESULTS = Path(__file__).resolve().parent.parent / "bench" / "results"
CASES = ("single", "batch")
MODES = ("fused", "separate")


def latest(folder: str | Path = RESULTS) -> Path:
    """The newest ``e2e-*.json`` in ``folder``."""
    found = sorted(Path(folder).glob("e2e-*.json"), key=lambda p: p.stat().st_mtime)
    if not found:
        raise UsageError(f"no e2e-*.json in {folder}", hint="run: .venv/bin/python bench/e2e_bench.py")
    return found[-1]


def load(path: str | Path | None = None) -> dict:
    """A benchmark result (the newest in bench/results when ``path`` is empty)."""
    path = Path(path) if path else latest()
    result = json.loads(path.read_text())
    if result.get("benchmark") != "e2e_fused_vs_separate":
        raise UsageError(f"{path} is not an e2e benchmark result")
    result["_path"] = str(path)
    return result


def frame(result: dict) -> pd.DataFrame:
    """One row per (release, case, mode): ms per sample (mean, median), runs; unsupported releases omitted."""
    rows = []
    for r in result["releases"]:
        for case in CASES:
            if case not in r:
                continue
            for mode in MODES:
                t = r[case][mode]
                rows.append(
                    {
                        "release": r["release"],
                        "case": case,
                        "mode": mode,
                        "ms_per_sample": t["per_sample_ms"],
                        "ms_per_sample_median": t["per_sample_ms_median"],
                        "runs": t["runs"],
                        "separate_over_fused": r[case]["separate_over_fused"],
                    }
                )
    df = pd.DataFrame(rows)
    if not df.empty:
        order = sorted(df["release"].unique(), key=release_key)
        df["release"] = pd.Categorical(df["release"], categories=order, ordered=True)
    return df


def skipped(result: dict) -> pd.DataFrame:
    """Releases without numbers, and why."""
    return pd.DataFrame(
        [
            {"release": r["release"], "why": r.get("unsupported") or r.get("error")}
            for r in result["releases"]
            if "unsupported" in r or "error" in r
        ]
    )


def plot(result: dict):
    """Per case: ms per sample of both modes by release (bars) and separate / fused (line, right axis)."""
    df = frame(result)
    fig, axes = plt.subplots(1, len(CASES), figsize=(6 * len(CASES), 4), squeeze=False)
    for ax, case in zip(axes[0], CASES):
        sub = df[df["case"] == case]
        if sub.empty:
            ax.set_axis_off()
            continue
        wide = sub.pivot_table(index="release", columns="mode", values="ms_per_sample", observed=True)
        wide.plot.bar(ax=ax, color={"fused": "#1a9850", "separate": "#fdae61"}, rot=0)
        ax.set_ylabel("ms per sample (mean)")
        ax.set_title(f"{case}: {'1 request' if case == 'single' else str(result['settings']['batch']) + ' per batch'}")
        ratio = sub.drop_duplicates("release").set_index("release")["separate_over_fused"].reindex(wide.index)
        twin = ax.twinx()
        twin.plot(range(len(ratio)), ratio.values, "k.-", label="separate / fused")
        twin.axhline(1.0, color="grey", lw=0.8, ls=":")
        twin.set_ylabel("separate / fused")
        twin.set_ylim(0, max(2.0, float(ratio.max()) * 1.1))
    fig.suptitle(
        f"e2e ResNet-18: fused graph vs transforms run separately ({result['settings']['runs']} runs after "
        f"{result['settings']['warmup']} warm-up)",
        fontsize=10,
    )
    fig.tight_layout()
    return fig
