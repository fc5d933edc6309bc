"""compare's options, declared once (compare/commands/options.py): each flag one entry with one default, help
as a user reads it, the exit statuses that the outcomes give, and a --help that imports neither torch nor the
analysis."""

from __future__ import annotations

import argparse
import ast
import importlib
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from fixtures import write_run

from compare.__main__ import main as compare_main
from compare.commands.cli import build_parser, parse
from compare.commands.options import COMMAND_SPECS, OPTIONS
from compare.names import Exit, Parity
from workload.errors import UsageError

ROOT = Path(__file__).resolve().parents[1]
TABLE_COMMANDS = list(COMMAND_SPECS)
# Imported by a --help they would slow down (seconds of CPU on 2 cores), or the analysis, which --help never needs.
HEAVY = ("torch", "numpy", "scipy", "libcst", "matplotlib", "compare.analysis")


def help_text(command: str) -> str:
    parser = build_parser([command])
    return parser._subparsers._group_actions[0].choices[command].format_help()  # type: ignore[union-attr]


def test_each_flag_is_declared_once():
    """Each flag is one opt(...) in compare/commands/options.py, whatever commands take it: read from the source,
    so that a second entry for a flag (another default for another command) cannot come back."""
    tree = ast.parse((ROOT / "compare" / "commands" / "options.py").read_text())
    declared = [arg.value for node in ast.walk(tree)
                if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "opt"
                for arg in node.args if isinstance(arg, ast.Constant)]
    assert len(declared) == len(OPTIONS) + sum(len(option.flags) - 1 for option in OPTIONS)  # every entry read
    twice = [flag for flag, count in Counter(declared).items() if count > 1]
    assert not twice, twice


@pytest.mark.parametrize("option", [o for o in OPTIONS if len(o.commands) > 1], ids=lambda o: o.flags[-1])
def test_a_shared_option_has_one_default_in_every_command(option):
    """The parsers derived from the table give an option taken by several commands the same default in each;
    --out's is where each command writes, results/COMMAND (migrate's: beside its input, so none here)."""
    dest = option.flags[-1].lstrip("-").replace("-", "_")
    defaults = {command: parse([command, *REQUIRED.get(command, [])]).__dict__[dest] for command in option.commands}
    if "--out" in option.flags:
        expected = {c: None if COMMAND_SPECS[c].out_beside_input else Path("results") / c for c in option.commands}
        assert defaults == expected
    else:
        assert len({repr(value) for value in defaults.values()}) == 1, defaults


REQUIRED = {"check": ["a", "b"], "report": ["d"], "k8s": ["--image", "i", "--workers", "1"], "import": ["csv", "f.csv"]}


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


def test_the_slurm_defaults_are_not_slurm_options_given():
    """compare run's and migrate's defaults are the Slurm settings' own: none counts as given without
    --scheduler slurm (compare/commands/scheduler.py compares them with SlurmSettings())."""
    from compare.commands.scheduler import local_misuse

    for command in ("run", "migrate"):
        assert local_misuse(parse([command])) is None
    assert local_misuse(parse(["run", "--nodes", "2"])) == "--nodes needs --scheduler slurm"


def curve(steps: int = 100, seed: int = 0) -> list[float]:
    rng = np.random.default_rng(seed)
    return list(2.3 * np.exp(-np.arange(steps) / 40) + 0.3 + 0.05 * rng.standard_normal(steps))


def records_judged(outcome: Parity, root: Path) -> tuple[str, str]:
    """Two sides' run records that the judge finds `outcome` for (as tests/test_parity.py checks each in detail)."""
    evals = [{"eval_loss": 0.61, "eval_accuracy": 0.83, "eval_samples": 360}]
    seeds = (0, 1) if outcome is Parity.UNDECIDED else (0,)
    for seed in seeds:
        a = b = curve(seed=seed)
        options_b = {"optimizer": "adamw"} if outcome is Parity.DIFFERENT_JOBS else None
        if outcome is Parity.FAILS:
            b = [x * (1 + 1e-3) if step >= 50 else x for step, x in enumerate(a, start=1)]
        if outcome is Parity.UNDECIDED:  # end points about a margin apart, reached as chaos grows (test_parity.py)
            a = curve(500, seed)
            shift = 0.02 if seed == 0 else 0.005
            b = [x * (1 + shift * 10 ** ((step - 500) / 60)) for step, x in enumerate(a, start=1)]
        with_evals = None if outcome is Parity.UNDECIDED else evals
        write_run(root / "a" / f"seed-{seed}", framework="horovod", world_size=2, seed=seed, losses=a,
                  evals=with_evals)
        write_run(root / "b" / f"seed-{seed}", framework="ddp", world_size=2, seed=seed, losses=b, evals=with_evals,
                  options=options_b)
    return str(root / "a"), str(root / "b")


def documented_exits() -> dict[str, int]:
    """docs/parity.md's table of outcomes and exit codes: outcome words -> exit status."""
    text = (ROOT / "docs" / "parity.md").read_text(encoding="utf-8")
    table = text.split("## Outcomes and exit codes", 1)[1].split("\n## ", 1)[0]
    return {words: int(code) for words, code in re.findall(r"^\| ([a-z ]+) \| (\d+) \|", table, re.MULTILINE)}


@pytest.mark.parametrize("outcome", list(Parity))
def test_each_parity_outcome_exits_as_the_docs_say(tmp_path, capsys, outcome):
    """`compare check` on records that give each outcome: the words it prints first, and its exit status that
    docs/parity.md's table and the README's table of exit statuses give for them."""
    status = compare_main(["check", *records_judged(outcome, tmp_path)])
    out = capsys.readouterr().out
    verdicts = [line for line in out.splitlines() if line.startswith(tuple(f"{p.words}:" for p in Parity))]
    assert len(verdicts) == 1 and verdicts[0].startswith(f"{outcome.words}:"), out
    documented = {words: code for words, code in documented_exits().items() if words.endswith(outcome.value)}
    assert list(documented.values()) == [status], (documented, status)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    meaning = re.search(rf"^\| {int(status)} \| (.*) \|$", readme, re.MULTILINE)
    assert meaning is not None and README_SAYS[outcome] in meaning.group(1), (status, meaning)
    assert isinstance(status, Exit)


README_SAYS = {Parity.HOLDS: "parity holds", Parity.FAILS: "parity fails", Parity.UNDECIDED: "undecided",
               Parity.DIFFERENT_JOBS: "not the same job"}  # in the README's row of the outcome's exit status


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
    assert set(left) <= {"compare/commands/cli.py", "compare/migrate/plan/launch_facts.py"}, left
    assert left["compare/commands/cli.py"] == 1


@pytest.mark.parametrize("args", [["--timeout", "0"], ["--np", "0"], ["--nodes", "2"], ["--adasum"]])
def test_run_refuses_its_own_bad_options_before_importing_torch(tmp_path, args):
    """validate() loads the workload last, which imports torch (over a second here): compare run's checks of its
    own options come before it."""
    assert [m for m in heavy_modules(["run", *args, "--out", str(tmp_path)]) if m.split(".")[0] == "torch"] == []
