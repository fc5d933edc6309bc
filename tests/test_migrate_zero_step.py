"""Horovod's zero-gradient step (hvd.broadcast_optimizer_state on a fresh optimizer) and the migration of it:
what stays of the step is measured under horovodrun (tests/data/zero_step/probe_horovod.py), the migration's
helper is held to those figures, the rewrite runs it exactly where it changes training, and `--verify` of a
script where it shows holds with it and fails without it, through horovodrun, torchrun and `compare check`."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import torch
from helpers import ROOT, ok, run, tool

from compare.migrate import migrate_source
from compare.migrate.plan.added_helpers import HELPERS
from compare.names import Exit

DATA = ROOT / "tests" / "data" / "zero_step"
SCRIPT = (DATA / "decaying.py").read_text(encoding="utf-8")
OPTIMIZER_LINE = "optimizer = torch.optim.AdamW(model.parameters(), lr=0.05, weight_decay=0.5)  # OPTIMIZER"


def variant(optimizer: str, wrap: str) -> str:
    """The script with this optimizer, DistributedOptimizer built "before" or "after" the broadcast."""
    dropped = "# WRAP_AFTER" if wrap == "before" else "# WRAP_BEFORE"
    lines = [line for line in SCRIPT.splitlines() if not line.endswith(dropped)]
    return "\n".join(lines).replace(OPTIMIZER_LINE, f"optimizer = {optimizer}") + "\n"


def broadcast_change(source: str):
    migration = migrate_source(source)
    return migration, next(c for c in migration.changes if "broadcast_optimizer_state" in c.before)


@pytest.mark.parametrize(("optimizer", "wrap", "helper_call", "why"), [
    # the MNIST example's order: the step's state is dropped, its weight decay on the parameters stays
    ("torch.optim.AdamW(model.parameters(), lr=0.05, weight_decay=0.5)", "after", "keep_state=False", "shrinks"),
    ("torch.optim.AdamW(model.parameters(), lr=0.05)", "after", "keep_state=False", "default weight_decay is 0.01"),
    ("torch.optim.Adam(model.parameters(), lr=0.05, weight_decay=0.5)", "after", "keep_state=False", "about lr"),
    ("torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=0.5)", "after", "keep_state=False",
     "shrinks"),
    # wrapped before: the optimizer that trains is the one stepped, its state stays
    ("torch.optim.Adam(model.parameters(), lr=0.05)", "before", "keep_state=True", "step count starts at 1"),
    ("torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=0.5)", "before", "keep_state=True",
     "momentum buffer starts as the step left it"),
    # not an optimizer the rewrite can read: the step is run as Horovod ran it
    ("make_optimizer(model)", "after", "keep_state=False", "not one the migration can read"),
])
def test_the_step_is_run_again_where_it_changes_training(optimizer, wrap, helper_call, why):
    migration, change = broadcast_change(variant(optimizer, wrap))
    assert change.after == f"horovod_zero_gradient_step(optimizer, {helper_call})"
    assert why in change.note and "changes training" in change.note
    assert f"horovod_zero_gradient_step(optimizer, {helper_call})" in migration.code
    assert "def horovod_zero_gradient_step(optimizer, keep_state):" in migration.code


@pytest.mark.parametrize(("optimizer", "wrap"), [
    ("torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)", "after"),  # plain.py, Horovod's MNIST example
    ("torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)", "before"),
    ("torch.optim.Adam(model.parameters(), lr=0.05)", "after"),
    ("torch.optim.AdamW(model.parameters(), lr=0.05, weight_decay=0.0)", "after"),
])
def test_the_step_is_dropped_where_it_changes_nothing(optimizer, wrap):
    migration, change = broadcast_change(variant(optimizer, wrap))
    assert change.after == "" and "horovod_zero_gradient_step" not in migration.code
    assert "here that changes nothing" in change.note and "without weight decay moves no parameter" in change.note


def helper():
    """The helper as the rewrite writes it into a script, defined here."""
    scope: dict = {"torch": torch}
    exec(HELPERS["horovod_zero_gradient_step"], scope)  # the project's own helper text
    return scope["horovod_zero_gradient_step"]


# ---- through the real launchers -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def horovod_probe(horovod_built) -> dict[tuple[str, str], dict]:
    """(optimizer, order) -> the weight after the broadcast and the state the optimizer that trains holds,
    from Horovod itself."""
    result = ok(run([tool("horovodrun"), "-np", "2", "--gloo", sys.executable, str(DATA / "probe_horovod.py")]))
    found = [json.loads(line.split(":", 1)[1]) for line in result.stdout.splitlines()
             if line.startswith("[0]<stdout>:{")]
    return {(entry["optimizer"], entry["order"]): entry for entry in found}


@pytest.mark.slow
def test_horovod_keeps_the_steps_weight_decay_in_either_order_and_its_state_only_when_wrapped_before(
        horovod_probe):
    shrunk = [0.95, -1.9, 0.475]  # 1 - lr x weight_decay = 1 - 0.1 x 0.5
    for order in ("before", "after"):
        assert horovod_probe["sgd", order]["weight"] == [[1.0, -2.0, 0.5]]
        assert horovod_probe["adam", order]["weight"] == [[1.0, -2.0, 0.5]]
        for name in ("sgd_momentum_wd", "adamw_wd"):
            assert horovod_probe[name, order]["weight"][0] == pytest.approx(shrunk)
        # Adam's weight decay enters the gradient: its normalised update moves each parameter by lr
        assert horovod_probe["adam_wd", order]["weight"][0] == pytest.approx([0.9, -1.9, 0.4])
        assert (horovod_probe["adam", order]["state"] == {}) is (order == "after")  # a new optimizer: no state
    assert horovod_probe["adam", "before"]["state"]["step"] == 1.0
    assert horovod_probe["adamw_wd", "before"]["state"]["exp_avg"] == [[0.0, 0.0, 0.0]]


@pytest.mark.slow
def test_the_helper_leaves_what_horovod_left(horovod_probe):
    """The helper on a plain torch optimizer gives Horovod's weight and state for every optimizer and order."""
    sys.path.insert(0, str(DATA))
    from probe_cases import OPTIMIZERS, START, state_of

    step = helper()
    for (name, order), horovod in horovod_probe.items():
        model = torch.nn.Linear(3, 1, bias=False)
        with torch.no_grad():
            model.weight.copy_(torch.tensor(START))
        optimizer = OPTIMIZERS[name](model.parameters())
        step(optimizer, keep_state=order == "before")
        assert torch.allclose(model.weight, torch.tensor(horovod["weight"])), (name, order)
        ours = state_of(optimizer, model.weight)
        assert set(ours) == set(horovod["state"]), (name, order)
        for key, value in ours.items():
            assert torch.allclose(torch.tensor(value), torch.tensor(horovod["state"][key])), (name, order, key)


def verify(source: str, out: Path) -> tuple[str, Path]:
    """The script migrated and verified (np 2, CPU): what --verify printed, and the migrated script."""
    script = out / "train.py"
    script.write_text(source, encoding="utf-8")
    result = run([sys.executable, "-m", "compare", "migrate", str(script), "-o", str(out / "train_ddp.py"),
                  "--verify", "--verify-out", str(out / "verify"), "--timeout", "240"], timeout=600)
    return ok(result).stdout, out / "train_ddp.py"


def without_the_step(migrated: Path, out: Path) -> str:
    """The migration with the helper's call deleted, under torchrun, judged against the Horovod side."""
    planted = out / "planted.py"
    planted.write_text(re.sub(r"^horovod_zero_gradient_step\(.*\n", "", migrated.read_text(), flags=re.MULTILINE))
    launched = ok(run([tool("torchrun"), "--standalone", "--nproc-per-node", "2", str(planted)]))
    (out / "planted.log").write_text(launched.stdout)
    ok(run([sys.executable, "-m", "compare", "import", "text", str(out / "planted.log"), "--out",
            str(out / "planted"), "--framework", "ddp", "--world-size", "2"]))
    check = run([sys.executable, "-m", "compare", "check", str(out / "verify" / "horovod"), str(out / "planted")])
    assert check.returncode == Exit.PARITY_FAILS, check.stdout + check.stderr
    return check.stdout


@pytest.mark.slow
@pytest.mark.parametrize(("optimizer", "wrap", "first_step"), [
    # the weight decay the step applied shows in the first loss, measured before any update
    ("torch.optim.AdamW(model.parameters(), lr=0.05, weight_decay=0.5)", "after", 1),
    # Adam's step count (1 where the optimizer was wrapped before the broadcast) shows in the first update
    ("torch.optim.Adam(model.parameters(), lr=0.05)", "before", 2),
])
def test_verify_holds_with_the_step_and_fails_without_it(tmp_path, horovod_built, optimizer, wrap, first_step):
    printed, migrated = verify(variant(optimizer, wrap), tmp_path)
    assert re.search(r"^parity holds: ", printed, re.MULTILINE), printed
    assert f"parity fails: diverges at step {first_step} (seed 0)" in without_the_step(migrated, tmp_path)
