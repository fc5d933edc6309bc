"""report.json, report.md and a self-contained report.html from the analysis, plus a terminal table.

The report is built once as a list of blocks (compare/render/blocks.py) and rendered to Markdown and to
HTML, so the two always say the same thing.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from compare.analysis.records import RunRecord, jsonable
from compare.names import JUDGED, Parity, display
from compare.render.blocks import (
    DASH,
    Block,
    Bullets,
    Card,
    Code,
    Fold,
    Heading,
    Image,
    Para,
    Table,
    num,
    render_html,
    render_markdown,
    text_table,
)
from compare.render.causes import cause_lines
from compare.render.plots import write_plots
from compare.render.speed import (
    figures_note,
    source_cell,
    speed_glance,
    speed_line,
    speed_sentence,
    speed_summary_blocks,
    timing_blocks,
    tradeoff_blocks,
)
from compare.render.time_to_target import time_to_target_blocks, time_to_target_line
from compare.render.verdicts import parity_blocks, parity_line
from workload.files import write_atomic

REPORT_SCHEMA_VERSION = 1


# ---- content --------------------------------------------------------------------------------------------

SUMMARY_HEADERS = [
    "framework", "np", "step ms", "samples/s", "scaling eff.", "timed in",
    "step-wise max rel diff vs other framework", "vs reference",
]


def summary_cells(row: dict) -> list[str]:
    return [
        display(row["framework"]),
        str(row["world_size"]),
        num(row["step_ms"], ".2f"),
        num(row["samples_per_s"], ".1f"),
        num(row["scaling_efficiency"], ".2f"),
        source_cell(row),
        num(row["max_rel_diff_vs_other"], ".2e"),
        num(row["max_rel_diff_vs_reference"], ".2e"),
    ]


def summary_table(analysis: dict) -> str:
    """The summary as a plain-text aligned table, for a terminal (figures_note says what its figures are)."""
    return text_table(SUMMARY_HEADERS, [summary_cells(r) for r in analysis["summary"]])


def verdict_card(analysis: dict, plots: list[Path]) -> Card:
    """The report's first screen: the outcome, its sentences, and beside them the per-step relative
    difference (the parity verdict's evidence) and the speed ratios with their intervals."""
    outcome = Parity(analysis["verdict"]["parity"])
    evidence = [Image(PLOT_TITLES[p.name], p.name) for p in plots if p.name == CARD_PLOT]
    return Card(outcome, outcome.words, verdict_blocks(analysis),
                evidence + speed_glance(analysis))


def verdict_blocks(analysis: dict) -> list[Block]:
    verdict = analysis["verdict"]
    warnings = sorted({f"{d['name']} {d['a']} vs {d['b']}" for level in analysis["levels"]
                       for c in level["comparisons"].values() for d in c["job"]["differences"]
                       if d["kind"] == "version"})
    return [
        Heading(1, f"Horovod vs DDP: {Parity(verdict['parity']).words}"),
        Para(f"**{parity_line(analysis)}**"),
        *([Para(f"**Warning: versions differ between the sides:** {'; '.join(warnings)}.")] if warnings else []),
        Para(f"**Speed:** {speed_line(analysis)}."),
        *speed_summary_blocks(analysis),
        *([Para(f"**Time to target:** {line}.")] if (line := time_to_target_line(analysis)) else []),
        *([Para(f"**Compared:** {compared(analysis['tuning'])}.")] if analysis.get("tuning") else []),
        *([Para(f"**Imported:** {imported(analysis['imported'])}.")] if analysis.get("imported") else []),
    ]


def imported(runs: list[dict]) -> str:
    """The runs that came from logs (`compare import`), not from launches here: judged on their losses,
    never timed."""
    return "; ".join(f"{display(r['framework'])} np {r['world_size']} seed {r['seed']} from `{r['source']}` "
                     f"({r['format']}, sha256 {str(r['sha256'])[:12]}, imported {r['imported_at']})" for r in runs)


def compared(tuning: dict) -> str:
    """Which configurations ran: the frameworks' defaults, or the tuned settings and where they came from."""
    if tuning["configuration"] != "tuned":
        return "defaults vs defaults (`--tuned FILE` compares tuned settings)"
    settings = []
    for name, label in (("horovod", "Horovod"), ("ddp", "DDP")):
        text = tuning["settings"].get(name, "")
        settings.append(f"{label} `{text}`" if text else f"{label} at its defaults")
    return f"tuned vs tuned, from `{tuning['source']}`: {', '.join(settings)}"


PLOT_TITLES = {
    "loss_curves.png": "Training loss curves",
    "rel_diff.png": "Per-step relative loss difference",
    "step_times.png": "Step-time distributions",
    "scaling.png": "Throughput and scaling efficiency",
}


CARD_PLOT = "rel_diff.png"  # shown in the verdict card, not again under Plots


def plot_blocks(plots: list[Path]) -> list[Block]:
    plots = [p for p in plots if p.name != CARD_PLOT]
    if not plots:
        return []
    blocks: list[Block] = [Heading(2, "Plots")]
    for path in plots:
        blocks.append(Image(PLOT_TITLES.get(path.name, path.stem), path.name))
    return blocks


def failure_blocks(analysis: dict) -> list[Block]:
    failures = analysis["failures"]
    if not failures:
        return []
    blocks: list[Block] = [
        Heading(2, "Failures"),
        Para(f"{len(failures)} run(s) did not end well and are left out of the verdicts."),
    ]
    for f in failures:
        blocks.append(Para(
            f"**{display(f['framework'])} np {f['world_size']} seed {f['seed']}** ({f['status']}, "
            f"{f.get('steps_recorded', 0)} steps recorded): {f['error']} — `{f['path']}`"
        ))
        if f.get("log_tail"):
            blocks.append(Code(str(f["log_tail"]).rstrip()))
    return blocks


def _value(value: object) -> str:
    if value is None or value == "" or value == []:
        return DASH
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items()) or DASH
    if isinstance(value, list):
        return ", ".join(map(str, value))
    return str(value).replace("\x00", "").strip()  # MPI's version string ends in a NUL


def sides_table(sides: dict) -> Table:
    """Each side's versions, launcher, threads and tuning variables, side by side: one column per framework."""
    rows: dict[str, list[str]] = {}
    groups = (lambda side: side.get("versions") or {},  # versions first, then how it ran, then the variables
              lambda side: {k: side.get(k) for k in ("launcher", "backend", "threads")},
              lambda side: side.get("env") or {})
    for group in groups:
        for column, side in enumerate(sides.values()):
            for key, value in group(side).items():
                rows.setdefault(key, [DASH] * len(sides))[column] = _value(value)
    return Table(["component", *(display(name) for name in sides)], [[key, *cells] for key, cells in rows.items()])


def environment_blocks(environment: dict, commands: list[str]) -> list[Block]:
    blocks: list[Block] = [Heading(2, "Environment")]
    sides = environment.get("sides") or {}
    versions = environment.get("versions") or {}
    if sides:
        blocks.append(sides_table(sides))
    elif versions:
        blocks.append(Table(["component", "version"], [[k, _value(v)] for k, v in versions.items()]))
    host = environment.get("host") or {}
    if host:
        blocks.append(Table(["host", "value"], [[k, _value(v)] for k, v in host.items()]))
    rest = {k: v for k, v in environment.items() if k not in ("versions", "host", "sides")}
    if rest:
        blocks.append(Bullets([f"{k.replace('_', ' ')}: {_value(v)}" for k, v in rest.items()]))
    if commands:
        blocks.append(Para("Commands:"))
        blocks.append(Code("\n".join(commands)))
    return blocks


def report_blocks(analysis: dict, plots: list[Path], environment: dict, commands: list[str]) -> list[Block]:
    blocks: list[Block] = [verdict_card(analysis, plots)]
    blocks += [Heading(2, "Summary"), Table(SUMMARY_HEADERS, [summary_cells(r) for r in analysis["summary"]])]
    if (note := figures_note(analysis)) is not None:
        blocks.append(Para(f"{note[0].upper()}{note[1:]}."))
    if analysis["notes"]:
        blocks += [Para("Notes:"), Bullets(analysis["notes"])]
    blocks += failure_blocks(analysis)  # never folded away
    blocks += [Fold("Details: parity step by step, timing, trade-offs, plots, environment")]
    blocks += parity_blocks(analysis)
    blocks += timing_blocks(analysis) + time_to_target_blocks(analysis) + tradeoff_blocks(analysis)
    blocks += plot_blocks(plots)
    blocks += environment_blocks(environment, commands)
    return blocks


def environment_from_runs(runs: list[RunRecord]) -> dict:
    """Each framework's versions, launcher, threads and tuning variables as its first run that ended well
    recorded them (side by side under "sides"; "versions" merges them), and the host."""
    sides: dict[str, dict] = {}
    order = {name: index for index, name in enumerate(JUDGED)}  # Horovod, DDP, then the reference
    for framework in sorted({r.framework for r in runs}, key=lambda f: (order.get(f, len(order)), f)):
        mine = [r for r in runs if r.framework == framework]
        meta = next((r for r in mine if r.ok), mine[0]).meta
        sides[framework] = {"versions": meta.get("versions") or {}, "launcher": meta.get("launcher"),
                            "backend": meta.get("backend"), "threads": meta.get("threads"),
                            "env": meta.get("env") or {}}
    source = next((r for r in runs if r.ok), runs[0] if runs else None)
    if source is None:
        return {}
    versions: dict = {}
    for side in sides.values():
        versions.update({k: v for k, v in side["versions"].items() if versions.get(k) is None})
    return {"sides": sides, "versions": versions, "host": source.meta.get("host") or {}}


def with_words(analysis: dict) -> dict:
    """The analysis as report.json holds it: beside the figures, the sentences the report gives them (the
    speed verdict, each level's, each comparison's likely causes), for readers of the file."""
    levels = []
    for level in analysis["levels"]:
        comparisons = {name: {**comparison, "likely_causes": cause_lines(comparison["causes"])}
                       for name, comparison in level["comparisons"].items()}
        speed = level.get("speed")
        if speed:
            speed = {**speed, "sentence": speed_sentence(speed)}
        levels.append({**level, "comparisons": comparisons, "speed": speed})
    return {**analysis, "verdict": {**analysis["verdict"], "speed": speed_line(analysis)}, "levels": levels}


def write_report(
    out_dir: Path | str,
    runs: list[RunRecord],
    analysis: dict,
    *,
    commands: list[str] | None = None,
    environment: dict | None = None,
) -> dict[str, Path]:
    """Write the plots, report.json, report.md and report.html into out_dir; return their paths.

    environment defaults to what the runs recorded (versions, host, threads, tuning variables).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    commands = list(commands or [])
    environment = environment if environment is not None else environment_from_runs(runs)
    plots = write_plots(runs, analysis, out_dir)
    document = {
        "schema_version": REPORT_SCHEMA_VERSION,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "analysis": with_words(analysis),
        "environment": environment,
        "commands": commands,
        "plots": [p.name for p in plots],
    }
    blocks = report_blocks(analysis, plots, environment, commands)
    report_json = json.dumps(jsonable(document), indent=2, allow_nan=False) + "\n"
    written = {
        name: out_dir / f"report.{name}" for name in ("json", "md", "html")
    }
    write_atomic(written["json"], report_json)
    write_atomic(written["md"], render_markdown(blocks))
    write_atomic(written["html"], render_html(blocks, out_dir))
    written.update({p.stem: p for p in plots})
    return written
