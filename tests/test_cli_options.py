"""compare's options, declared once (compare/commands/options.py): the table's rules, its defaults pinned to
their homes, help as a user reads it, and a --help that imports neither torch nor the analysis."""

from __future__ import annotations

import argparse
import importlib
import re
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest

from compare.commands.cli import build_parser, parse
from compare.commands.options import COMMAND_SPECS, OPTIONS, options_of
from compare.names import EXIT_MEANINGS, EXIT_NEEDS_A_PERSON, EXIT_OK, PARITY_EXIT, Exit, Parity
from workload.errors import UsageError

ROOT = Path(__file__).resolve().parents[1]
TABLE_COMMANDS = list(COMMAND_SPECS)
# Imported by a --help they would slow down (seconds of CPU on 2 cores), or the analysis, which --help never needs.
HEAVY = ("torch", "numpy", "scipy", "libcst", "matplotlib", "compare.analysis")


def help_text(command: str) -> str:
    parser = build_parser([command])
    return parser._subparsers._group_actions[0].choices[command].format_help()  # type: ignore[union-attr]


def test_one_entry_per_flag_and_command():
    for command in COMMAND_SPECS:
        flags = [flag for option in options_of(command) for flag in option.flags]
        assert len(flags) == len(set(flags)), command


@pytest.mark.parametrize("shared", ["--timeout", "--out", "--np", "--horovod-controller"])
def test_a_shared_option_is_one_entry_with_one_default(shared):
    # import's --out is another option (the run directory), and so are migrate's --out (its output), --np, --timeout
    # and --horovod-controller (one world size, a shorter limit and Gloo: the verify launches', not compare run's)
    entries = [option for option in OPTIONS if shared in option.flags and len(option.commands) > 0
               and not {"import", "migrate"} & set(option.commands)]
    assert len(entries) == 1, shared
    defaults = {build_parser([c]).parse_args([c, *REQUIRED.get(c, [])]).__dict__.get(shared[2:].replace("-", "_"))
                for c in entries[0].commands}
    if shared == "--out":  # one rule: results/COMMAND
        assert defaults == {Path("results") / c for c in entries[0].commands}
    else:
        assert len(defaults) == 1, defaults


REQUIRED = {"check": ["a", "b"], "report": ["d"], "k8s": ["--image", "i", "--workers", "1"],
            "import": ["csv", "f.csv", "--out", "o"]}


@pytest.mark.parametrize("command", TABLE_COMMANDS)
def test_every_command_has_its_entry_point(command):
    ns = parse([command, *REQUIRED.get(command, [])])
    module, _, function = ns.func.partition(":")
    assert callable(getattr(importlib.import_module(module), function))


@pytest.mark.parametrize("command", TABLE_COMMANDS)
def test_help_prints_defaults_as_typed(command):
    text = help_text(command)
    assert text.count("(default:") > 0 or command in ("check", "report", "import")
    assert "(default: None)" not in text and "default: [" not in text and "default: (" not in text
    assert not re.search(r"\('|\[\]|\(\d+, \d+\)", text), text  # no Python tuple or list
    hidden = [a for a in build_parser([command])._subparsers._group_actions[0].choices[command]._actions
              if a.help is None or (a.help != argparse.SUPPRESS and not a.help.strip())]
    assert not hidden, [a.option_strings or a.dest for a in hidden]  # every option says what it is


def test_each_default_is_said_once():
    text = help_text("run")
    for line in text.split("\n  -"):
        assert line.count("default") <= 2, line  # "(default: X)" once; the word may also be in the sentence


def test_per_launch_internals_are_accepted_but_not_shown():
    text = help_text("run")
    for internal in ("--round", "--window-seconds", "--aa-twin", "--step-delay-ms", "--step-delay-for"):
        assert internal not in text, internal
    ns = parse(["run", "--step-delay-ms", "3", "--step-delay-for", "ddp"])
    assert ns.step_delay_ms == 3 and ns.step_delay_for == "ddp"


def test_frameworks_help_offers_only_what_it_accepts():
    text = " ".join(help_text("run").split())
    assert "horovod, ddp, or both as horovod,ddp" in text
    for value, expected in (("horovod", ("horovod",)), ("ddp", ("ddp",)), ("horovod,ddp", ("horovod", "ddp"))):
        assert parse(["run", "--frameworks", value]).frameworks == expected
    with pytest.raises(UsageError):
        parse(["run", "--frameworks", "both"])


def test_run_shows_its_seeds():
    assert "compare run: 0,1,2, or the one --seed given" in " ".join(help_text("run").split())


def test_check_report_and_matrix_say_what_each_argument_is():
    assert "the other side's" in help_text("check")
    assert "Rebuild report.md" in help_text("report")
    assert "the seed of every run" in help_text("matrix")


def test_pinned_defaults_match_their_homes():
    from compare.analysis import faults, parity, time_to_target
    from compare.commands import options
    from compare.importers import FORMATS
    from compare.launch.slurm import DDP_FORMS, HOROVOD_FORMS, SlurmSettings
    from compare.loss_lines import ON_RESTART, STEP_FROM

    assert (options.STEP_RTOL, options.STEP_K) == (parity.STEP_RTOL, parity.STEP_K)
    shown = ", ".join(f"{n}={v * 100:g}%" if k == "relative" else f"{n}={v:g}"
                      for n, (k, v) in parity.DEFAULT_MARGINS.items())
    targets = ", ".join(f"{w} {t.metric}={t.value:g}" for w, t in time_to_target.DEFAULT_TARGETS.items())
    assert (shown, targets) == (options.MARGINS_SHOWN, options.TARGETS_SHOWN)
    assert (options.HOROVOD_FORMS, options.DDP_FORMS) == (HOROVOD_FORMS, DDP_FORMS)
    assert (options.IMPORT_FORMATS, options.STEP_FROM, options.ON_RESTART) == (FORMATS, STEP_FROM, ON_RESTART)
    from compare.analysis.speed import MIN_ROUNDS
    from compare.verify.launch_mode import MODES

    assert (options.MIGRATE_LAUNCH_MODES, options.SPEED_MIN_ROUNDS) == (MODES, MIN_ROUNDS)
    assert options.out_default("faults") == faults.DEFAULT_FAULTS_OUT
    ns = parse(["run"])
    defaults = {f.name: f.default for f in fields(SlurmSettings)}
    assert (ns.nodes, ns.partition, ns.time, ns.slurm_horovod, ns.slurm_ddp) == (
        defaults["nodes"], defaults["partition"], defaults["time_min"], defaults["horovod_form"],
        defaults["ddp_form"])


def test_exit_status_and_parity_outcome_are_enums_with_their_words():
    assert EXIT_OK == 0 and EXIT_NEEDS_A_PERSON == 6 and isinstance(EXIT_OK, Exit)
    assert EXIT_MEANINGS[Exit.NEEDS_A_PERSON] == Exit.NEEDS_A_PERSON.words
    assert {outcome.value: outcome.exit for outcome in Parity} == PARITY_EXIT
    assert Parity("different jobs").words == "different jobs" and Parity.FAILS.words == "parity fails"
    assert Parity.HOLDS == "holds"  # the records hold the bare string


def test_the_command_table_lists_every_command_in_help():
    text = subprocess.run([sys.executable, "-m", "compare", "--help"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout
    for name in COMMAND_SPECS:
        assert re.search(rf"^\s+{name}\s", text, re.MULTILINE), name
    for code in Exit:
        assert f"{code.value:>3}  {code.words}" in text


def heavy_modules(args: list[str]) -> list[str]:
    code = ("import sys\nfrom compare.__main__ import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n"
            "    pass\nprint(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'numpy', 'scipy', "
            "'libcst', 'matplotlib') or m.startswith('compare.analysis')))")
    result = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    return eval(result.stdout.strip().splitlines()[-1])  # a list literal printed just above


@pytest.mark.parametrize("command", [None, *TABLE_COMMANDS])
def test_help_imports_neither_torch_nor_the_analysis(command):
    assert heavy_modules([command, "--help"] if command else ["--help"]) == []


def test_migrate_help_imports_neither_torch_nor_the_analysis():
    assert heavy_modules(["migrate", "--help"]) == []


def test_add_argument_is_left_only_where_the_table_cannot_reach():
    counts = {path.relative_to(ROOT).as_posix(): path.read_text().count("add_argument(")
              for path in (ROOT / "compare").rglob("*.py")}
    left = {path: n for path, n in counts.items() if n}
    # the derivation itself; launch_facts's reading of a script's own argparse calls (not options of compare).
    assert set(left) <= {"compare/commands/cli.py", "compare/migrate/launch_facts.py"}, left
    assert left["compare/commands/cli.py"] == 1
