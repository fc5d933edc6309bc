"""Golden before/after files: every fixture repository (examples/repos/) and example script
(examples/horovod_scripts/, examples/platform_scripts/) migrated, compared with the output stored under
tests/data/golden/ (as LibCST's assertCodemod compares a codemod's output with the expected text). A change to the
rewrite shows here as a diff to review; `UPDATE_GOLDEN=1 pytest tests/test_migrate_golden.py` rewrites the files
after that review. The behavioural tests (through the launchers) say whether the output trains the same; these
say that it did not change unseen. Beside them: the static checks every output must pass."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT

from compare.migrate.migrate_tree import TreeMigration, migrate_tree
from compare.migrate.read.repository import Repository
from compare.migrate.report.migration_report import render

GOLDEN = ROOT / "tests" / "data" / "golden"
REPOS = sorted(p for p in (ROOT / "examples" / "repos").iterdir() if p.is_dir() and not p.name.startswith((".", "_")))
SCRIPTS = sorted([*(ROOT / "examples" / "horovod_scripts").glob("*.py"),
                  *(ROOT / "examples" / "platform_scripts").glob("*.py")])
SCRIPTS = [p for p in SCRIPTS if "horovod" in p.read_text().lower() and "standin" not in p.name]
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"


def _outputs(tree: TreeMigration, name: str) -> dict[str, bytes]:
    out = dict(tree.outputs())
    out["MIGRATION.md"] = render(tree, name, f"{name}_ddp").encode()
    return out


def _compare(expected_dir: Path, outputs: dict[str, bytes]) -> None:
    if UPDATE:
        for path, data in outputs.items():
            (expected_dir / path).parent.mkdir(parents=True, exist_ok=True)
            (expected_dir / path).write_bytes(data)
        return
    stored = {p.relative_to(expected_dir).as_posix() for p in expected_dir.rglob("*") if p.is_file()}
    assert stored == set(outputs), f"files differ from {expected_dir}: UPDATE_GOLDEN=1 after review"
    for path, data in outputs.items():
        assert (expected_dir / path).read_bytes().decode() == data.decode(), f"{path} differs from the golden file"


@pytest.mark.parametrize("repo", REPOS, ids=[p.name for p in REPOS])
def test_fixture_repository_migrates_to_its_golden_tree(repo):
    tree = migrate_tree(Repository.read(repo))
    _compare(GOLDEN / "repos" / repo.name, _outputs(tree, f"examples/repos/{repo.name}"))


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_example_script_migrates_to_its_golden_file(script):
    tree = migrate_tree(Repository.read(script))
    expected = GOLDEN / "scripts" / f"{script.stem}_ddp.py"
    code = tree.files[0].migration.code
    if UPDATE:
        expected.parent.mkdir(parents=True, exist_ok=True)
        expected.write_text(code)
        return
    assert expected.read_text() == code, f"{script.name} migrates to other text than {expected}"


PYFLAKES = ("F821", "F811", "F401", "F841")  # undefined, redefined, unused import, unused variable
# A repository's own import or variable whose last use was Horovod's, left for the person: an import may be
# loaded for its side effects, and the line is theirs. Imports the migration adds are never left unused.
LEFT_UNUSED = {("contrastive_encoders", "train.py", "F841"),  # named = ...: only DistributedOptimizer read it
               ("horovod_switch", "train.py", "F401"),  # HAS_HOROVOD: only the removed Horovod path read it
               ("package_entry", "train.py", "F401"),  # import tinynet: only for its Horovod accessor
               ("plugin_backend", "horovod_backend.py", "F401")}  # import importlib: only to load Horovod


def _ruff(paths: list[Path]) -> dict[tuple[str, str], int]:
    """Pyflakes' findings (PYFLAKES) per file name and code, as ruff finds them."""
    found: dict[tuple[str, str], int] = {}
    if not paths:
        return found
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--isolated", "--select",
                             ",".join(PYFLAKES), "--output-format", "concise", *map(str, paths)], capture_output=True,
                            text=True, check=False)
    for line in result.stdout.splitlines():
        code = next((code for code in PYFLAKES if f" {code} " in line), None)
        if code is not None:
            key = (Path(line.split(":")[0]).name, code)
            found[key] = found.get(key, 0) + 1
    return found


@pytest.mark.parametrize("source", [*REPOS, *SCRIPTS], ids=[p.stem for p in [*REPOS, *SCRIPTS]])
def test_the_output_binds_every_name_and_shadows_none_the_original_did_not(source, tmp_path):
    """ruff's pyflakes checks (undefined and redefined names, unused imports and variables) on the migrated files,
    counted against the original's: a migration adds none (but the LEFT_UNUSED lines of the repository's own).
    Each added helper is defined once, in one place."""
    tree = migrate_tree(Repository.read(source))
    written, originals = [], []
    for path, data in tree.outputs().items():
        (tmp_path / "new" / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "new" / path).write_bytes(data)
        written.append(tmp_path / "new" / path)
        if path in tree.repository.files:
            (tmp_path / "old" / path).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / "old" / path).write_bytes(tree.repository.files[path].raw)
            originals.append(tmp_path / "old" / path)
    before, after = _ruff(originals), _ruff(written)
    source_name = source.stem if source.is_file() else source.name
    added = {key: count - before.get(key, 0) - ((source_name, *key) in LEFT_UNUSED) for key, count in after.items()}
    assert all(count <= 0 for count in added.values()), (before, after)
    # the helpers, once: in the helpers module (a repository) or after the imports (a script), never twice
    marked = [path for path, data in tree.outputs().items() if b"Added by `python -m compare migrate`" in data]
    assert len(marked) <= 1, marked
    for data in tree.outputs().values():
        names = [line.split("(")[0] for line in data.decode(errors="replace").splitlines() if line.startswith("def ")]
        assert len(names) == len(set(names)), names


@pytest.mark.parametrize("repo", REPOS, ids=[p.name for p in REPOS])
def test_no_process_group_is_destroyed_before_its_last_use(repo):
    """destroy_process_group() only where the job ends: never in a module the entry imports, and in the entry
    only after every other use of dist."""
    tree = migrate_tree(Repository.read(repo))
    for migrated in tree.files:
        lines = migrated.migration.code.splitlines()
        destroys = [i for i, line in enumerate(lines) if "destroy_process_group()" in line]
        if not migrated.entry:
            assert not destroys or "destroy_process_group" in migrated.source.text  # the repository's own
            continue
        for index in destroys:
            indent = len(lines[index]) - len(lines[index].lstrip())
            block = lines[index + 1:]
            later = []
            for line in block:
                if line.strip() and len(line) - len(line.lstrip()) < indent:
                    break
                later.append(line)
            assert not any("dist." in line for line in later), f"{migrated.path}: a use after the group is gone"


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, capture_output=True,
                          check=True)


@pytest.mark.parametrize("repo", REPOS, ids=[p.name for p in REPOS])
def test_in_place_and_diff_give_the_output_tree(repo, tmp_path, capsys):
    """On a clean git clone: --in-place gives the -o tree, file for file; --diff applies with `git apply` to the
    same; `git checkout .` undoes the in-place rewrite."""
    from compare.__main__ import main as compare_main

    out = tmp_path / "out"
    status = compare_main(["migrate", str(repo), "-o", str(out)])
    clones = []
    for name in ("in_place", "diffed"):
        clone = tmp_path / name
        shutil.copytree(repo, clone, ignore=shutil.ignore_patterns("__pycache__"))
        _git(clone, "init", "-q")
        _git(clone, "add", "-A")
        _git(clone, "commit", "-qm", "original")
        clones.append(clone)
    assert compare_main(["migrate", str(clones[0]), "--in-place"]) == status
    diff = subprocess.run([sys.executable, "-m", "compare", "migrate", str(clones[1]), "--diff"], cwd=ROOT,
                          capture_output=True, check=False, timeout=300)
    assert diff.returncode == status, diff.stderr
    subprocess.run(["git", "apply", "-"], input=diff.stdout, cwd=clones[1], check=True)
    for path in out.rglob("*"):
        if path.is_file() and path.name != "MIGRATION.md":
            relative = path.relative_to(out)
            assert (clones[0] / relative).read_bytes() == path.read_bytes(), relative
            assert (clones[1] / relative).read_bytes() == path.read_bytes(), relative
    _git(clones[0], "checkout", ".")
    for path in repo.rglob("*.py"):
        assert (clones[0] / path.relative_to(repo)).read_bytes() == path.read_bytes()
