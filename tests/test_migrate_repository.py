"""compare migrate DIR: the repository model and its outputs, without a launcher: Horovod reached through the
repository's own modules, loaded by name or re-exported; one helpers module; -o, --in-place and --diff keeping
every byte the migration does not change (encodings, line endings, permissions); bad input."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import libcst as cst
import pytest
import torch
from helpers import ROOT
from libcst.metadata import FullRepoManager, FullyQualifiedNameProvider

from compare.__main__ import main as compare_main
from compare.migrate.migrate_tree import migrate_tree
from compare.migrate.read.repository import Repository

WRAPPER = '''"""The project's distributed helpers."""
import horovod.torch as hvd


def setup():
    hvd.init()


def rank():
    return hvd.rank()


def average(tensor, name=None):
    return hvd.allreduce(tensor, name=name)
'''
BACKEND = '''import importlib


class HorovodBackend:
    module_name = "horovod.torch"

    def setup(self):
        self.hvd = importlib.import_module(self.module_name)
        self.hvd.init()

    def world_size(self):
        return self.hvd.size()
'''
TRAIN = '''import torch

from project.distributed import average, rank, setup
from project.distributed import hvd


def all_reduce_mean(x):  # the repository's own name, which an added helper must not shadow
    return x


def main():
    setup()
    for step in range(2):
        print(rank(), hvd.size(), average(torch.ones(1)), all_reduce_mean(step))


if __name__ == "__main__":
    main()
'''


def _repo(root: Path) -> Path:
    (root / "project").mkdir(parents=True)
    (root / "project" / "__init__.py").write_text("")
    (root / "project" / "distributed.py").write_text(WRAPPER)
    (root / "project" / "backend.py").write_text(BACKEND)
    (root / "train.py").write_text(TRAIN)
    (root / "data.csv").write_bytes(b"a,b\r\n1,2\r\n")
    # CRLF line endings and a Latin-1 coding line: both must survive the rewrite
    (root / "crlf.py").write_bytes(b"import horovod.torch as hvd\r\nhvd.init()\r\nprint(hvd.rank())  # r\xe9sum\xe9\r\n"
                                   .replace(b"import", b"# -*- coding: latin-1 -*-\r\nimport", 1))
    return root


def _names(code: str) -> set[str]:
    return {node.name for node in ast.walk(ast.parse(code)) if isinstance(node, ast.FunctionDef)}


def test_every_indirect_use_is_found_and_migrated(tmp_path):
    tree = migrate_tree(Repository.read(_repo(tmp_path / "repo")))
    code = {f.path: f.migration.code for f in tree.files}
    assert set(code) == {"crlf.py", "project/backend.py", "project/distributed.py", "train.py"}
    for path, text in code.items():
        assert "import horovod" not in text and "hvd." not in text, path
        compile(text, path, "exec")
    # loaded by name, kept on the object: every self.hvd of the class is torch.distributed now
    assert "dist.init_process_group()" in code["project/backend.py"]
    assert "return dist.get_world_size()" in code["project/backend.py"]
    assert "module_name" not in code["project/backend.py"]  # the constant only the loader read goes with it
    assert not tree.flags
    # re-exported: train.py's `from project.distributed import hvd` is gone, its hvd.size() migrated
    assert "dist.get_world_size()" in code["train.py"] and "import hvd" not in code["train.py"]
    # the wrapper keeps its names and signatures: its callers are left alone
    assert _names(code["project/distributed.py"]) == _names(WRAPPER)
    assert "from project.distributed import average, rank, setup" in code["train.py"]


def test_helpers_live_in_one_module_under_names_nobody_uses(tmp_path):
    tree = migrate_tree(Repository.read(_repo(tmp_path / "repo")))
    assert tree.helpers_path == "project/ddp_helpers.py"  # in the package that imports it, reached relatively
    helpers = _names(tree.helpers_code or "")
    assert helpers == {"all_reduce_mean_2"}  # the repository has an all_reduce_mean of its own
    wrapper = next(f for f in tree.files if f.path == "project/distributed.py").migration.code
    assert "from .ddp_helpers import all_reduce_mean_2" in wrapper and "def all_reduce_mean" not in wrapper
    assert all("def all_reduce_mean_2" not in f.migration.code for f in tree.files)  # defined once


def test_the_process_group_is_destroyed_only_where_the_job_ends(tmp_path):
    tree = migrate_tree(Repository.read(_repo(tmp_path / "repo")))
    code = {f.path: f.migration.code for f in tree.files}
    # setup() only initialises: the group it makes must outlive it
    assert "destroy_process_group" not in code["project/distributed.py"]
    main = code["train.py"].split("def main():")[1]
    assert "destroy_process_group" not in main  # train.py reaches Horovod only through the wrapper's setup()


def test_output_tree_keeps_every_byte_it_does_not_change(tmp_path):
    repo = _repo(tmp_path / "repo")
    (repo / "train.py").chmod(0o755)
    out = tmp_path / "out"
    assert compare_main(["migrate", str(repo), "-o", str(out)]) == 0
    assert (out / "data.csv").read_bytes() == (repo / "data.csv").read_bytes()
    assert (out / "project" / "__init__.py").read_bytes() == b""
    crlf = (out / "crlf.py").read_bytes()
    assert b"\r\n" in crlf and b"\n" not in crlf.replace(b"\r\n", b"")
    assert "résumé".encode("latin-1") in crlf and b"dist.get_rank()" in crlf
    assert (out / "train.py").stat().st_mode & 0o777 == 0o755
    report = (out / "MIGRATION.md").read_text()
    assert "project/backend.py" in report and "Horovod loaded by name" in report and "--entry train.py" in report
    assert not list(tmp_path.glob(".out.*"))  # no staging directory left behind


def test_the_diff_applies_with_git_and_gives_the_same_tree(tmp_path):
    repo = _repo(tmp_path / "repo")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    out = tmp_path / "out"
    compare_main(["migrate", str(repo), "-o", str(out)])
    diff = subprocess.run([sys.executable, "-m", "compare", "migrate", str(repo), "--diff"], capture_output=True,
                          cwd=ROOT, check=False, timeout=300)
    assert diff.returncode == 0, diff.stderr
    applied = subprocess.run(["git", "apply", "-"], input=diff.stdout, cwd=repo, capture_output=True, check=False)
    assert applied.returncode == 0, applied.stderr
    for path in ("crlf.py", "train.py", "project/backend.py", "project/distributed.py", "project/ddp_helpers.py"):
        assert (repo / path).read_bytes() == (out / path).read_bytes(), path


def test_migrating_without_verify_imports_no_torch(tmp_path):
    """A migration is text work: a machine without torch (a reviewer's laptop, a CI lint job) can run it. Checked
    as the user types it, every option read, Slurm's and --device's included."""
    repo = _repo(tmp_path / "repo")
    probe = ("import runpy, sys\n"
             f"sys.argv = ['compare', 'migrate', {str(repo)!r}, '-o', {str(tmp_path / 'out')!r}]\n"
             "try:\n    runpy.run_module('compare', run_name='__main__')\nexcept SystemExit as exc:\n"
             "    assert exc.code in (0, 6), exc.code\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] == 'torch'))\n")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=False,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out" / "train.py").is_file()
    assert result.stdout.strip().splitlines()[-1] == "[]"


def _commit(repo: Path) -> None:
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"]):
        subprocess.run(["git", *args], cwd=repo, check=True)


def test_in_place_only_on_a_clean_git_tree(tmp_path, capsys):
    repo = _repo(tmp_path / "repo")
    assert compare_main(["migrate", str(repo), "--in-place"]) == 2
    assert "not in a git work tree" in capsys.readouterr().err
    _commit(repo)
    (repo / "train.py").write_text(TRAIN + "# edited\n")
    assert compare_main(["migrate", str(repo), "--in-place"]) == 2
    assert "uncommitted changes" in capsys.readouterr().err
    subprocess.run(["git", "checkout", "."], cwd=repo, check=True)
    out = tmp_path / "out"
    compare_main(["migrate", str(repo), "-o", str(out)])
    assert compare_main(["migrate", str(repo), "--in-place"]) == 0
    for path in ("crlf.py", "train.py", "project/distributed.py", "project/ddp_helpers.py"):
        assert (repo / path).read_bytes() == (out / path).read_bytes(), path
    subprocess.run(["git", "checkout", "."], cwd=repo, check=True)
    assert (repo / "train.py").read_text() == TRAIN  # git undoes it


@pytest.mark.parametrize(("args", "message"), [
    (["--in-place", "--diff"], "give one of -o, --in-place and --diff"),
    (["--verify"], "needs --entry"),
    (["-o", "OUT", "--verify", "--entry", "nope.py"], "--entry nope.py: no such Python file"),
    (["--diff", "--verify", "--entry", "train.py"], "--verify runs the original beside its migration"),
    (["-o", "OUT", "--scheduler", "slurm"], "say where --verify runs both sides: give --verify"),
    (["-o", "OUT", "--device", "cuda"], "say where --verify runs both sides: give --verify"),
    (["-o", "OUT", "--verify", "--entry", "train.py", "--partition", "gpu"], "--partition needs --scheduler slurm"),
    (["-o", "OUT", "--verify", "--entry", "train.py", "--scheduler", "slurm", "--nodes", "0"],
     "--nodes must be positive"),
])
def test_bad_repository_options_are_one_line_exit_2(tmp_path, capsys, args, message):
    repo = _repo(tmp_path / "repo")
    args = [str(tmp_path / "out") if a == "OUT" else a for a in args]
    assert compare_main(["migrate", str(repo), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="runs where torch sees no CUDA device")
def test_verify_on_cuda_is_refused_in_one_line_without_a_gpu(tmp_path):
    """`--verify --device cuda` where torch sees no CUDA device: one line, exit 2, no traceback, nothing written."""
    repo = _repo(tmp_path / "repo")
    result = subprocess.run([sys.executable, "-m", "compare", "migrate", str(repo), "-o", str(tmp_path / "out"),
                             "--verify", "--entry", "train.py", "--device", "cuda", "--", "--epochs", "1"],
                            cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.strip().splitlines() == [
        "python -m compare: error: --device cuda: torch sees no CUDA device here (use --device cpu, or --scheduler "
        "slurm for GPUs on a cluster's nodes)"], result.stderr
    assert not (tmp_path / "out").exists()


def test_a_script_that_starts_its_own_workers_is_not_sent_to_slurm(tmp_path, capsys):
    """horovod.run (the script starts its workers) has no Slurm form here: refused before anything is written."""
    from compare.launch.slurm import unavailable

    if unavailable():
        pytest.skip(unavailable())
    script = ROOT / "examples" / "horovod_scripts" / "horovod_run.py"
    out = tmp_path / "hr_ddp.py"
    assert compare_main(["migrate", str(script), "-o", str(out), "--verify", "--scheduler", "slurm",
                         "--launch-mode", "api"]) == 2
    err = capsys.readouterr().err
    assert "--scheduler slurm: horovod_run.py starts its own workers" in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_a_repository_without_horovod_is_refused(tmp_path, capsys):
    (tmp_path / "a.py").write_text("import torch\n")
    assert compare_main(["migrate", str(tmp_path)]) == 2
    assert "no Horovod use" in capsys.readouterr().err


def test_an_existing_output_is_kept_without_force(tmp_path, capsys):
    repo = _repo(tmp_path / "repo")
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    assert compare_main(["migrate", str(repo), "-o", str(out)]) == 2
    assert (out / "keep.txt").read_text() == "mine"
    assert compare_main(["migrate", str(repo), "-o", str(out), "--force"]) == 0
    assert not (out / "keep.txt").exists() and (out / "MIGRATION.md").exists()


def test_a_module_loaded_through_a_registry_is_flagged_not_dropped(tmp_path, capsys):
    """A loader whose module name the code cannot read (a registry lookup) stays, and is named: never "done"."""
    repo = _repo(tmp_path / "repo")
    (repo / "project" / "registry.py").write_text(
        'import importlib\n\nMODULES = {"horovod": "horovod.torch", "local": "torch"}\n\n\n'
        'def load(name):\n    return importlib.import_module(MODULES[name])\n')
    assert compare_main(["migrate", str(repo), "-o", str(tmp_path / "out")]) == 6
    err = capsys.readouterr().err
    assert "project/registry.py line 3 (horovod left)" in err, err
    report = (tmp_path / "out" / "MIGRATION.md").read_text()
    assert "Nothing: every Horovod use" not in report and "horovod left" in report


def test_the_launch_is_decided_from_what_the_migration_read(tmp_path):
    """--verify's launch decision reads the facts the rewrite collected from the tree it parsed (the entry's
    Migration), not the script again; an entry with no Horovod of its own is read once, for them."""
    from compare.migrate.plan.launch_facts import RunSite
    from compare.verify.launch_mode import decide

    (tmp_path / "train.py").write_text(
        "import argparse\nimport horovod\nimport horovod.torch as hvd\n\n\ndef main(args):\n    hvd.init()\n\n\n"
        "if __name__ == '__main__':\n    parser = argparse.ArgumentParser()\n"
        "    parser.add_argument('--num-proc', type=int)\n    args = parser.parse_args()\n"
        "    if args.num_proc:\n        horovod.run(main, args=(args,), np=args.num_proc)\n    else:\n"
        "        main(args)\n")
    (tmp_path / "run.py").write_text("import train\n\ntrain.main(None)\n")
    tree = migrate_tree(Repository.read(tmp_path), entry="train.py")
    facts = tree.launch_facts()
    assert facts is next(f.migration.launch for f in tree.files if f.path == "train.py")
    assert facts.horovod_runs == (RunSite(14, ("num_proc", True), True),)
    assert facts.options == {"num_proc": ("--num-proc",)}
    assert decide(facts, ["--num-proc", "2"]).mode == "api" and decide(facts, []).mode == "cli"
    plain = migrate_tree(Repository.read(tmp_path), entry="run.py").launch_facts()
    assert plain.horovod_runs == () and decide(plain, []).mode == "cli"


def _qualified(repo: Path, path: str, code: str) -> set[str]:
    """LibCST's fully qualified names of the first node in `path` whose code is `code`."""
    root = repo.resolve()
    files = [str(p) for p in root.rglob("*.py")]
    wrapper = FullRepoManager(str(root), files, {FullyQualifiedNameProvider}).get_metadata_wrapper_for_path(
        str(root / path))
    names = wrapper.resolve(FullyQualifiedNameProvider)
    return next({q.name for q in found} for node, found in names.items()
                if isinstance(node, (cst.Attribute, cst.Name)) and wrapper.module.code_for_node(node) == code)


def test_libcst_resolves_horovod_only_where_a_file_imports_it_itself():
    """docs/architecture.md says why the migration resolves Horovod's names itself (normalize.py, passed_on.py)
    rather than through FullyQualifiedNameProvider: these are its three examples. A LibCST that follows them
    fails this test, and the choice is worth weighing again."""
    repos = ROOT / "examples" / "repos"
    assert _qualified(repos / "wrapper_module", "utils/distributed.py", "hvd.allreduce") == {"horovod.torch.allreduce"}
    assert _qualified(repos / "package_entry", "tinynet/train.py", "hvd.rank") == {
        "tinynet.train.main.<locals>.hvd.rank"}
    assert _qualified(repos / "package_entry", "tinynet/train.py", "hvd.init") == {
        "tinynet.train.cli.<locals>.hvd.init"}
    assert not any(name.startswith("horovod") for name in _qualified(
        repos / "plugin_backend", "backends/horovod_backend.py", "self.backend_module.init"))


def test_the_map_of_the_migration_names_every_module_and_only_those():
    """compare/migrate/__init__.py's map is the one list of the migration's and verification's modules: each
    file is in it, and nothing it names is gone (the map was once written in four docstrings, and drifted)."""
    import compare.migrate

    mapped = set(re.findall(r"^    (\S+(?:\.py|/))\s", compare.migrate.__doc__ or "", re.MULTILINE))
    package = ROOT / "compare"
    # a module by its path under migrate/ or verify/ (a stage's too); a folder that is no package by its name
    present = {p.relative_to(package / folder).as_posix() for folder in ("migrate", "verify")
               for p in (package / folder).glob("*.py") if p.name != "__init__.py"}
    present |= {p.relative_to(package / "migrate").as_posix() for p in (package / "migrate").glob("*/*.py")
                if p.name != "__init__.py"}
    present |= {f"{p.name}/" for folder in ("migrate", "verify") for p in (package / folder).iterdir()
                if p.is_dir() and p.name != "__pycache__" and not (p / "__init__.py").exists()}
    assert mapped == present, (sorted(mapped - present), sorted(present - mapped))


def test_verify_refuses_a_repository_whose_sync_batchnorm_is_outside_its_first_file(tmp_path):
    """The report asks for --device cuda when any file makes a SyncBatchNorm; --verify refuses on the same
    reading before it launches anything (it read only the first file, here the entry point, which has none)."""
    from compare.commands.migrate import cannot_verify

    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "main.py").write_text((ROOT / "examples" / "horovod_scripts" / "plain.py").read_text())
    (repo / "nets.py").write_text("import horovod.torch as hvd\n\n\ndef norm(width):\n"
                                  "    return hvd.SyncBatchNorm(width)\n")
    tree = migrate_tree(Repository.read(repo), entry="main.py")
    assert [f.path for f in tree.files] == ["main.py", "nets.py"]
    assert "SyncBatchNorm needs GPUs" in cannot_verify(tree, "main.py", "cpu")
    assert cannot_verify(tree, "main.py", "cuda") is None
