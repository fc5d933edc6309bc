"""Every sample of output in README.md and docs/ is what its commands print (scripts/readme_samples.py, `make
samples`, made it): the cheap ones are run again here and must print the same, verbatim; the ones whose command
launches training are re-rendered from the records stored with them (docs/samples/NAME/), so that the text
cannot drift from the code. Only the figures a sample names as measured are masked."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT

spec = importlib.util.spec_from_file_location("readme_samples", ROOT / "scripts" / "readme_samples.py")
samples = importlib.util.module_from_spec(spec)
sys.modules["readme_samples"] = samples  # dataclasses look their module up while the class is built
spec.loader.exec_module(samples)
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
    for target, source in sample.copies.items():
        shutil.copy(ROOT / source, tmp_path / target)
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


def test_the_check_fails_on_a_sample_that_is_not_the_output(tmp_path):
    """The comparison above catches an edited sample (as the README's five lines for a one-line output were)."""
    sample = SAMPLES["migrate-script"]
    outputs = samples.run_commands(sample.shown, scratch_with_inputs("migrate-script", tmp_path))
    edited = [*samples.body(sample, outputs), "  line 9: `import horovod.torch as hvd` -> ..."]
    assert edited != samples.body(sample, outputs)


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
    assert shown[0] == stdout_of([*migrate, "--force"], scratch_with_inputs(name, tmp_path)).rstrip("\n")
