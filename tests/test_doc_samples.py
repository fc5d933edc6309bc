"""Every sample of output in README.md and docs/ is what its commands print (scripts/readme_samples.py, `make
samples`, made it): the cheap ones are run again here and must print the same, verbatim; the ones whose command
launches training are re-rendered from the records stored with them (docs/samples/NAME/), so that the text
cannot drift from the code. Only the figures a sample names as measured are masked."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, script_module

samples = script_module("readme_samples")
SAMPLES, STORE = samples.SAMPLES, samples.STORE


def shown_block(name: str) -> list[str]:
    """The sample's block as the page shows it."""
    try:
        return samples.shown_lines(name)
    except RuntimeError as exc:
        pytest.fail(str(exc))


def said_when(name: str) -> list[str]:
    """The block's lines after its first, having checked that the first says the command, date and commit."""
    first, *rest = shown_block(name)
    command = SAMPLES[name].shown[0]
    assert first.startswith(f"$ {command}{samples.MARK}"), first
    assert re.search(r"# made \d{4}-\d\d-\d\d at [0-9a-f]{7,}", first), f"{name}: no date and commit: {first}"
    return rest


def masked(lines: list[str], measured: tuple[str, ...]) -> list[str]:
    for pattern in measured:
        lines = [re.sub(pattern, "<measured>", line) for line in lines]
    return lines


def scratch_with_inputs(name: str, tmp_path: Path) -> Path:
    sample = SAMPLES[name]
    samples.copy_inputs(sample, tmp_path)
    if (STORE / name).is_dir():
        shutil.copytree(STORE / name, tmp_path, dirs_exist_ok=True)
    for path in sample.stored:
        assert (tmp_path / path).exists(), f"docs/samples/{name}/{path} is missing: make samples"
    return tmp_path


def stdout_of(command: list[str], cwd: Path) -> str:
    result = subprocess.run([sys.executable, *command], cwd=cwd, env=samples.scratch_env(), capture_output=True,
                            text=True, timeout=300, check=False)
    assert result.returncode in (0, 1, 4), result.stderr[-2000:]  # a verdict's exit, not a crash
    return result.stdout


def test_every_marked_block_has_a_sample_and_every_sample_a_block():
    marked = {name for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
              for name in re.findall(r"<!-- sample: ([\w-]+) -->", page.read_text(encoding="utf-8"))}
    assert marked == set(SAMPLES)


@pytest.mark.parametrize("name", [name for name, s in SAMPLES.items() if not s.launches])
def test_a_sample_is_what_its_commands_print_now(name, tmp_path):
    sample = SAMPLES[name]
    shown = said_when(name)
    outputs = samples.run_commands(sample.shown, scratch_with_inputs(name, tmp_path))
    assert masked(shown, sample.measured) == masked(samples.body(sample, outputs), sample.measured), \
        f"{sample.page}: the {name} sample is no longer what its commands print: make samples"


def test_the_script_rewrites_only_the_block_after_its_marker_and_keeps_its_indent():
    """A sample inside a list item is indented as a whole; the page around it is left as it was."""
    page = ("1. A step. It prints: <!-- sample: x -->\n   ```text\n   old line\n   ```\n\n"
            "Then: <!-- sample: y -->\n```text\nother\n```\n")
    new = samples.replace_block(page, "x", "```text\n$ python -m compare x\n\nline two\n```\n")
    assert new == ("1. A step. It prints: <!-- sample: x -->\n   ```text\n   $ python -m compare x\n\n   line two\n"
                   "   ```\n\nThen: <!-- sample: y -->\n```text\nother\n```\n")
    with pytest.raises(RuntimeError, match="no <!-- sample: z -->"):
        samples.replace_block(page, "z", "```text\n```\n")


# "speed launches: np 2 times 2 s (121 steps; no overhead measured; chosen from round 1)" (compare/commands/run.py)
WINDOW_LINE = re.compile(r"speed launches: np \d+ times [\d.]+ s \([\d,]+ steps; [^()]*\)"
                         r"(; np \d+ times [\d.]+ s \([\d,]+ steps; [^()]*\))*")


def compare_run_out(name: str) -> Path:
    """Where the sample's `compare run --out DIR` wrote its records (stored under docs/samples/NAME/)."""
    words = SAMPLES[name].shown[0].split()
    return STORE / name / words[words.index("--out") + 1]


@pytest.mark.parametrize("name", [name for name, s in SAMPLES.items()
                                  if s.launches and s.shown[0].startswith("python -m compare run ")])
def test_a_compare_run_sample_is_what_the_renderer_prints_for_its_records(name):
    """`compare run` launches for minutes: its sample is rendered again from the result record the run wrote
    (report.json's analysis, comparison.json, the rounds' design where it had one; stored with the sample) by
    the code that printed it, so that a change to what the run prints fails here until the sample is made
    again."""
    from compare.commands.report import terminal_lines
    from compare.commands.run import window_line
    from compare.commands.sequential_rounds import forecast_line
    from compare.render.speed import stop_line

    shown = said_when(name)
    out = compare_run_out(name)
    report = json.loads((out / "report.json").read_text())
    analysis, compared = report["analysis"], report["environment"].get("compared")
    comparison = json.loads((out / "comparison.json").read_text())
    said_as_it_ran = []  # the windows chosen from round 1, the first look's forecast, the stop (the design keeps them)
    if (out / "runs" / "sequential.json").is_file():
        design = json.loads((out / "runs" / "sequential.json").read_text())
        states = [level["speed"]["sequential"] if level.get("speed") else None for level in analysis["levels"]]
        if design.get("windows"):
            said_as_it_ran.append(window_line({int(ws): w for ws, w in design["windows"].items()}))
        forecasts = [own["forecast"] for _, own in sorted(design["world_sizes"].items(), key=lambda kv: int(kv[0]))
                     if own.get("forecast")]
        if forecasts:
            said_as_it_ran.append(forecast_line(forecasts, int(design.get("planned_rounds") or 0) or None))
        said_as_it_ran.append(stop_line(design, states))
    elif len(shown) > 1 and WINDOW_LINE.fullmatch(shown[1]):
        said_as_it_ran.append(shown[1])  # without rounds no design keeps the windows: their figures are the run's
    report_md = Path(str(out.relative_to(STORE / name))) / "report.md"
    expected = [f"comparing {compared}", *said_as_it_ran,
                *terminal_lines(analysis, comparison, compared, comparison["comparison_wall_s"], report_md)]
    assert shown == expected, f"the {name} sample is not what compare run prints for its records: make samples"


def test_the_bench_sample_is_what_the_renderer_makes_of_its_record():
    """`compare bench` launches for minutes: its printed lines and its bench.md are rendered again from the
    bench.json stored with the sample."""
    from compare.render.bench import markdown, terminal_summary

    shown = said_when("bench")
    result = json.loads((STORE / "bench" / "results" / "bench" / "bench.json").read_text())
    printed = [*terminal_summary(result), "bench: results/bench/bench.md  (also bench.json, tuned.json)"]
    cat = SAMPLES["bench"].shown[1]
    expected = [*printed, f"$ {cat}", *[line.rstrip() for line in markdown(result).rstrip("\n").split("\n")]]
    if not result.get("sweeps"):
        expected[len(printed) - 1] = "bench: results/bench/bench.md  (also bench.json)"
    assert shown == expected, "the bench sample is not what compare bench prints for its record: make samples"


def test_the_matrix_sample_is_what_the_renderer_makes_of_its_record():
    """`compare matrix` launches every feature's pair: its table is rendered again from the rows its matrix.json
    kept (verdicts, gaps, ratios, details), with each feature's forms and notes as the code declares them now."""
    from compare.commands.matrix import FEATURES
    from compare.render.blocks import render_markdown
    from compare.render.matrix import Row, matrix_table

    shown = said_when("matrix")
    document = json.loads((STORE / "matrix" / "results" / "matrix" / "matrix.json").read_text())
    features = {feature.name: feature for feature in FEATURES}
    rows = [Row(features[row["feature"]], row["verdict"], gap=row["max_rel_diff"],
                speed_ratio=row["step_time_ratio_hvd_over_ddp"], effect=row["effect"], detail=row["detail"])
            for row in document["rows"]]
    printed = f"{render_markdown([matrix_table(rows)])}\nmatrix: results/matrix/matrix.md  (also matrix.json)"
    expected = [line.rstrip() for line in printed.split("\n")]
    assert shown == expected, "the matrix sample is not what compare matrix prints for its record: make samples"


def test_the_faults_sample_is_what_the_renderer_makes_of_its_record():
    """`compare faults` launches every scenario: its table is rendered again from the results its faults.json
    kept."""
    from compare.analysis.faults import FaultResult
    from compare.render.blocks import render_markdown
    from compare.render.faults import fault_table

    shown = said_when("faults")
    document = json.loads((STORE / "faults" / "results" / "faults" / "faults.json").read_text())
    results = [FaultResult(**result) for result in document["results"]]
    printed = f"{render_markdown([fault_table(results)])}\nfaults: results/faults/faults.md  (also faults.json)"
    expected = [line.rstrip() for line in printed.split("\n")]
    assert shown == expected, "the faults sample is not what compare faults prints for its record: make samples"


def test_the_soak_sample_is_what_the_script_renders_from_its_record():
    """The soak launches a job per launcher and scenario: its summary is rendered again from the soak.json
    stored with the sample."""
    rendered_again("soak", "soak", "results/soak/soak.json",
                   "soak: results/soak/soak.md  (also soak.json, job logs in results/soak/jobs)")


def rendered_again(name: str, script: str, record: str, closing: str) -> dict:
    """A sample of scripts/SCRIPT.py, whose launches write RECORD: its render_markdown of the stored record, then
    the script's closing line, must be the sample's lines. Returns the record."""
    document = json.loads((STORE / name / record).read_text())
    printed = [*script_module(script).render_markdown(document).rstrip("\n").split("\n"), "", closing]
    assert said_when(name) == printed, f"the {name} sample is not what scripts/{script}.py prints for its record: " \
                                       "make samples"
    return document


def test_the_parity_tables_come_from_one_whole_campaign():
    """docs/parity.md's headroom tables are rendered (above, as any sample that does not launch) from the record
    of scripts/parity_headroom.py's campaign: that record must be the whole campaign, every workload at np 1, 2
    and 4 with its seeds and the bf16 part, not a quick look made with fewer."""
    headroom = script_module("parity_headroom")
    record = json.loads((STORE / "parity-fresh" / "results" / "headroom" / "headroom.json").read_text())
    assert record["complete"] and re.fullmatch(r"[0-9a-f]{7,}", record["commit"]), record["commit"]
    for workload, (_, seeds) in headroom.CAMPAIGNS.items():
        levels = record["campaigns"][workload]["levels"]
        assert sorted(map(int, levels)) == [1, 2, 4], workload
        assert {s["seed"] for level in levels.values() for s in level["pairs"]["ddp_ulp"]} == set(seeds), workload
    assert set(record["bf16"]) == set(headroom.BF16)
    shown_records = {sample.copies.get("results/headroom/headroom.json") for name, sample in SAMPLES.items()
                     if name.startswith("parity-") and name != "parity-fresh"}
    assert shown_records == {"docs/samples/parity-fresh/results/headroom/headroom.json"}


def test_a_sample_whose_shown_command_launches_is_never_made_from_stored_records():
    """`readme_samples.py --stored` re-runs shown commands on stored records; one that launches would launch."""
    with pytest.raises(RuntimeError, match="--stored"):
        samples.make("compare-run", "today", stored=True)


def test_the_setup_sample_is_what_the_script_renders_from_its_record():
    """The set-up times come from two real set-ups (minutes each): rendered again from the setup-times.json stored
    with the sample, every step the set-up timed in its row."""
    setup_times = script_module("setup_times")
    document = rendered_again("setup", "setup_times", "results/setup-times/setup-times.json",
                              "set-up times: results/setup-times/setup-times.json  (logs: first.log, again.log)")
    assert all(run["exit"] == 0 for run in document["set_ups"])
    for run in document["set_ups"]:  # each timed step falls in one row, and the rows add up to the set-up's all
        named = [name for _, name in run["steps"] if name != "all"]
        rows = [next(row for row, pattern in setup_times.ROWS if pattern.search(name)) for name in named]
        assert len(rows) == len(set(rows)), rows
        total = dict((name, seconds) for seconds, name in run["steps"])["all"]
        assert sum(seconds for seconds, name in run["steps"] if name != "all") <= total


def test_set_up_step_times_are_read_from_the_set_ups_closing_lines():
    setup_times = script_module("setup_times")
    output = ("==> installing torch==2.13.0\n...\nset-up steps, in seconds:\n    21  installing torch==2.13.0\n"
              "   162  building Horovod 0.28.1 against torch 2.13.0_cpu (cp311); about 3 minutes on 2 cores\n"
              "   183  all\nsetup done: activate with 'source .venv/bin/activate'\n")
    steps = setup_times.step_seconds(output)
    assert steps == [(21, "installing torch==2.13.0"),
                     (162, "building Horovod 0.28.1 against torch 2.13.0_cpu (cp311); about 3 minutes on 2 cores"),
                     (183, "all")]
    assert setup_times.step_seconds("setup: cmake not found\n") == []
    assert setup_times.cell(steps, setup_times.ROWS[3][1], "Horovod") == "2.7 min (built from source)"
    assert setup_times.cell(steps, setup_times.ROWS[0][1], "Debian packages") == "none missing"


def verify_sides(name: str) -> tuple[str, str]:
    horovod, ddp = SAMPLES[name].stored
    return horovod, ddp


@pytest.mark.parametrize("name", [name for name, s in SAMPLES.items() if " --verify" in s.shown[0] and s.stored])
def test_a_verify_sample_holds_the_check_of_its_records(name, tmp_path):
    """`--verify` launches both sides: the part of its sample that `compare check` printed is checked against
    check's output for the two records it wrote (stored with the sample); its timings are the machine's."""
    shown = said_when(name)
    scratch = scratch_with_inputs(name, tmp_path)
    check = stdout_of(["-m", "compare", "check", *verify_sides(name)], scratch).rstrip("\n").split("\n")
    assert check[0] in shown, f"{name}: the sample does not hold what compare check prints for its records"
    start = shown.index(check[0])
    assert shown[start:start + len(check)] == check


@pytest.mark.parametrize("name", [name for name, s in SAMPLES.items() if s.cluster and " --verify" in s.shown[0]])
def test_a_slurm_verify_sample_names_the_jobs_its_records_hold(name):
    """Each side's line names its Slurm job and nodes as the job record (slurm-job.json) kept them."""
    shown = "\n".join(said_when(name))
    for side in verify_sides(name):
        job = json.loads((STORE / name / side / "slurm-job.json").read_text())
        assert f"slurm job {job['job_id']} on {job['nodes']}" in shown, (side, job)


@pytest.mark.parametrize("name", [name for name, s in SAMPLES.items() if " --verify" in s.shown[0]])
def test_a_verify_sample_opens_with_what_the_migration_prints(name, tmp_path):
    """A --verify sample launches both sides; its first line, the migration's, is what migrate prints now."""
    shown = said_when(name)
    words = SAMPLES[name].shown[0].split()
    migrate = [word for word in words[1:words.index("--verify")] if word != "--force"]
    printed = stdout_of([*migrate, "--force"], scratch_with_inputs(name, tmp_path)).rstrip("\n").split("\n")
    assert shown[:len(printed)] == printed


# ---- no block of output in the docs that is not a generated sample ---------------------------------------------

# Code the reader types or a file's format: never output, unless a transcript was pasted in (a `$ ` or `>>> ` line).
CODE = {"bash", "sh", "python", "json", "yaml", "toml", "dockerfile"}
SAMPLE_MARK = re.compile(r"<!-- sample: ([\w-]+) -->$")
NOT_OUTPUT_MARK = re.compile(r"<!-- not output: [^>]+ -->$")  # a layout or a diagram, drawn by hand on purpose
PROMPT = re.compile(r"^\s*(\$|>>>) \S")
# A table cell that is a measurement: a figure with a decimal point, an exponent or a unit (a time, a rate, a
# bandwidth, a headroom "90x"), alone or with its interval; a version (2.13.0) or an address is not one.
MEASURED_CELL = re.compile(r"^\**(\d+\.\d+|\d+(\.\d+)?e-?\d+|\d+(\.\d+)?\s?(ms|µs|s|min|x|GB/s|MB/s|steps/s|samples/s))"
                           r"( \([^)]*\))?\**$")
# Tables of figures that are not this page's to make: computed by a script whose test holds the page to it.
COMPUTED_ELSEWHERE = {
    # scripts/speed_error_rates.py's simulated rates, which tests/test_speed_simulation.py holds the page to
    ("docs/benchmarks.md", "| design | true Horovod/DDP | outcome | simulated rate (95% interval) | stated | rounds"),
}


def doc_pages() -> list[Path]:
    """README.md and docs/*.md; docs/changelog.md keeps history (figures of superseded designs among it)."""
    return [ROOT / "README.md", *(page for page in sorted((ROOT / "docs").glob("*.md")) if page.name != "changelog.md")]


def output_offences(text: str) -> list[str]:
    """Each block of output or measured table in a page that is not a sample: 'line N: why'."""
    lines, offences, number = text.split("\n"), [], 0
    while number < len(lines):
        fence = re.match(r"^\s*(`{3,})([^`\s]*)\s*$", lines[number])
        if fence:
            end = next((i for i in range(number + 1, len(lines)) if lines[i].strip() == fence.group(1)), len(lines))
            before = lines[number - 1] if number else ""
            info, body = fence.group(2).lower(), lines[number + 1:end]
            if SAMPLE_MARK.search(before):
                pass  # a sample: its own tests hold it to its command
            elif info in CODE:
                offences += [f"line {number + 2 + i}: a transcript in a ```{info} block: {line.strip()[:60]}"
                             for i, line in enumerate(body) if PROMPT.match(line)][:1]
            elif not NOT_OUTPUT_MARK.search(before):
                offences.append(f"line {number + 1}: a ```{info} block that is neither a sample (<!-- sample: NAME "
                                "-->) nor marked <!-- not output: WHAT -->")
            number = end + 1
            continue
        if lines[number].startswith("|") and (number == 0 or not lines[number - 1].startswith("|")):
            end = next((i for i in range(number, len(lines)) if not lines[i].startswith("|")), len(lines))
            cells = [cell.strip() for row in lines[number:end] for cell in row.strip("|").split("|")]
            if any(MEASURED_CELL.match(cell) for cell in cells):
                offences.append(f"line {number + 1}: a table of measured figures written by hand: {lines[number][:80]}")
            number = end
            continue
        number += 1
    return offences


def test_every_block_of_output_in_the_docs_is_a_generated_sample():
    """A block of output, or a table of measured times, pasted into a page is caught here: it must become a sample
    (scripts/readme_samples.py) or go."""
    offences = []
    for page in doc_pages():
        relative = page.relative_to(ROOT).as_posix()
        for offence in output_offences(page.read_text(encoding="utf-8")):
            first_line = offence.split(": ", 2)[-1]
            if not any(relative == known_page and first_line.startswith(known[:80])
                       for known_page, known in COMPUTED_ELSEWHERE):
                offences.append(f"{relative} {offence}")
    assert not offences, "output in the docs that no command made here:\n" + "\n".join(offences)


@pytest.mark.parametrize("lines", ["", "old output\nof two lines\n"])
def test_a_sample_block_is_replaced_alone_even_when_empty(lines):
    """A new sample starts as an empty block; its closing fence is the next line, not the next fence on the page
    (the pattern once read everything up to a later code block as the block's lines, and dropped it)."""
    page = f"Made here: <!-- sample: x -->\n```text\n{lines}```\n\nThe page goes on.\n```bash\nls\n```\n"
    done = samples.replace_block(page, "x", "```text\nnew\n```\n")
    assert done == "Made here: <!-- sample: x -->\n```text\nnew\n```\n\nThe page goes on.\n```bash\nls\n```\n"


def test_the_scan_catches_pasted_output_and_passes_samples_and_code():
    page = "\n".join([
        "Run it:", "```bash", "python -m compare run", "```",
        "It prints:", "```", "parity holds", "```",
        "A transcript:", "```bash", "$ python -m compare check a b", "parity holds", "```",
        "Made here: <!-- sample: compare-run -->", "```text", "$ python -m compare run", "```",
        "The tree: <!-- not output: the layout -->", "```", "compare/  the CLI", "```",
        "A sample with fences of its own: <!-- sample: bench -->", "````text", "```json", "{}", "```", "````",
        "| launcher | np | total |", "|---|---|---|", "| torchrun | 2 | 5.08 s |",
        "| option | default |", "|---|---|", "| --np | 1,2 |", "| torch | 2.13.0 |"])
    assert [offence.split(":")[0] for offence in output_offences(page)] == ["line 6", "line 11", "line 28"]
