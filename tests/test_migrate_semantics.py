"""compare migrate, issue 42's classes 4, 5, 6, 8 and 9: rewrites that need a model wrapped, trained through
forward, wrapped after amp.initialize, collectives every rank reaches, `.module` only where the model is wrapped;
and the check of the whole output (compare.migrate.check.output_check), in both directions.

Each class has an example script in examples/horovod_scripts/ in the shape public code has; each migrated with
exit 0 and "Nothing: every Horovod use was migrated" before this work. No launcher runs here: each class is
either rewritten so that its precondition holds (the text is checked) or flagged with its line (exit 6). One
launch pair (slow): the supernet, whose migration gains find_unused_parameters=True, verified against its
original (without it, DDP raises at the second step).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from helpers import ROOT, ok, run

from compare.__main__ import main as compare_main
from compare.migrate import NotMigratable, migrate_source
from compare.migrate.check.output_check import check_output, checked_flags
from compare.migrate.migrate_tree import migrate_tree
from compare.migrate.read.repository import Repository
from compare.migrate.report.migration_report import render

CORPUS = ROOT / "examples" / "horovod_scripts"
NEW = {"gan", "ema", "compute_loss", "apex_amp", "rank0_barrier", "horovod_switch"}


def _source(name: str) -> str:
    return (CORPUS / f"{name}.py").read_text()


def _flagged(name: str, tmp_path: Path) -> tuple[dict[str, list[int]], str]:
    """Through the command line: exit 6, and each flag's category -> its lines in the original; the report."""
    out = tmp_path / f"{name}_ddp.py"
    assert compare_main(["migrate", str(CORPUS / f"{name}.py"), "-o", str(out)]) == 6
    lines: dict[str, list[int]] = {}
    for flag in migrate_source(_source(name)).flags:
        lines.setdefault(flag.category, []).append(flag.line)
    report = out.with_suffix(".migration.md").read_text()
    assert "Nothing: every Horovod use was migrated" not in report
    return lines, report


def _line(name: str, number: int) -> str:
    return _source(name).splitlines()[number - 1]


# ---- class 4: every model Horovod's optimizers covered -------------------------------------------------------

def test_a_gans_second_model_keeps_its_averaging_at_step():
    """Two DistributedOptimizers: one model is wrapped in DDP, the other's optimizer averages its gradients at
    step() as Horovod's did (average_gradients_at_step), and its broadcast stays: neither trains alone. On the
    code before, the second model was silently left training alone (exit 0, "Nothing")."""
    migration = migrate_source(_source("gan"))
    code = migration.code
    assert "ddp_netD = DDP(netD)" in code
    assert "optimizerG = average_gradients_at_step(optimizerG)" in code
    assert "for tensor in (netG.state_dict()).values():\n    dist.broadcast(tensor, src=0)" in code  # kept equal
    assert not [f for f in migration.flags if f.category == "model not wrapped"]


def test_an_ema_copys_broadcast_stays_a_broadcast():
    migration = migrate_source(_source("ema"))
    assert migration.flags == []
    assert "for tensor in (model_ema.state_dict()).values():\n    dist.broadcast(tensor, src=0)" in migration.code
    assert "ddp_model = DDP(model)" in migration.code
    assert any("EMA copy" in change.note for change in migration.changes)


def test_the_wrapped_models_own_broadcast_is_still_dropped():
    code = migrate_source(_source("ema")).code
    assert "(model.state_dict()).values()" not in code  # DDP's constructor broadcasts it


# ---- class 5: trained through forward ------------------------------------------------------------------------

def test_a_model_trained_through_another_method_keeps_horovods_averaging_and_is_flagged(tmp_path):
    """`loss = model.compute_loss(batch)`: no forward a DDP wrapper could run, so no wrapper; the optimizer
    averages its gradients at step() as Horovod's did (it trains the same), and the flag says why there is no
    DDP, at the optimizer's line, naming the method's line."""
    lines, _ = _flagged("compute_loss", tmp_path)
    assert [_line("compute_loss", n).strip() for n in lines["training forward not found"]] == [
        "optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())"]
    migration = migrate_source(_source("compute_loss"))
    assert "optimizer = average_gradients_at_step(optimizer)" in migration.code and "DDP(" not in migration.code
    assert "(line 61)" in next(f.why for f in migration.flags if f.category == "training forward not found")


def test_a_forward_of_the_model_itself_back_propagated_after_the_wrap_is_found():
    """The planted bug of the new shape: the training step calls the model, not the wrapper (its gradients are
    never averaged); an evaluation forward under no_grad is fine."""
    source = _source("plain")
    code = migrate_source(source).code
    assert "output = ddp_model(data)" in code
    planted = code.replace("output = ddp_model(data)", "output = model(data)")
    assert [(f.category, f.code) for f in check_output(source, planted)] == [("bypasses DDP", "output = model(data)")]
    evaluation = code + "with torch.no_grad():\n    loss = F.cross_entropy(model(data), target)\n    loss.backward()\n"
    assert check_output(source, evaluation) == []


# ---- class 6: DDP after apex's amp.initialize; find_unused_parameters where part of the model is frozen -----

def test_ddp_is_made_after_amp_initialize():
    migration = migrate_source(_source("apex_amp"))
    assert migration.flags == []
    assert "model, optimizer = amp.initialize(model, optimizer, opt_level=args.opt_level)\nddp_model = DDP(model)\n" \
        in migration.code
    # the order before: the check names it
    before = migration.code.replace("ddp_model = DDP(model)\n", "").replace(
        "optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * dist.get_world_size(), momentum=0.9)\n",
        "optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * dist.get_world_size(), momentum=0.9)\n"
        "ddp_model = DDP(model)\n")
    assert [f.category for f in check_output(_source("apex_amp"), before)] == ["DDP before amp"]


@pytest.fixture(scope="module")
def supernet_verified(tmp_path_factory, horovod_built):
    out = tmp_path_factory.mktemp("semantics")
    return run([sys.executable, "-m", "compare", "migrate", str(CORPUS / "supernet.py"), "-o",
                str(out / "supernet_ddp.py"), "--verify", "--verify-out", str(out / "supernet"), "--timeout", "240",
                "--", "--epochs", "1"], timeout=600)


def test_a_sampled_sub_network_gets_find_unused_parameters():
    migration = migrate_source(_source("supernet"))
    assert migration.flags == []
    assert "ddp_model = DDP(model, find_unused_parameters=True)" in migration.code
    assert any("draws at random" in c.note for c in migration.changes)  # the report says why
    # without it, the check names the wrap
    bare = migration.code.replace("DDP(model, find_unused_parameters=True)", "DDP(model)")
    assert [(f.category, f.code) for f in check_output(_source("supernet"), bare)] == [
        ("unused parameters", "ddp_model = DDP(model)")]


@pytest.mark.slow
def test_a_sampled_sub_network_migrated_with_exit_0_trains_the_same(supernet_verified):
    result = ok(supernet_verified)  # exit 0: nothing flagged, and parity holds
    assert re.search(r"^parity holds: ", result.stdout, re.MULTILINE), result.stdout


FROZEN_BACKBONE = '''
import horovod.torch as hvd
import torch
from torch import nn

hvd.init()
model = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
for epoch in range(3):
    for p in model.parameters():
        p.requires_grad = epoch > 0  # warm up with {what} frozen
    optimizer.zero_grad()
    model(torch.randn(4, 8)).sum().backward()
    optimizer.step()
'''


def test_parameters_frozen_while_training_get_find_unused_parameters():
    migration = migrate_source(FROZEN_BACKBONE.format(what="everything"))
    assert "ddp_model = DDP(model, find_unused_parameters=True)" in migration.code
    assert migration.flags == []


def test_a_model_never_frozen_gets_plain_ddp():
    plain = migrate_source(_source("plain")).code
    assert "ddp_model = DDP(model)" in plain and "find_unused_parameters" not in plain


# ---- class 8: collectives every rank reaches -----------------------------------------------------------------

def test_a_broadcast_used_as_a_barrier_on_rank_0_only_is_flagged(tmp_path):
    lines, _ = _flagged("rank0_barrier", tmp_path)
    assert [_line("rank0_barrier", n).strip() for n in lines["rank-only collective"]] == [
        'hvd.broadcast(torch.tensor(epoch), root_rank=0, name="checkpoint_written")']


RANK_BRANCHES = '''
import torch
import torch.distributed as dist

dist.init_process_group()
flag = torch.zeros(1)
if dist.get_rank() == 0:
    flag += 1
    dist.broadcast(flag, src=0)
{rest}
'''


@pytest.mark.parametrize("rest, flagged", [("else:\n    dist.broadcast(flag, src=0)\n", False),
                                           ("else:\n    pass\n", True), ("", True)])
def test_a_collective_under_a_rank_condition_is_flagged_unless_every_branch_makes_it(rest, flagged):
    source = RANK_BRANCHES.format(rest=rest)
    found = [f.category for f in check_output(source.replace("dist.broadcast", "hvd_broadcast"), source)]
    assert found == (["rank-only collective"] if flagged else [])


def test_a_condition_on_whether_the_job_is_distributed_is_not_a_rank_condition():
    source = RANK_BRANCHES.format(rest="").replace("dist.get_rank() == 0", "args.local_rank != -1")
    assert check_output(source, source) == []


# ---- class 9: no `.module`: the model keeps its keys on every path --------------------------------------------

def test_a_model_wrapped_on_one_path_only_saves_the_same_keys_on_both(tmp_path):
    """The wrap is under a switch: the model itself is saved on both paths, no `.module` (which failed where the
    model is not wrapped) and no flag; a `.module` planted where the wrap does not reach is still found."""
    out = tmp_path / "horovod_switch_ddp.py"
    assert compare_main(["migrate", str(CORPUS / "horovod_switch.py"), "-o", str(out)]) == 0
    code = out.read_text()
    assert ".module" not in code and 'torch.save(model.state_dict(), os.path.join(run_dir, "model.pt"))' in code
    planted = code.replace("ddp_model = DDP(model)", "model = DDP(model)").replace(
        "ddp_model(", "model(").replace("torch.save(model.state_dict()", "torch.save(model.module.state_dict()")
    assert [f.category for f in check_output(_source("horovod_switch"), planted)] == ["module off the wrap"]


# ---- the check of the whole output, both directions ----------------------------------------------------------

# Scripts: a repository's files are checked as a repository (tests/test_migrate_golden.py), each beside the others.
EXAMPLES = [p for p in sorted((ROOT / "examples").rglob("*.py")) if "horovod" in p.read_text() and p.stem not in NEW
            and "repos" not in p.relative_to(ROOT / "examples").parts]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(ROOT / "examples")))
def test_the_check_finds_nothing_in_any_existing_examples_migration(path):
    source = path.read_text()
    try:
        migration = migrate_source(source, check=False)
    except NotMigratable:
        pytest.skip("not a script to migrate (a stand-in that only names Horovod)")
    assert checked_flags(source, migration.code, migration.flags, migration.lines) == []
    # names: nothing unbound or shadowed, flagged script or not
    assert [f for f in check_output(source, migration.code) if f.category != "horovod left"] == []


def test_a_planted_unbound_name_is_found():
    source = _source("plain")
    code = migrate_source(source).code.replace("import torch.distributed as dist\n", "")
    found = check_output(source, code)
    assert {f.category for f in found} == {"unbound name"}
    assert all("`dist`" in f.why for f in found)


def test_a_planted_horovod_module_name_is_found():
    source = _source("plain")
    code = migrate_source(source).code + 'backend = importlib.import_module("horovod.torch")\n'
    code = "import importlib\n" + code
    found = [(f.category, f.code) for f in check_output(source, code)]
    assert found == [("horovod left", 'backend = importlib.import_module("horovod.torch")')]


def test_a_name_the_rewrite_added_and_a_local_of_the_script_are_told_apart():
    original = "import horovod.torch as hvd\n\ndef loss_fn(a, b):\n    dist = (a - b).norm()\n    return dist\n"
    kept = original.replace("import horovod.torch as hvd", "import torch.distributed as dist")
    assert check_output(original, kept) == []  # the local was there before, and nothing added reads it
    used = kept.replace("    return dist", "    dist.all_reduce(dist)\n    return dist")
    assert [f.category for f in check_output(original, used)] == ["shadowed name"]


NCCL = '''
import torch
import torch.distributed as dist

dist.init_process_group(backend="{backend}")
loss_sum = torch.tensor([1.0]{device})
dist.all_reduce(loss_sum)
'''


@pytest.mark.parametrize("backend, device, flagged", [("nccl", "", True), ("nccl", ', device="cuda"', False),
                                                      ("gloo", "", False)])
def test_cpu_tensors_are_found_only_where_the_script_asks_for_nccl(backend, device, flagged):
    source = NCCL.format(backend=backend, device=device)
    assert [f.category for f in check_output(source, source)] == (["CPU tensor on NCCL"] if flagged else [])


def test_the_report_says_nothing_is_left_only_when_the_check_ran_and_found_nothing():
    tree = migrate_tree(Repository.read(CORPUS / "plain.py"))
    assert tree.files[0].migration.checked and tree.flags == []
    assert "Nothing: every Horovod use was migrated." in render(tree, "plain.py", "plain_ddp.py")
    tree.files[0].migration = migrate_source(_source("plain"), check=False)
    assert "Nothing: every Horovod use" not in render(tree, "plain.py", "plain_ddp.py")
    flagged = migrate_tree(Repository.read(CORPUS / "compute_loss.py"))
    text = render(flagged, "compute_loss.py", "compute_loss_ddp.py")
    assert "Nothing" not in text and "training forward not found" in text


def test_a_row_for_code_the_migration_added_says_added_not_removed():
    """The helpers' row has no Horovod code: its Horovod column says the code was added, as its line says."""
    tree = migrate_tree(Repository.read(CORPUS / "unknown_call.py"))
    rows = [row for row in render(tree, "unknown_call.py", "out.py").splitlines() if "`helpers " in row]
    assert len(rows) == 1 and rows[0].startswith("| - | ") and "| (added) | `helpers " in rows[0], rows
