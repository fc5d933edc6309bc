"""What README.md and docs/ say is so: every command they show parses with the real parser (a flag renamed or
removed in the code fails here), every link stays inside the repository and names a file that is there, the
exit statuses are compare/names.py's, and the torch pin follows TORCH_VERSION."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

from compare.commands.cli import parse
from compare.names import Exit
from workload.errors import UsageError

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# Flags of `compare migrate` that issue 41's repository mode brings (merged from another branch): shown in the
# README already. test_awaited_flags_have_arrived fails once they parse, so that this set is emptied then.
AWAITED: dict[str, set[str]] = {"migrate": set()}
PROSE = "(prose) "  # marks a command named in a sentence rather than shown to be typed
SHELL_STOPS = {"|", "||", "&&", ";", ">", ">>", "2>&1", "&"}


def shown_commands() -> list[tuple[str, str]]:
    """(page, command line) for every command in a bash/sh/console block, every `$ ` line of a text block, and
    every `python -m compare ...` in the prose."""
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for block in re.finditer(r"```(\w*)\n(.*?)```", text, re.DOTALL):
            language, body = block.group(1), block.group(2).replace("\\\n", " ")
            for line in body.splitlines():
                line = line.strip()
                if language == "text":
                    if not line.startswith("$ "):
                        continue
                    line = line[2:]
                elif language not in ("bash", "sh", "console"):
                    continue
                if line and not line.startswith("#"):
                    found.append((page.relative_to(ROOT).as_posix(), as_module(line)))
        prose = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
        found += [(page.relative_to(ROOT).as_posix(), PROSE + as_module(span))
                  for span in re.findall(r"`((?:python -m compare|hvd-compare) [^`]+)`", prose)]
    return found


def as_module(line: str) -> str:
    """`hvd-compare ARGS` (the command pyproject.toml's [project.scripts] installs) is `python -m compare ARGS`."""
    return re.sub(r"^hvd-compare ", "python -m compare ", line)


def words(line: str) -> list[str]:
    """The command's words up to the first shell operator, comments and environment assignments left out."""
    out = []
    try:
        split = shlex.split(line, comments=True)
    except ValueError:  # a quote the shell would close on the next line: the words as they stand
        split = line.split("#", 1)[0].split()
    for word in split:
        if word in SHELL_STOPS or word.startswith((">", "2>")):
            break
        out.append(word)
    while out and re.match(r"^[A-Z_][A-Z0-9_]*=", out[0]):
        out.pop(0)
    return out


def program(argv: list[str]) -> tuple[list[str], list[str]] | None:
    """(the program as a command, its arguments) for a program of this repository, or None."""
    if not argv:
        return None
    if argv[0] in ("python", "python3", ".venv/bin/python"):
        if len(argv) > 2 and argv[1] == "-m":
            ours = (ROOT / argv[2].replace(".", "/")).is_dir() or (ROOT / f"{argv[2].replace('.', '/')}.py").is_file()
            return (["-m", argv[2]], argv[3:]) if ours else None  # not pip's, not another tool's
        if len(argv) > 1 and argv[1].endswith(".py"):
            return [argv[1]], argv[2:]
        return None
    if argv[0] in ("horovodrun", "mpirun") and "python" in argv:
        return program(argv[argv.index("python"):])
    if argv[0] == "torchrun":
        if "-m" in argv:
            at = argv.index("-m")
            return ["-m", argv[at + 1]], argv[at + 2:]
        script = next((w for w in argv[1:] if w.endswith(".py")), None)
        return ([script], argv[argv.index(script) + 1:]) if script else None
    return None


@cache
def help_of(command: tuple[str, ...]) -> str:
    result = subprocess.run([sys.executable, *command, "--help"], cwd=ROOT, capture_output=True, text=True,
                            timeout=120, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, f"{' '.join(command)} --help: {result.stderr[-300:]}"
    return result.stdout


def flags_in(args: list[str]) -> set[str]:
    before = args[:args.index("--")] if "--" in args else args
    return {arg.split("=", 1)[0] for arg in before if re.match(r"^--[a-z][\w-]*", arg)}


def unknown_compare_flags(args: list[str], *, whole: bool = True) -> set[str]:
    """The flags `python -m compare ARGS` does not know (empty when it parses). Any other error fails a whole
    command; a command named in the prose (`python -m compare check`) may leave its arguments out."""
    try:
        parse(args)
    except SystemExit as exc:  # --help: printed, and exit 0
        assert exc.code == 0, args
    except UsageError as exc:
        if str(exc).startswith("unrecognized arguments:"):
            return flags_in(str(exc).removeprefix("unrecognized arguments:").split())
        if whole:
            raise
    return set()


COMMANDS = shown_commands()


def test_the_pages_show_commands():
    shown = [line for _, line in COMMANDS if line.removeprefix(PROSE).startswith("python -m compare")]
    assert len(shown) > 30 and any(" migrate " in line for line in shown), shown


@pytest.mark.parametrize(("page", "line"),
                         [c for c in COMMANDS if c[1].removeprefix(PROSE).startswith("python -m compare ")])
def test_every_compare_command_shown_parses(page, line, capsys):
    args = words(line.removeprefix(PROSE))[3:]
    unknown = unknown_compare_flags(args, whole=not line.startswith(PROSE))
    awaited = AWAITED.get(args[0], set()) if args else set()
    assert unknown <= awaited, f"{page}: `{line}`: {', '.join(sorted(unknown - awaited))} unknown"


def test_awaited_flags_have_arrived():
    """The flags of AWAITED are shown in the README before their branch is merged; once they parse, empty
    AWAITED so that the test above holds them like any other."""
    lines = [words(line.removeprefix(PROSE))[3:] for _, line in COMMANDS
             if line.removeprefix(PROSE).startswith("python -m compare migrate")]
    unknown = set().union(*(unknown_compare_flags(args, whole=False) for args in lines))
    if unknown:
        pytest.xfail(f"not merged yet: {', '.join(sorted(unknown))}")
    assert not AWAITED["migrate"], "they parse now: empty AWAITED"


@pytest.mark.parametrize(("page", "line"), [c for c in COMMANDS if not c[1].startswith(("python -m compare ", PROSE))
                                            and program(words(c[1])) is not None])
def test_every_other_program_shown_knows_its_flags(page, line):
    command, args = program(words(line))
    if command[0].endswith(".py") and not (ROOT / command[0]).is_file():
        pytest.skip(f"{command[0]}: the reader's own script")
    text = help_of(tuple(command))
    missing = {flag for flag in flags_in(args) if not re.search(rf"{re.escape(flag)}\b", text)}
    assert not missing, f"{page}: `{line}`: {', '.join(sorted(missing))} not in `{' '.join(command)} --help`"


def test_make_targets_shown_exist():
    targets = set(re.findall(r"^([a-z][\w-]*):", (ROOT / "Makefile").read_text(), re.MULTILINE))
    shown = {words(line)[1] for _, line in COMMANDS if words(line)[:1] == ["make"] and len(words(line)) > 1}
    shown = {target for target in shown if "=" not in target}
    assert shown and shown <= targets, shown - targets


def test_the_docs_test_fails_on_a_renamed_flag():
    """The check itself: a flag the code does not have is caught (as a rename in the code would be)."""
    assert unknown_compare_flags(["run", "--np", "2", "--time-out", "60"]) == {"--time-out"}
    assert unknown_compare_flags(["run", "--np", "2", "--timeout", "60"]) == set()
    # No prefix stands in for a flag: a flag renamed to a longer one (--tuned -> --tuned-file) is caught too.
    assert unknown_compare_flags(["run", "--time-budg", "60"]) == {"--time-budg"}


def links() -> list[tuple[Path, str]]:
    return [(page, target) for page in PAGES
            for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8"))]


@pytest.mark.parametrize(("page", "target"), links(), ids=lambda v: v.name if isinstance(v, Path) else v)
def test_every_link_stays_inside_the_repository(page, target):
    if re.match(r"^[a-z]+://", target) or target.startswith("#"):
        return
    path = (page.parent / target.split("#", 1)[0]).resolve()
    assert path.is_relative_to(ROOT), f"{page.name}: {target} leaves the repository"
    assert path.exists(), f"{page.name}: {target} does not exist"


def test_no_page_points_outside_the_repository_in_text():
    for page in PAGES:
        assert "../shared/" not in page.read_text(encoding="utf-8"), page.name


def test_the_readme_lists_every_exit_status():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    table = text.split("<!-- exit-status -->", 1)[1].split("<!-- /exit-status -->", 1)[0]
    rows = dict(re.findall(r"^\| (\d+) \| (.*) \|$", table, re.MULTILINE))
    assert rows == {str(code.value): code.words for code in Exit}


def test_the_readme_first_screen_holds_the_three_tasks():
    # Before you start (what the set-up needs, installs and takes), then the three tasks.
    first = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()[:60]
    text = "\n".join(first)
    for command in ("make compare", "make test", "python -m compare migrate path/to/repo -o repo_ddp",
                    "python -m compare migrate train.py", "python -m compare run", "python -m compare check",
                    "python -m compare import"):
        assert command in text, command
    assert "docs/setup.md" in text and "docs/migration.md" in text


def test_the_torch_pin_follows_torch_version():
    """The `compare` extra takes torch as a range, so installing the project never replaces the torch Horovod was
    built for; the set-up installs the project with that extra under torch==TORCH_VERSION and checks the torch
    that ends up installed. The project's own dependencies (the migration's) hold no torch at all."""
    import tomllib
    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not [d for d in project["dependencies"] if Requirement(d).name == "torch"]
    torch = next(r for r in map(Requirement, project["optional-dependencies"]["compare"]) if r.name == "torch")
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    default = re.search(r"^choose TORCH_VERSION torch ([\d.]+)$", setup, re.MULTILINE).group(1)
    assert "==" not in str(torch.specifier) and torch.specifier.contains(default)
    assert torch.specifier.contains("2.12.0")  # the README's example of another torch
    assert 'echo "torch==$TORCH_VERSION" > "$constraint"' in setup and '-c "$constraint" -e ".[$pip_extras]"' in setup
    assert "pip_extras=compare,dev" in setup
    assert 'if [ "$torch_now" != "$torch_full" ]' in setup  # the installed torch is the one Horovod was built for


@pytest.mark.parametrize(("script", "partial"), [("examples/horovod_scripts/plain.py", False),
                                                  ("examples/horovod_scripts/adasum.py", True)])
def test_the_migration_reports_check_line_runs_as_written(script, partial):
    """The report's "Check it" command keeps the output the user chose and, where flags remain, --allow-partial
    (without it --verify stops at exit 6), and it parses."""
    from compare.migrate.migrate_tree import migrate_tree
    from compare.migrate.read.repository import Repository
    from compare.migrate.report.migration_report import render

    tree = migrate_tree(Repository.read(ROOT / script))
    assert bool(tree.flags) == partial
    report = render(tree, script, "out/train_ddp.py")
    line = re.search(r"```bash\n(python -m compare migrate [^\n]*)\n```", report.split("## Check it", 1)[1]).group(1)
    assert f"migrate {script} -o out/train_ddp.py --force --verify" in line and "--entry" not in line
    assert line.endswith("--allow-partial") if partial else line.endswith("--verify")
    assert unknown_compare_flags(words(line)[3:]) == set()


@pytest.mark.parametrize("given", [(), ("--epochs", "1")])
def test_a_repository_reports_check_line_has_no_placeholder(given):
    """A repository's "Check it" command runs as written: the arguments the user gave, or none and a line that says
    where they go and which options the entry point takes (it ended in a literal `-- ARGS...`)."""
    from compare.migrate.migrate_tree import migrate_tree
    from compare.migrate.read.repository import Repository
    from compare.migrate.report.migration_report import render

    repo = "examples/repos/trainer_class"
    tree = migrate_tree(Repository.read(ROOT / repo))
    section = render(tree, repo, "out", script_args=list(given) or None).split("## Check it", 1)[1]
    line = re.search(r"```bash\n(python -m compare migrate [^\n]*)\n```", section).group(1)
    assert "ARGS" not in section and unknown_compare_flags(words(line)[3:]) == set()
    assert line.endswith(" -- --epochs 1") if given else "--" not in line.split()
    options = sorted(re.findall(r'add_argument\("(--[\w-]+)"', (ROOT / repo / "train.py").read_text()))
    assert options and (f"(it takes {', '.join(f'`{o}`' for o in options)})" in section) != bool(given)


@pytest.mark.parametrize("as_repository", [False, True])
def test_one_report_for_a_script_and_a_repository_of_it(tmp_path, as_repository):
    """A script and a repository holding it get the one renderer's report: what only a script's said before
    (SyncBatchNorm cannot run on CPU, so the command asks for --device cuda) a repository's says too, and what only
    a repository's said (its files, --entry) a script's does not."""
    import shutil

    from compare.migrate.migrate_tree import migrate_tree
    from compare.migrate.read.repository import Repository
    from compare.migrate.report.migration_report import render

    script = tmp_path / "repo" / "train.py"
    script.parent.mkdir()
    shutil.copy(ROOT / "examples" / "horovod_scripts" / "sync_batchnorm.py", script)
    tree = migrate_tree(Repository.read(script.parent if as_repository else script), entry="train.py"
                        if as_repository else None)
    report = render(tree, str(script.parent if as_repository else script), "out")
    assert "Runs on CPU: **no** (SyncBatchNorm needs GPUs on both sides)." in report
    line = re.search(r"```bash\n(python -m compare migrate [^\n]*)\n```", report.split("## Check it", 1)[1]).group(1)
    assert "--device cuda" in line and unknown_compare_flags(words(line)[3:]) == set()
    assert ("--entry train.py" in line) == as_repository and ("### `train.py`" in report) == as_repository
    assert report.index("## Needs a person") < report.index("## Changes") < report.index("## Check it")
