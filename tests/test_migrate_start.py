"""python -m compare migrate: a migrated repository starts the way its users start it (issue 50): valid syntax on
the oldest supported Python, one process group, probes and switches that still choose, helpers every importing
file reaches. Text-level tests of the rewrite and the driver; the fixture repositories' launches are in
tests/test_fixture_repos.py."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import libcst as cst
import pytest

from compare.__main__ import main as compare_main
from compare.migrate import migrate_source
from compare.migrate.transform.oldest_python import f_string_error, oldest_python_error, with_free_quotes

TRAIN = """import torch
import horovod.torch as hvd

hvd.init()
model = torch.nn.Linear(2, 1)
optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                     named_parameters=model.named_parameters())
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
for step in range(3):
    optimizer.zero_grad()
    loss = model(torch.ones(4, 2)).sum()
    loss.backward()
    optimizer.step()
"""


# ---- (6) valid output on the oldest supported Python -----------------------------------------------------

def test_a_string_put_into_an_f_string_takes_the_quote_the_f_string_leaves_free():
    migration = migrate_source(TRAIN + '    print(f"step {step} loss {loss.item() / hvd.local_size():.4f}")\n'
                               "    print(f'{hvd.local_size()} of {hvd.size()}')\n")
    assert """print(f"step {step} loss {loss.item() / int(os.environ['LOCAL_WORLD_SIZE']):.4f}")""" in migration.code
    assert """print(f'{int(os.environ["LOCAL_WORLD_SIZE"])} of {dist.get_world_size()}')""" in migration.code
    assert oldest_python_error(migration.code) is None


@pytest.mark.parametrize(("code", "line"), [
    ('x = 1\ny = f"{d["k"]}"\n', 2),
    ("x = f'{a}'\ny = f'''{1 + \"\\n\".count(\"a\")}'''\n", 2),
    ('x = f"{a!r:>{w}}" + f"{b}"\ny = "b"\n', None),
    ("x = f'{d[\"k\"]}' + f\"\"\"{d['k']}\"\"\"\n", None),
])
def test_the_check_reads_3_11_f_string_rules_whatever_python_runs_it(code, line):
    """Nested same quotes and a backslash in an f-string's braces: 3.12's compile() takes them, 3.11's does not.
    The concrete-syntax read finds them on any Python (compile() alone would pass them on 3.12), and passes
    valid code; on 3.11 compile() agrees with it."""
    found = f_string_error(code)
    assert (found and found[0]) == line, found
    assert (oldest_python_error(code) is None) == (line is None)


def test_quotes_are_flipped_only_where_they_clash():
    module = cst.parse_module("a = f\"{d['k']}\"\nb = f'{x}' + \"y\"\nc = f\"{f'{1}'}\"\n")
    assert with_free_quotes(module).code == module.code


def test_a_result_that_does_not_compile_on_3_11_is_a_failed_migration(tmp_path, capsys):
    """No quote is free inside an f-string nested in another of the other quote: the rewrite's string cannot be
    written for 3.11 there, and the migration says so (exit 2, the line), writing nothing."""
    script = tmp_path / "train.py"
    script.write_text(TRAIN + """    print(f'{step} {f"{hvd.local_size()}"}')\n""")
    out = tmp_path / "train_ddp.py"
    assert compare_main(["migrate", str(script), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert re.search(r"train.py: the migration failed: the result does not compile on Python 3.11 \(line \d+ of "
                     r"the result: f-string", err), err
    assert len(err.strip().splitlines()) == 1 and not out.exists()


# ---- (2) one process group -------------------------------------------------------------------------------

def _write(root, files: dict[str, str]):
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return root


def test_every_init_is_idempotent_and_the_group_is_destroyed_once_at_the_end_of_the_entry(tmp_path):
    """hvd.init() twice (a wrapper's init() and a trainer's constructor) was harmless; init_process_group() twice
    raises. Each written init is guarded; the group ends once, at the end of the entry's training block."""
    from compare.migrate.migrate_tree import migrate_tree
    from compare.migrate.read.repository import Repository

    repo = _write(tmp_path / "repo", {
        "wrapper.py": "import horovod.torch as hvd\n\n\ndef init():\n    hvd.init()  # the wrapper's\n"
                      "    return hvd.rank()\n",
        "trainer.py": "import torch\nimport horovod.torch as hvd\n\n\nclass Trainer:\n    def __init__(self):\n"
                      "        hvd.init()\n        self.model = torch.nn.Linear(2, 1)\n",
        "train.py": "import torch\nimport horovod.torch as hvd\nimport wrapper\nfrom trainer import Trainer\n\n"
                    "wrapper.init()\ntrainer = Trainer()\nhvd.init()\n"
                    "opt = hvd.DistributedOptimizer(torch.optim.SGD(trainer.model.parameters(), lr=0.1))\n"
                    "for step in range(2):\n    opt.zero_grad()\n    trainer.model(torch.ones(1, 2)).sum().backward()\n"
                    "    opt.step()\n"})
    tree = migrate_tree(Repository.read(repo), entry="train.py")
    code = {f.path: f.migration.code for f in tree.files}
    wrapper = code["wrapper.py"]
    assert "    if not dist.is_initialized():\n        dist.init_process_group()  # the wrapper's\n" in wrapper
    assert "        if not dist.is_initialized():\n            dist.init_process_group()\n" in code["trainer.py"]
    assert "\nif not dist.is_initialized():\n    dist.init_process_group()\n" in code["train.py"]
    written = "".join(code.values())
    assert written.count("init_process_group()") == written.count("if not dist.is_initialized():\n") == 3
    assert written.count("destroy_process_group()") == 1 and code["train.py"].rstrip().endswith(
        "dist.destroy_process_group()")


# ---- (3) probes keep their fallback ----------------------------------------------------------------------

PROBE = """import sys

import torch

try:
    import horovod.torch as hvd
    HAS_HOROVOD = True
except ImportError:  # no Horovod: one process
    hvd = None
    HAS_HOROVOD = False


def main():
    if hvd is not None:
        hvd.init()
    rank, size = (hvd.rank(), hvd.size()) if HAS_HOROVOD else (0, 1)
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1 * size)
    if hvd:
        optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    for step in range(2):
        optimizer.zero_grad()
        model(torch.ones(4, 2)).sum().backward()
        optimizer.step()
    print(f"rank {rank} of {size}: {'distributed' if hvd else 'single process'}")


if __name__ == "__main__":
    main()
"""


def test_a_probe_becomes_a_test_of_a_torch_distributed_job_and_keeps_its_fallback(tmp_path):
    """`try: import horovod.torch as hvd / except ImportError: hvd = None` once became an unconditional import:
    `python train.py` then died in init_process_group. Now the probe asks whether torchrun started the process,
    and without it the fallback runs single-process."""
    migration = migrate_source(PROBE)
    assert migration.flags == []
    assert ('if dist.is_available() and "WORLD_SIZE" in os.environ:\n    hvd = dist\n    HAS_HOROVOD = True\n'
            "else:  # no Horovod: one process\n    hvd = None\n    HAS_HOROVOD = False\n") in migration.code
    assert "horovod" not in migration.code.replace("HAS_HOROVOD", "")
    script = tmp_path / "train_ddp.py"
    script.write_text(migration.code)
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
    result = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120,
                            check=False)
    assert result.returncode == 0 and result.stdout.strip() == "rank 0 of 1: single process", result.stderr


# ---- (8) switch branches in every file -------------------------------------------------------------------

ENGINE = """import torch


def step_once(model, optimizer, args):
    optimizer.zero_grad()
    model(torch.ones(4, 2)).sum().backward()
    if args.horovod:
        optimizer.synchronize()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        with optimizer.skip_synchronize():
            optimizer.step()
    else:
        optimizer.step()
    if not args.horovod:
        optimizer.synchronize()  # not the Horovod branch: kept
"""
ENGINE_DDP = """    if args.horovod:
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    else:
        optimizer.step()
    if not args.horovod:
        optimizer.synchronize()  # not the Horovod branch: kept
"""


@pytest.mark.parametrize("own_ddp_path", [False, True])
def test_horovod_only_statements_under_a_switch_go_in_a_file_that_never_imports_horovod(tmp_path, own_ddp_path):
    """engine.py never imports Horovod, yet its `if args.horovod:` branch calls what only Horovod's optimizer has:
    removed there too, whether the Horovod code is migrated or the repository's own DDP path replaces it."""
    from compare.migrate.migrate_tree import migrate_tree
    from compare.migrate.read.repository import Repository

    train = ("import argparse\n\nimport torch\nimport horovod.torch as hvd\nfrom engine import step_once\n\n"
             "args = argparse.ArgumentParser().parse_args()\nhvd.init()\nmodel = torch.nn.Linear(2, 1)\n"
             "optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1))\n"
             "for step in range(3):\n    step_once(model, optimizer, args)\n")
    if own_ddp_path:
        train = ("import argparse\n\nimport torch\nimport torch.distributed as dist\nfrom engine import step_once\n"
                 "try:\n    import horovod.torch as hvd\nexcept ImportError:\n    hvd = None\n\n"
                 "args = argparse.ArgumentParser().parse_args()\nmodel = torch.nn.Linear(2, 1)\n"
                 "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                 "if args.horovod:\n    hvd.init()\n    optimizer = hvd.DistributedOptimizer(optimizer)\n"
                 "else:\n    dist.init_process_group()\n    model = torch.nn.parallel.DistributedDataParallel(model)\n"
                 "for step in range(3):\n    step_once(model, optimizer, args)\n")
    repo = _write(tmp_path / "repo", {"train.py": train, "engine.py": ENGINE})
    tree = migrate_tree(Repository.read(repo), entry="train.py")
    engine = next(f for f in tree.files if f.path == "engine.py")
    assert ENGINE_DDP in engine.migration.code
    assert [(c.line, c.before) for c in engine.migration.changes] == [
        (8, "optimizer.synchronize()"), (10, "with optimizer.skip_synchronize():")]
    assert engine.migration.flags == []


# ---- (1) launched as the users launch it ------------------------------------------------------------------

SCRIPT_WITH_PATH = """import os
import sys

import torch
import horovod.torch as hvd

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from lib.dist import setup  # noqa: E402

setup()
loss = hvd.allreduce(torch.ones(1), op=hvd.Sum)
"""
LIB_DIST = """import horovod.torch as hvd


def setup():
    hvd.init()
    return hvd.allreduce(torch.zeros(1), name="warmup")
"""


def test_helpers_go_where_each_importer_reaches_them_and_the_launch_is_checked(tmp_path):
    """scripts/train.py extends sys.path itself and imports the package lib/: the helpers go beside the script
    (its directory is sys.path[0]) and into lib/ (imported relatively, however lib is reached); read from the
    README's command, every import of them resolves."""
    from compare.migrate.migrate_tree import migrate_tree
    from compare.migrate.read.launches import launches_of
    from compare.migrate.read.repository import Repository

    repo = _write(tmp_path / "repo", {"scripts/train.py": SCRIPT_WITH_PATH, "lib/__init__.py": "",
                                      "lib/dist.py": "import torch\n" + LIB_DIST,
                                      "README.md": "Run it: `python scripts/train.py`\n"})
    repository = Repository.read(repo)
    launches = launches_of(repo, {p: f.text for p, f in repository.files.items()})
    assert [(launch.target, launch.as_module, launch.found) for launch in launches] == [
        ("scripts/train.py", False, "README.md line 1")]
    tree = migrate_tree(repository)
    assert tree.helpers_paths == ["lib/ddp_helpers.py", "scripts/ddp_helpers.py"]
    code = {f.path: f.migration.code for f in tree.files}
    assert "from ddp_helpers import " in code["scripts/train.py"]
    assert "from .ddp_helpers import " in code["lib/dist.py"]
    assert [f for _, f in tree.flags if f.category == "helpers unreached"] == []


def test_the_reach_check_follows_the_order_of_a_scripts_own_sys_path_change():
    """The helpers at the root, imported by scripts/train.py above its own sys.path.insert: ModuleNotFoundError
    when started as `python scripts/train.py` (what the migration once wrote); below it, resolved."""
    from compare.migrate.read.import_reach import unreached_helpers
    from compare.migrate.read.launches import Launch

    launch = Launch("scripts/train.py", False, found="README.md line 1")
    above = "import os\nimport sys\nfrom ddp_helpers import x\n\nsys.path.insert(0, os.path.join(" \
            "os.path.dirname(__file__), '..'))\n"
    below = "import os\nimport sys\n\nsys.path.insert(0, os.path.join(os.path.dirname(__file__), '..'))\n" \
            "from ddp_helpers import x\n"
    found = unreached_helpers(launch, {"scripts/train.py": above, "ddp_helpers.py": ""}, {"ddp_helpers"})
    assert [(u.path, u.line) for u in found] == [("scripts/train.py", 3)]
    assert "started as scripts/train.py ('scripts')" in found[0].why
    assert unreached_helpers(launch, {"scripts/train.py": below, "ddp_helpers.py": ""}, {"ddp_helpers"}) == []
    # a package's relative import, in a file run by its path: no parent package
    script = Launch("pkg/train.py", False, found="README.md line 1")
    found = unreached_helpers(script, {"pkg/train.py": "from .ddp_helpers import x\n", "pkg/__init__.py": "",
                                       "pkg/ddp_helpers.py": ""}, {"ddp_helpers"})
    assert [u.line for u in found] == [1] and "no parent package" in found[0].why
    module = Launch("pkg.train", True, found="README.md line 1")
    assert unreached_helpers(module, {"pkg/train.py": "from .ddp_helpers import x\n", "pkg/__init__.py": "",
                                      "pkg/ddp_helpers.py": ""}, {"ddp_helpers"}) == []


def test_the_reach_check_follows_a_package_reached_through_a_directory_symlink(tmp_path):
    """`cmd/pkg -> ../pkg` and `python cmd/train.py`: the package is reached through the link. The reach check
    follows it (once it saw no cmd/pkg and checked nothing there): helpers imported by name from the root's
    module are unreached from cmd/, told at the package's own file; inside the package, imported relatively, they
    resolve. The migration puts them there, and the migrated script imports them through the link."""
    from compare.migrate.read.import_reach import linked_directories, unreached_helpers
    from compare.migrate.read.launches import Launch

    launch = Launch("cmd/train.py", False, found="README.md line 1")
    script = {"cmd/train.py": "from pkg.trainer import train\n", "pkg/__init__.py": ""}
    at_root = {**script, "pkg/trainer.py": "import torch\nfrom ddp_helpers import x\n", "ddp_helpers.py": ""}
    assert unreached_helpers(launch, at_root, {"ddp_helpers"}) == []  # blind without the link: pkg not found
    found = unreached_helpers(launch, at_root, {"ddp_helpers"}, {"cmd/pkg": "pkg"})
    assert [(u.path, u.line) for u in found] == [("pkg/trainer.py", 2)]
    in_package = {**script, "pkg/trainer.py": "from .ddp_helpers import x\n", "pkg/ddp_helpers.py": ""}
    assert unreached_helpers(launch, in_package, {"ddp_helpers"}, {"cmd/pkg": "pkg"}) == []

    repo = _write(tmp_path / "repo", {
        "pkg/__init__.py": "", "README.md": "Run: `horovodrun -np 2 python cmd/train.py`\n",
        "pkg/trainer.py": "import horovod.torch as hvd\nimport torch\n\n\ndef train():\n    hvd.init()\n"
                          "    print('sum', hvd.allreduce(torch.ones(2), average=False).tolist())\n",
        "cmd/train.py": "from pkg.trainer import train\n\nif __name__ == '__main__':\n    train()\n"})
    (repo / "cmd" / "pkg").symlink_to("../pkg", target_is_directory=True)
    assert linked_directories(repo) == {"cmd/pkg": "pkg"}
    assert compare_main(["migrate", str(repo), "-o", str(tmp_path / "out")]) == 0
    out = tmp_path / "out"
    assert (out / "cmd" / "pkg").is_symlink() and (out / "pkg" / "ddp_helpers.py").exists()
    assert "from .ddp_helpers import " in (out / "pkg" / "trainer.py").read_text()
    # started as the README says (a process group of one), nothing on PYTHONPATH: imported through the link
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(29400 + os.getpid() % 500))
    run = subprocess.run([sys.executable, "cmd/train.py"], cwd=out, env=env, capture_output=True, text=True,
                         timeout=120, check=False)
    assert run.returncode == 0 and "sum [1.0, 1.0]" in run.stdout, run.stderr


# ---- issue 52 item 7: outcomes typed end to end -----------------------------------------------------------

def test_flag_categories_and_normalisations_are_enums_end_to_end():
    """Every flag of the corpus (the rewrite's, the check's, the driver's) carries a Category, and every
    normalisation of the fixture repositories a Reached: no bare string compared as text."""
    from compare.migrate.migrate_tree import migrate_tree
    from compare.migrate.read.flag_category import Category
    from compare.migrate.read.normalize import Reached
    from compare.migrate.read.repository import Repository

    root = Path(__file__).resolve().parents[1] / "examples"
    flags = [flag for name in ("adasum", "elastic", "unknown_call", "compute_loss")
             for flag in migrate_source((root / "horovod_scripts" / f"{name}.py").read_text()).flags]
    assert flags and all(type(flag.category) is Category for flag in flags)
    assert {Category.ADASUM, Category.ELASTIC, Category.UNRECOGNISED} <= {flag.category for flag in flags}
    normalized = [n for repo in ("plugin_backend", "package_entry", "wrapper_module")
                  for f in migrate_tree(Repository.read(root / "repos" / repo)).files for n in f.normalized]
    assert normalized and all(type(n.how) is Reached for n in normalized)
    assert {n.how for n in normalized} >= {Reached.LOADED_BY_NAME, Reached.RETURNED_BY_ACCESSOR}


# ---- (4) switches still choose --------------------------------------------------------------------------

CHOICE_TRAIN = """import argparse

import torch
import torch.distributed as dist

try:
    import horovod.torch as hvd
except ImportError:
    hvd = None


def gather(features, args):
    if args.dist == "horovod":
        return hvd.allgather(features)
    return torch.cat(GATHER(features))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dist", choices=["horovod", "torch", "none"], default="horovod")
    args = parser.parse_args()
    if args.dist == "horovod":
        hvd.init()
    elif args.dist == "torch":
        dist.init_process_group("gloo")
    print(gather(torch.ones(1), args))


if __name__ == "__main__":
    main()
"""


@pytest.mark.parametrize(("gather", "differs"), [("torch.distributed.nn.all_gather", True),
                                                  ("dist.nn.functional.all_gather", True),
                                                  ("all_gather_no_grad", False)])
def test_a_horovod_default_takes_the_own_ddp_path_only_where_it_does_the_same_job(tmp_path, gather, differs):
    """`--dist {horovod,torch,none}` whose default is horovod once became SystemExit. Where the repository's own
    torch path does the same job, horovod now runs as torch; where its gather sums the gradient in backward
    (torch.distributed.nn.all_gather) where hvd.allgather averaged it, the Horovod branch is migrated in place
    instead (its gather averaging as Horovod's did), and the report says why at the own path's line."""
    from compare.migrate.migrate_tree import migrate_tree
    from compare.migrate.read.repository import Repository

    repo = _write(tmp_path / "repo", {"train.py": CHOICE_TRAIN.replace("GATHER", gather)})
    tree = migrate_tree(Repository.read(repo), entry="train.py")
    code = tree.files[0].migration.code
    assert "SystemExit" not in code and "hvd.init" not in code and "hvd.allgather" not in code
    assert tree.flags == []
    routed = ('    args = parser.parse_args()\n    if args.dist == "horovod":  # Horovod\'s value now takes the '
              'torch.distributed path\n        args.dist = "torch"\n    if args.dist == "torch":\n')
    if not differs:
        assert routed in code
        return
    assert "args.dist = \"torch\"" not in code
    assert '    if args.dist == "horovod":\n        return all_gather_cat(features)\n' \
           f"    return torch.cat({gather}(features))\n" in code
    kept = [change for change in tree.files[0].migration.changes if change.note.startswith("Kept as it was")]
    assert [(change.line, change.after) for change in kept] == [(15, f"{gather}(features)")]
    assert "backward sums the gradient over the ranks" in kept[0].note


REDUCE = """import torch.distributed as dist
from torch.distributed import ReduceOp

import horovod.torch as hvd


def reduce(tensor, args):
    if args.horovod:
        return HOROVOD
    if args.distributed:
        OWN
    return tensor
"""


@pytest.mark.parametrize(("horovod", "own", "differs"), [
    ("hvd.allreduce(tensor)", "dist.all_reduce(tensor)\n        return tensor / dist.get_world_size()", None),
    ("hvd.allreduce(tensor)", "tensor = tensor.clone()\n        dist.all_reduce(tensor)\n        tensor /= world_size",
     None),
    ("hvd.allreduce(tensor, name='x')", "dist.all_reduce(tensor, op=ReduceOp.AVG)", None),
    ("hvd.allreduce(tensor)", "dist.all_reduce(tensor)\n        return tensor", "sums here where the Horovod path's "
                                                                              "hvd.allreduce averaged"),
    ("hvd.allreduce(tensor, op=hvd.Sum)", "dist.all_reduce(tensor)", None),
    ("hvd.allreduce(tensor, average=False)", "dist.all_reduce(tensor, op=dist.ReduceOp.AVG)",
     "averages here where the Horovod path's hvd.allreduce summed"),
    ("hvd.allreduce(tensor, op=hvd.Adasum)", "dist.all_reduce(tensor)", None),  # no meaning to compare
])
def test_the_two_paths_all_reduces_are_compared_by_meaning(horovod, own, differs):
    """Average against sum, either way: hvd.allreduce averages unless average=False or op=Sum; dist.all_reduce
    sums unless op=AVG or its block divides the result by the world size. A same meaning is no difference."""
    from compare.migrate.plan.path_differences import differing_paths

    found = differing_paths(cst.parse_module(REDUCE.replace("HOROVOD", horovod).replace("OWN", own)), {"hvd"})
    assert [(d.line, d.why.split("own DDP path ")[1]) for d in found] == ([(11, differs)] if differs else [])


SAVE = """import torch
from torch.nn.parallel import DistributedDataParallel

import horovod.torch as hvd


def main(args, model, optimizer):
    if args.distributed:
        WRAP
    else:
        optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    SAVE
"""


@pytest.mark.parametrize(("wrap", "save", "differs"), [
    ("model = DistributedDataParallel(model)", "torch.save(model.state_dict(), args.out)", True),
    ("model = DistributedDataParallel(model)", "state = {'model': model.state_dict()}\n    torch.save(state, 'x.pt')",
     True),
    ("model = DistributedDataParallel(model)", "torch.save(model.module.state_dict(), args.out)", False),
    ("ddp_model = DistributedDataParallel(model)", "torch.save(model.state_dict(), args.out)", False),
    ("model = DistributedDataParallel(model)", "print(model.state_dict())", False),
])
def test_a_checkpoint_the_own_path_saves_with_module_keys_differs(wrap, save, differs):
    """The own path rebinds the model to its DDP wrapper and saves its state_dict(): keys prefixed `module.`,
    where Horovod, which never wraps, saved the model's own. `.module`, a wrapper of its own name, or no save: the
    same keys."""
    from compare.migrate.plan.path_differences import differing_paths

    found = differing_paths(cst.parse_module(SAVE.replace("WRAP", wrap).replace("SAVE", save)), {"hvd"})
    assert [d.code.split("(")[0] for d in found] == (["torch.save"] if differs else [])
    assert all("keys prefixed `module.`" in d.why for d in found)


def test_a_summing_gather_is_found_by_what_its_name_resolves_to():
    """`from torch.distributed.nn import all_gather as gather_all`: the summing gather under another name; the
    repository's own function of that name is not it."""
    from compare.migrate.plan.path_differences import differing_paths

    code = ("import torch\nimport horovod.torch as hvd\nIMPORT\n\n\ndef gather(x, args):\n"
            "    if args.horovod:\n        return hvd.allgather(x)\n    return torch.cat(gather_all(x))\n")
    summing = differing_paths(cst.parse_module(code.replace("IMPORT", "from torch.distributed.nn import "
                                                                      "all_gather as gather_all")), {"hvd"})
    assert [(d.line, d.code) for d in summing] == [(9, "gather_all(x)")]
    own = code.replace("IMPORT", "from mylib import gather_all")
    assert differing_paths(cst.parse_module(own), {"hvd"}) == []


def test_a_store_true_switch_is_routed_under_torchrun_and_alone_stays_one_process(tmp_path):
    from compare.migrate.plan.switch_routes import Route

    route = Route("horovod", True, "distributed", True)
    assert route.statement("args") == ('if args.horovod:  # the Horovod option now takes the torch.distributed path\n'
                                       '    args.horovod, args.distributed = False, "WORLD_SIZE" in os.environ\n')
    assert route.describe() == "--horovod now runs as --distributed"


# ---- (5) the repository's own names that contain "horovod" ----------------------------------------------

def test_own_modules_and_parameters_named_horovod_are_not_read_as_horovod(tmp_path):
    """`from .horovod_backend import HorovodBackend` is the repository's module, and `def build(horovod=False)`
    its parameter: neither is Horovod (once an "unrecognised" import and a "horovod left" name)."""
    from compare.migrate.migrate_tree import migrate_tree
    from compare.migrate.read.repository import Repository

    repo = _write(tmp_path / "repo", {
        "pkg/__init__.py": "",
        "pkg/horovod_backend.py": "import horovod.torch as hvd\n\n\nclass HorovodBackend:\n    def setup(self):\n"
                                  "        hvd.init()\n        return hvd.rank()\n",
        "pkg/train.py": "from .horovod_backend import HorovodBackend\nfrom pkg.horovod_backend import HorovodBackend "
                        "as Other\n\n\ndef build(horovod=False):\n    return (HorovodBackend() if horovod else "
                        "Other()).setup()\n\n\nif __name__ == \"__main__\":\n    build(horovod=True)\n"})
    tree = migrate_tree(Repository.read(repo))
    assert tree.flags == []
    assert [f.path for f in tree.files] == ["pkg/horovod_backend.py"]


# ---- (5) Horovod through classes ---------------------------------------------------------------------------

BASE = """import importlib


class Backend:
    dist_module_name = ""

    def setup(self):
        self.dist_module = importlib.import_module(self.dist_module_name)
        self.dist_module.init()

    def rank(self):
        return self.dist_module.rank()
"""
SUBCLASS = """from .base import Backend


class HorovodBackend(Backend):
    dist_module_name = "horovod.torch"

    def wrap_optimizer(self, optimizer, model):
        return self.dist_module.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
"""
REGISTRY = """from .base import Backend
from .horovod_backend import HorovodBackend

BACKENDS = {"horovod": HorovodBackend, "base": Backend}
"""
USER = """from backends import BACKENDS, HorovodBackend

backend = BACKENDS["horovod"]()
backend.setup()
if isinstance(backend, HorovodBackend):
    print("rank", backend.rank())
"""


def test_a_module_named_on_a_subclass_and_loaded_by_its_base_class_is_followed(tmp_path):
    """'horovod.torch' on a subclass's attribute, loaded by the base class into `self.dist_module` and used
    through it in both: followed as `import horovod.torch` (once: no file changed, and a flag advised deleting
    the string); the registry and the identity test keep their class, the spent string goes."""
    from compare.migrate.migrate_tree import migrate_tree
    from compare.migrate.read.repository import Repository

    repo = _write(tmp_path / "repo", {"backends/__init__.py": REGISTRY, "backends/base.py": BASE,
                                      "backends/horovod_backend.py": SUBCLASS, "train.py": USER})
    tree = migrate_tree(Repository.read(repo), entry="train.py")
    assert tree.flags == []
    code = {f.path: f.migration.code for f in tree.files}
    assert ("    def setup(self):\n        if not dist.is_initialized():\n            dist.init_process_group()\n\n"
            "    def rank(self):\n        return dist.get_rank()\n") in code["backends/base.py"]
    subclass = code["backends/horovod_backend.py"]
    assert "horovod.torch" not in subclass and "dist_module" not in subclass
    assert "return average_gradients_at_step(optimizer)" in subclass and "class HorovodBackend(Backend):" in subclass
    assert "backends/__init__.py" not in code and "train.py" not in code  # the registry, the isinstance: as they were


def _plugin_backend(tmp_path, epoch_end: str | None = None) -> Path:
    import shutil

    repo = tmp_path / "plugin_backend"
    shutil.copytree(Path(__file__).resolve().parents[1] / "examples" / "repos" / "plugin_backend", repo,
                    ignore=shutil.ignore_patterns("__pycache__"))
    if epoch_end is not None:
        train = repo / "train.py"
        code = train.read_text()
        barrier = "        backend.barrier()  # every worker ends the epoch before the next one starts\n"
        assert code.count(barrier) == 1
        train.write_text(code.replace(barrier, epoch_end))
    return repo


def test_a_backend_registry_and_its_identity_tests_keep_the_migrated_class(tmp_path):
    """examples/repos/plugin_backend: the registry maps "horovod" to HorovodBackend and train.py tests
    `isinstance(backend, HorovodBackend)` (it scales the learning rate). The backend is migrated in its class,
    which keeps its name and base: the registry, the identity test and the script stay as they were (the launch in
    tests/test_fixture_repos.py trains the same, which it would not with the rate unscaled). The barrier every
    rank calls through the backend is no flag."""
    from compare.migrate.migrate_tree import migrate_tree
    from compare.migrate.read.repository import Repository

    tree = migrate_tree(Repository.read(_plugin_backend(tmp_path)))
    assert tree.flags == []
    assert [f.path for f in tree.files] == ["backends/horovod_backend.py"]  # the registry and train.py unchanged
    backend = tree.files[0].migration.code
    assert "class HorovodBackend(Backend):" in backend and '    name = "horovod"\n' in backend
    assert "    def barrier(self) -> None:\n        dist.barrier()\n" in backend


@pytest.mark.parametrize("guard", ["if backend.rank == 0:", "if backend.is_root:", "if rank == 0:"])
def test_a_barrier_only_some_ranks_call_through_the_backend_is_flagged_with_its_line(tmp_path, guard):
    """`if rank == 0: backend.barrier()`: the backend's method makes a collective (dist.barrier() once
    migrated), so the other ranks never reach it and the job hangs; flagged on train.py's line, a file the
    migration does not change. An if/else that calls it on both sides is fine."""
    from compare.migrate.migrate_tree import migrate_tree
    from compare.migrate.read.flag_category import Category
    from compare.migrate.read.repository import Repository

    prefix = "        rank = backend.rank\n" if guard == "if rank == 0:" else ""
    repo = _plugin_backend(tmp_path, f"{prefix}        {guard}\n            backend.barrier()\n")
    tree = migrate_tree(Repository.read(repo))
    line = next(i + 1 for i, text in enumerate((repo / "train.py").read_text().splitlines())
                if text.strip() == "backend.barrier()")
    assert [(path, flag.line, flag.category) for path, flag in tree.flags] == [
        ("train.py", line, Category.RANK_ONLY_COLLECTIVE)]
    assert f"`backend.barrier(...)` under `{guard}` only" in tree.flags[0][1].why
    assert tree.outputs().keys() == {"backends/horovod_backend.py", "backends/ddp_helpers.py"}

    both = _plugin_backend(tmp_path / "both", f"        {guard}\n            backend.barrier()\n"
                                              "        else:\n            backend.barrier()\n")
    assert migrate_tree(Repository.read(both)).flags == []


def test_launches_are_read_from_commands_entry_points_and_main_blocks(tmp_path):
    """How the users start a tree: a README's command (a launcher before it, `cd` and PYTHONPATH in it), a console
    entry point (pyproject.toml, setup.py), and a `__main__` file none of them names; never a file in a venv."""
    from compare.migrate.read.launches import launches_of

    files = {"tools/run.py": "print(1)\n", "pkg/__init__.py": "", "pkg/cli.py": "def main():\n    pass\n",
             "pkg/serve.py": "def main():\n    pass\n", "eval.py": "if __name__ == '__main__':\n    pass\n",
             "venv/lib/x.py": ""}
    _write(tmp_path, {**files,
                      "README.md": "Train: `cd tools && PYTHONPATH=.. horovodrun -np 2 python run.py --epochs 1`\n",
                      "pyproject.toml": '[project]\nname = "x"\n[project.scripts]\nx-train = "pkg.cli:main"\n',
                      "setup.py": "setup(entry_points={'console_scripts': ['x-serve = pkg.serve:main']})\n",
                      "venv/README.md": "python venv/lib/x.py\n"})
    launches = launches_of(tmp_path, files)
    assert [(la.target, la.as_module, la.cwd, la.python_path, la.found) for la in launches] == [
        ("tools/run.py", False, "tools", ("..",), "README.md line 1"),
        ("pkg.cli", True, "", (), "pyproject.toml [project.scripts] x-train"),
        ("pkg.serve", True, "", (), "setup.py console_scripts x-serve"),
        ("eval.py", False, "", (), "eval.py (a __main__ block)")]
    assert launches[0].import_roots() == ["tools", ""]
    assert launches[0].describe() == "cd tools && PYTHONPATH=.. run.py"
