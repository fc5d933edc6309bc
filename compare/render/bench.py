"""`compare bench` in words: bench.md (the settings, then one section per part that ran) and the few lines
the terminal gets. Takes the result as bench.json holds it; reads no files."""

from __future__ import annotations

import json
import math

from compare.analysis.bench import OVERHEAD_TARGET, TUNING_AIM
from compare.render.blocks import DASH, Block, Code, Heading, Para, Table, render_markdown

CLEARLY_FASTER = "95% interval above 1 and faster in every round"


def _ms(seconds: float | None) -> str:
    return DASH if seconds is None else f"{seconds * 1e3:.3f}"


def _x(value: float | None, spec: str = ".3f") -> str:
    return DASH if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, spec)


def _ci(pair: list | None) -> str:
    if not pair or pair[0] is None:
        return DASH
    return f"{pair[0]:.3f}-{pair[1]:.3f}"


def _loads(loads: list[float]) -> str:
    return "/".join(f"{x:.1f}" for x in loads)


def _size(n: int) -> str:
    return f"{n // 2**20} MiB" if n >= 2**20 else f"{n // 2**10} KiB"


def sweep_choice(chosen: list[str]) -> str:
    if not chosen:
        return f"the defaults stay: no configuration was clearly faster than them ({CLEARLY_FASTER})"
    names = ", ".join(f"`{c}`" for c in chosen)
    return f"chosen {names}, clearly faster than the defaults ({CLEARLY_FASTER}; the best of each dimension)"


def markdown(result: dict) -> str:
    """bench.md: the sections in this order, each only where its part ran (or had something to say)."""
    sections = (_overhead, _costs, _allreduce, _decomposition, _sweeps, _tuned_effect, _scaling, _startup, _e2e,
                _tuned_file, _failures)
    return render_markdown([*_intro(result), *(block for section in sections for block in section(result))])


def _intro(result: dict) -> list[Block]:
    s = result["settings"]
    return [
        Heading(1, "Benchmarks: each framework against its limits, and the harness's cost"),
        Para(f"Command: `{result['command']}`. Workload `{s['workload']}`, batch {s['batch_size']} per worker, "
             f"{s['threads']} torch thread(s) per worker, {result['machine'].get('cpu_count')} CPU(s) "
             f"({result['machine'].get('cpu_model')}), load average (1, 5, 15 min) "
             f"{_loads(result['load_average_at_start'])} at the start, {_loads(result['load_average_at_end'])} at the "
             f"end. Total wall time {result['wall_s']:.0f} s. Every ratio "
             f"compares runs made side by side in this invocation (interleaved, medians); absolute times on a "
             f"shared machine are noise."),
    ]


def _overhead(result: dict) -> list[Block]:
    if not result.get("overhead"):
        return []
    s = result["settings"]
    return [Heading(2, f"Harness overhead (target: project/bare <= {OVERHEAD_TARGET})"),
            Para("In one process (the figure held to the target): median step of the project's own step, "
                 "Trainer._train_step on hvd_impl's / native_impl's backend, over the median bare step "
                 "(benchmarks/bare_*.py: same model, data, batch and threads), in interleaved blocks of "
                 f"the same process under the framework's launcher (horovodrun --mpi, torchrun), "
                 f"{s['block_rounds']} blocks each per launch, {s['rounds']} launch(es). Through the "
                 "launchers: the implementations' own launches (median step_time_s, the first "
                 f"{s['warmup']} steps dropped) over the bare loops' launches, interleaved; separate "
                 "processes, so this carries the launch-to-launch spread of a shared machine. Whole run: "
                 "run.json duration_s per step (metric gathers between steps and one evaluation "
                 "included) over the bare loop's mean step."),
            Table(["framework", "np", "bare ms", "project ms", "project/bare", "95% CI", "blocks (min-max)",
                   "meets", "launches: project/bare", "per round", "whole run"],
                  [[r["framework"], str(r["world_size"]), _ms(r["bare_median_s"]), _ms(r["project_median_s"]),
                    _x(r["ratio"]), _ci(r["ratio_ci"]),
                    f"{min(r['per_block']):.2f}-{max(r['per_block']):.2f}" if r["per_block"] else DASH,
                    "yes" if r["meets_target"] else "no", _x(r["launch_ratio"]),
                    ", ".join(f"{v:.3f}" for v in r["launch_per_round"]), _x(r["whole_run_ratio"])]
                   for r in result["overhead"]])]


def _costs(result: dict) -> list[Block]:
    if not result.get("loop_costs"):
        return []
    return [Heading(3, "What the project's step costs beyond the bare step (one process, no framework)"),
            Table(["item", "median step ms", "cost us/step", "of the bare step"],
                  [[r["item"], _ms(r["median_s"]), f"{r['cost_s'] * 1e6:.1f}", f"{r['cost_fraction'] * 100:+.1f}%"]
                   for r in result["loop_costs"]["items"]])]


def _allreduce(result: dict) -> list[Block]:
    if not result.get("allreduce"):
        return []
    launchers = [r["launcher"] for r in result["allreduce"]]
    copies = ", ".join(f"{r['launcher']}: {r['memory_copy_gbps'].get('numpy_1_thread', 0):.1f}"
                       for r in result["allreduce"] if r.get("memory_copy_gbps"))
    return [Heading(2, "Allreduce bandwidth at np 2 (GB/s: bus / algorithm)"),
            Para("bus = algorithm x 2(n-1)/n (nccl-tests); at n = 2 they are equal. Memory copy, one "
                 f"thread, read + write bytes, measured in each process before its sweep (GB/s): {copies}."),
            Table(["size", *launchers, "best bus / memory copy"],
                  [[_size(line["bytes"]),
                    *[f"{line[k]['busbw_gbps']:.3f} / {line[k]['algbw_gbps']:.3f}" if k in line else DASH
                      for k in launchers], _x(line["best_bus_over_copy"])]
                   for line in result["allreduce_table"]])]


def _decomposition(result: dict) -> list[Block]:
    if not result.get("decomposition"):
        return []
    return [Heading(2, "The np 2 step, decomposed (bare loops, default settings)"),
            Para("Measured inside the step by a probe interleaved with it in the same process (means, "
                 "which add up): compute = zero_grad, forward and backward until the last gradients are "
                 "handed to communication; exposed = the wait from then until the averaged gradients are "
                 "there (DDP: the rest of backward(); Horovod: optimizer.synchronize()); rest = data + "
                 "optimizer step. accounted = the phases summed over the mean of the same steps timed "
                 "whole (the slowest rank's), either way round; probed/default = the probe's median step "
                 "over the default blocks' median (is the probed step the default step?). Floors "
                 "(medians of probes in the same process): the same step with no "
                 "communication; sync = (that step + an allreduce of one number) - that step; wire = "
                 "allreduce of the gradients - allreduce of one number. overlap bound = step / (step - "
                 "min(wire, compute)): the most a bucket or fusion setting could win by hiding all the "
                 "bytes behind compute. floors explain = (no-comm step + sync + wire) / median step: how "
                 "much of the step these independent probes predict."),
            Table(["framework", "probed step ms (mean)", "compute ms", "exposed comm ms", "rest ms",
                   "accounted", "probed/default", "default step ms (median)", "no-comm step ms",
                   "np 1 step ms", "sync floor ms", "wire floor ms",
                   "floors explain", "overlap bound"],
                  [[f"{r['framework']} ({r['controller']})", _ms(r["probe_step_mean_s"]), _ms(r["compute_s"]),
                    _ms(r["exposed_s"]), _ms(r["rest_s"]), _x(r["accounted"]), _x(r["probe_over_default"]),
                    _ms(r["step_median_s"]),
                    _ms(r["no_comm_step_s"]), _ms(r["np1_step_s"]), _ms(r["sync_s"]), _ms(r["wire_s"]),
                    _x(r["floors_explain"]), _x(r["overlap_bound"])] for r in result["decomposition"]])]


def _sweeps(result: dict) -> list[Block]:
    if not result.get("sweeps"):
        return []
    blocks: list[Block] = [Heading(2, "Tuning sweep at np 2 (bare loops)")]
    for name, sweep in result["sweeps"].items():
        how = ("all configurations in one process, interleaved in blocks" if sweep["launches"] == 1 else
               f"one launch per configuration (Horovod reads its knobs once), {sweep['launches']} launches "
               "interleaved in rounds; per round = each round's launch against that round's default")
        blocks += [Para(f"**{name}** ({sweep['controller']}; {how}): {sweep_choice(sweep['chosen'])}."),
                   Table(["configuration", "median step ms", "throughput vs default", "95% CI", "per round", "n"],
                         [[r["name"], _ms(r["median_s"]), _x(r.get("gain")), _ci(r.get("gain_ci")),
                           ", ".join(f"{v:.2f}" for v in r.get("per_round", [])), str(r["n"])]
                          for r in sweep["configs"]])]
    return blocks


def _tuned_effect(result: dict) -> list[Block]:
    if not result.get("tuned_effect"):
        return []
    return [Heading(2, f"Tuned against default, through the real implementations (aim: >= {TUNING_AIM}x)"),
            Para("Each framework's sweep choice, run through its implementation and launcher against "
                 "the defaults (interleaved launches at np 2). tuned.json keeps a choice only when it is "
                 "confirmed here: faster in every round and its 95% interval above 1."),
            Table(["framework", "tuned options", "default ms", "tuned ms", "throughput tuned/default",
                   "95% CI", "per round", "confirmed"],
                  [[r["framework"], " ".join(r["options"]) or "(defaults)", _ms(r.get("default_median_s")),
                    _ms(r.get("tuned_median_s")), _x(r.get("gain")), _ci(r.get("gain_ci")),
                    ", ".join(f"{v:.3f}" for v in r.get("per_round", [])),
                    {True: "yes", False: "no"}.get(r.get("confirmed"), DASH)] for r in result["tuned_effect"]])]


def _scaling(result: dict) -> list[Block]:
    if not result.get("scaling"):
        return []
    return [Heading(2, "Scaling efficiency at np 2 (step at np 1 / step at np 2)"),
            Table(["framework", "loop", "np 1 ms", "np 2 ms", "efficiency"],
                  [[r["framework"], r["variant"], _ms(r["np1_median_s"]), _ms(r["np2_median_s"]),
                    _x(r["efficiency"], ".2f")] for r in result["scaling"]])]


def _startup(result: dict) -> list[Block]:
    if not result.get("startup"):
        return []
    return [Heading(2, "Start-up: launch to first step (the project's launches; medians)"),
            Table(["launcher", "np", "launch to first step s", "training s", "after training s", "total s",
                   "bare loop: launch to first step s", "n"],
                  [[r["launcher"], str(r["world_size"]), _x(r["first_step_s"], ".2f"), _x(r["train_s"], ".2f"),
                    _x(r["after_s"], ".2f"), _x(r["total_s"], ".2f"), _x(r["bare_first_step_s"], ".2f"),
                    str(r["n"])] for r in result["startup"]])]


def _e2e(result: dict) -> list[Block]:
    if not result.get("e2e"):
        return []
    e = result["e2e"]
    return [Heading(2, "End to end"),
            Para(f"`{e['command']}` (defaults: np 1 and 2, both frameworks, 3 seeds, reference): "
                 f"{e['wall_s']:.0f} s wall, exit status {e['exit_status']}.")]


def _tuned_file(result: dict) -> list[Block]:
    if not result.get("tuned"):
        return []
    return [Heading(2, "tuned.json"), Code(json.dumps(result["tuned"], indent=2))]


def _failures(result: dict) -> list[Block]:
    if not result["failures"]:
        return []
    return [Heading(2, "Failures"), Table(["launch", "error", "log"],
                                          [[f["launch"], f["error"], f.get("log", "")] for f in result["failures"]])]


def terminal_summary(result: dict) -> list[str]:
    """A few lines for the terminal; the whole Markdown goes to bench.md."""
    lines = []
    for row in result.get("overhead") or []:
        lines.append(f"harness overhead {row['framework']} np {row['world_size']}: project/bare step "
                     f"{row['ratio']:.2f} (95% CI {row['ratio_ci'][0]:.2f}-{row['ratio_ci'][1]:.2f})")
    for name, sweep in (result.get("sweeps") or {}).items():
        lines.append(f"sweep {name}: {', '.join(sweep['chosen']) or 'the defaults stay'}")
    for row in result.get("tuned_effect") or []:
        verdict = {True: "confirmed", False: "not confirmed"}.get(row.get("confirmed"), "")
        gain = row.get("gain")
        lines.append(f"tuned {row['framework']}: {' '.join(row['options']) or '(defaults)'}"
                     + (f", throughput x{gain:.3f}" if gain is not None else "") + (f", {verdict}" if verdict else ""))
    if result.get("e2e"):
        lines.append(f"end to end: {result['e2e']['wall_s']:.0f} s, exit status {result['e2e']['exit_status']}")
    if result.get("failures"):
        lines.append(f"{len(result['failures'])} launch(es) failed: see the Failures section")
    lines.append(f"wall time: {result['wall_s']:.0f} s")
    return lines
