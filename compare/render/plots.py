"""The report's figures. Each function writes one PNG atomically and returns its path (None: no data).

Figures are built on matplotlib's Agg canvas directly, without pyplot, so that nothing depends on a
display or on pyplot's global state.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from compare.analysis.records import RunRecord
from compare.analysis.summary import Group, group_runs
from compare.analysis.timing import measured
from compare.names import FRAMEWORKS, JUDGED, display
from compare.render.speed_up import faster_by
from workload.files import write_atomic

STYLE = {
    "horovod": {"color": "tab:blue", "linestyle": "-"},
    "ddp": {"color": "tab:orange", "linestyle": "--"},
    "reference": {"color": "tab:gray", "linestyle": ":"},
}
COMPARISON_COLORS = {
    "horovod_vs_ddp": "tab:purple",
    "horovod_vs_reference": "tab:blue",
    "ddp_vs_reference": "tab:orange",
}
# Log axes cannot show an exact 0 (bit-identical losses); draw it at this floor instead.
REL_DIFF_FLOOR = 1e-12
DPI = 110


def new_figure(n_panels: int, *, width: float = 5.0, height: float = 3.8) -> tuple[Figure, list]:
    fig = Figure(figsize=(width * n_panels, height), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, n_panels, squeeze=False)[0]
    return fig, list(axes)


def save_figure(fig: Figure, path: Path) -> Path:
    """Write to a temporary file next to path, then rename: a reader never sees a half-written PNG."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    write_atomic(path, buffer.getvalue())
    return path


def mean_band(curves: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean, min and max over seeds, cut to the shortest curve."""
    n = min(len(c) for c in curves)
    stacked = np.vstack([c[:n] for c in curves])
    return stacked.mean(axis=0), stacked.min(axis=0), stacked.max(axis=0)


def by_world_size(groups: dict[tuple[str, int], Group]) -> dict[int, dict[str, Group]]:
    levels: dict[int, dict[str, Group]] = {}
    for (framework, world_size), group in sorted(groups.items(), key=lambda item: item[0][1]):
        if framework in JUDGED:
            levels.setdefault(world_size, {})[framework] = group
    return levels


def plot_loss_curves(groups: dict[tuple[str, int], Group], path: Path) -> Path | None:
    """Training loss per step, one panel per world size: mean over seeds with the min-max band."""
    levels = {
        ws: frameworks
        for ws, frameworks in by_world_size(groups).items()
        if any(run.steps for group in frameworks.values() for run in group.values())
    }
    if not levels:
        return None
    fig, axes = new_figure(len(levels))
    for ax, (world_size, frameworks) in zip(axes, levels.items(), strict=True):
        for framework in JUDGED:
            curves = [r.losses for r in frameworks.get(framework, {}).values() if r.steps]
            if not curves:
                continue
            mean, low, high = mean_band(curves)
            steps = np.arange(1, len(mean) + 1)
            style = STYLE[framework]
            ax.plot(steps, mean, label=f"{display(framework)} ({len(curves)} seeds)", **style)
            ax.fill_between(steps, low, high, color=style["color"], alpha=0.15, linewidth=0)
        ax.set_title(f"Training loss, np {world_size}")
        ax.set_xlabel("step")
        ax.set_ylabel("loss (mean over seeds, band: min-max)")
        ax.legend()
    return save_figure(fig, path)


def plot_rel_diffs(analysis: dict, path: Path) -> Path | None:
    """Per-step relative loss difference of each compared pair and seed, against the tolerance."""
    levels = [level for level in analysis["levels"] if level["comparisons"]]
    if not levels:
        return None
    fig, axes = new_figure(len(levels))
    for ax, level in zip(axes, levels, strict=True):
        for name, comparison in level["comparisons"].items():
            label = f"{display(comparison['a'])} vs {display(comparison['b'])}"
            for i, seed_result in enumerate(comparison["seeds"]):
                losses = seed_result["losses"]
                # None stands for a non-finite difference in the JSON data: leave a gap.
                diffs = np.array([np.nan if d is None else d for d in losses["rel_diffs"]], dtype=float)
                if not diffs.size:
                    continue
                color = COMPARISON_COLORS.get(name, "black")
                ax.plot(losses["steps"], np.maximum(diffs, REL_DIFF_FLOOR), color=color, alpha=0.7, linewidth=1,
                        label=label if i == 0 else None)
                if i == 0 and name == "horovod_vs_ddp":
                    ax.plot(losses["steps"], losses["tolerances"], color="red", linestyle="--", linewidth=1,
                            label=f"tolerance ({level['band']['source']} band)")
        ax.axvline(analysis["settings"]["k"], color="black", linestyle=":",
                   label=f"end of the tight window ({analysis['settings']['k']})")
        ax.set_yscale("log")
        ax.set_title(f"Relative loss difference per step, np {level['world_size']}")
        ax.set_xlabel("step")
        ax.set_ylabel(f"|a-b| / max(|a|,|b|)  (0 drawn at {REL_DIFF_FLOOR:g})")
        ax.legend(fontsize="small")
    return save_figure(fig, path)


def plot_step_times(groups: dict[tuple[str, int], Group], warmup: int, path: Path) -> Path | None:
    """Distribution of measured step times per framework and world size (after warmup)."""
    data, labels, colors = [], [], []
    for world_size, frameworks in by_world_size(groups).items():
        for framework in JUDGED:
            runs = frameworks.get(framework, {}).values()
            times = np.concatenate([measured(r.step_times, warmup) for r in runs]) if runs else np.empty(0)
            if times.size:
                data.append(times * 1e3)
                labels.append(f"{display(framework)}\nnp {world_size}")
                colors.append(STYLE[framework]["color"])
    if not data:
        return None
    fig, (ax,) = new_figure(1, width=max(5.0, 1.1 * len(data)))
    boxes = ax.boxplot(data, patch_artist=True, flierprops={"markersize": 2}, medianprops={"color": "black"})
    for patch, color in zip(boxes["boxes"], colors, strict=True):
        patch.set_facecolor(color)
        patch.set_alpha(0.5)
    ax.set_xticks(range(1, len(labels) + 1), labels)
    ax.set_title(f"Step time after {warmup} warm-up steps (the parity launch, all seeds)")
    ax.set_ylabel("step time (ms, slowest rank)")
    return save_figure(fig, path)


def plot_scaling(analysis: dict, path: Path) -> Path | None:
    """Throughput and scaling efficiency against world size, per framework: the summary's figures."""
    series: dict[str, list[tuple[int, float | None, float | None]]] = {}
    for level in analysis["levels"]:
        for framework, entry in level["figures"].items():
            if framework in FRAMEWORKS and entry["throughput"]:
                series.setdefault(framework, []).append(
                    (level["world_size"], entry["throughput"], entry["scaling_efficiency"])
                )
    if not series:
        return None
    fig, (ax_thr, ax_eff) = new_figure(2)
    for framework, points in series.items():
        sizes = [p[0] for p in points]
        style = {**STYLE[framework], "marker": "o", "label": display(framework)}
        ax_thr.plot(sizes, [p[1] for p in points], **style)
        eff = [(p[0], p[2]) for p in points if p[2] is not None]
        if eff:
            ax_eff.plot([p[0] for p in eff], [p[1] for p in eff], **style)
    ax_eff.axhline(1.0, color="black", linewidth=0.8, label="ideal")
    for ax in (ax_thr, ax_eff):
        ax.set_xlabel("world size (processes)")
        ax.set_xticks(sorted({p[0] for points in series.values() for p in points}))
        ax.legend()
    ax_thr.set_title("Throughput")
    ax_thr.set_ylabel("samples / s (global batch / step time, as the summary)")
    ax_eff.set_title("Scaling efficiency vs the same framework at np 1")
    ax_eff.set_ylabel("throughput_n / (n x throughput_1)")
    ax_eff.set_ylim(bottom=0)
    return save_figure(fig, path)


def write_plots(runs: list[RunRecord], analysis: dict, out_dir: Path | str) -> list[Path]:
    """Every figure that has data, as PNGs in out_dir."""
    out_dir = Path(out_dir)
    groups = group_runs(runs)
    warmup = analysis["settings"]["warmup"]
    written = [
        plot_loss_curves(groups, out_dir / "loss_curves.png"),
        plot_rel_diffs(analysis, out_dir / "rel_diff.png"),
        plot_step_times(groups, warmup, out_dir / "step_times.png"),
        plot_scaling(analysis, out_dir / "scaling.png"),
    ]
    return [p for p in written if p is not None]


# The speed-ups a sweep's axis is marked at, on either side of 1 (a Horovod/DDP ratio of 1/f: Horovod f times faster)
SPEED_UP_TICKS = (1.1, 1.25, 1.5, 2, 3, 5, 10, 20, 50, 100)


def speed_up_ticks(low: float, high: float) -> list[float]:
    """Where a log axis of Horovod/DDP ratios from `low` to `high` is marked: 1 and the usual speed-ups either way
    that fall in the range, or the ends where none does."""
    marks = sorted({1.0, *SPEED_UP_TICKS, *(1 / f for f in SPEED_UP_TICKS)})
    inside = [mark for mark in marks if low <= mark <= high]
    return inside if len(inside) >= 2 else sorted({*inside, low, high})


def plot_size_sweep(points: list[dict], crossover_bytes: float | None, path: Path) -> Path | None:
    """Which side is faster, and by how much, against gradient size (compare run --sweep-model-size): drawn as
    the Horovod/DDP step-time ratio on a log axis (so that a speed-up looks the same either way) and marked in the
    faster side's speed-up: each round's, the geometric mean over rounds with its interval, the line of equal
    speed and the crossover, if any."""
    shown = [p for p in points if p["ratio"]]
    if not shown:
        return None
    fig, (ax,) = new_figure(1, width=6.5, height=4.2)
    sizes = np.array([p["gradient_bytes"] for p in shown], dtype=float) / 1e6
    ratios = np.array([p["ratio"] for p in shown])
    low = np.array([p["ci_low"] if p["ci_low"] is not None else p["ratio"] for p in shown])
    high = np.array([p["ci_high"] if p["ci_high"] is not None else p["ratio"] for p in shown])
    ax.errorbar(sizes, ratios, yerr=[ratios - low, high - ratios], color="tab:purple", marker="o", capsize=3,
                label="speed-up (geometric mean over rounds, 95% CI)")
    for size, point in zip(sizes, shown, strict=True):
        ax.scatter([size] * len(point["round_ratios"]), point["round_ratios"], color="tab:gray", s=10, zorder=3)
    ax.scatter([], [], color="tab:gray", s=10, label="each round")
    ax.axhline(1.0, color="black", linewidth=0.8)
    if crossover_bytes:
        ax.axvline(crossover_bytes / 1e6, color="tab:red", linestyle=":",
                   label=f"crossover near {crossover_bytes / 1e6:.3g} MB")
    ax.set_xscale("log")
    ax.set_yscale("log")
    every = [*low, *high, *(r for p in shown for r in p["round_ratios"]), 1.0]
    bottom, top = min(every) / 1.05, max(every) * 1.05
    ax.set_ylim(bottom, top)
    ax.yaxis.set_major_locator(FixedLocator(speed_up_ticks(bottom, top)))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_major_formatter(FuncFormatter(lambda ratio, _: faster_by(ratio)))
    ax.set_xlabel("gradient size (MB, float32)")
    ax.set_ylabel("faster side, by its speed-up in step time")
    ax.set_title(f"Which is faster as the gradient grows (np {shown[0]['world_size']})")
    ax.legend(fontsize="small")
    return save_figure(fig, path)
