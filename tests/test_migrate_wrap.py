"""compare migrate, issue 49: the model keeps its name, class and state-dict keys; DDP is bound to a new name and
only the training forward goes through it (compare/migrate/plan/wrap_plan.py). Text-level tests of where the wrapper
goes and what stays the model's, of find_unused_parameters's evidence, of one optimizer over several modules, of
arguments carried to the wrap, and of the check judging per function; one test of the gradient-averaging helper
in a real (one-process, Gloo) process group. The fixture repositories train through the launchers in
tests/test_fixture_repos.py."""

from __future__ import annotations

import os
import socket
import textwrap

import pytest
import torch
import torch.distributed as dist

from compare.__main__ import main as compare_main
from compare.migrate import migrate_source
from compare.migrate.check.output_check import check_output
from compare.migrate.plan.added_helpers import HELPERS
from compare.names import Exit


def _migrate(body: str, head: str = "") -> tuple[str, list]:
    source = "import horovod.torch as hvd\nimport torch\n" + textwrap.dedent(head) + textwrap.dedent(body)
    migration = migrate_source(source)
    return migration.code, migration.flags


SCRIPT = """
hvd.init()
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
"""


def test_only_the_back_propagated_forward_goes_through_the_wrapper():
    code, flags = _migrate(SCRIPT + """
for x in [torch.ones(3, 4)]:
    optimizer.zero_grad()
    output = model(x)
    loss = output.sum()
    loss.backward()
    optimizer.step()
with torch.no_grad():
    held_out = model(torch.ones(3, 4)).sum()
torch.save(model.state_dict(), "model.pt")
print(model.weight.shape)
""")
    assert flags == []
    assert "ddp_model = DDP(model)\n" in code and "    output = ddp_model(x)\n" in code
    # evaluation, saving and attributes: the model itself, no .module
    assert "held_out = model(torch.ones(3, 4)).sum()" in code
    assert 'torch.save(model.state_dict(), "model.pt")' in code and "print(model.weight.shape)" in code
    assert ".module" not in code


def test_a_forward_returned_by_a_method_is_routed_where_it_is_made():
    code, flags = _migrate("""
class Trainer:
    def __init__(self, model):
        self.model = model
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        hvd.broadcast_parameters(self.model.state_dict(), root_rank=0)
        self.optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=self.model.named_parameters())

    def compute_loss(self, x):
        logits = self.model(x)
        return logits.pow(2).mean()

    def step(self, x):
        loss = self.compute_loss(x)
        loss.backward()
        self.optimizer.step()

    def predict(self, x):
        return self.model(x).argmax(1)


hvd.init()
Trainer(torch.nn.Linear(4, 2)).step(torch.ones(3, 4))
""")
    assert flags == []
    assert "self.model_ddp = DDP(self.model)" in code
    assert "logits = self.model_ddp(x)" in code and "return self.model(x).argmax(1)" in code


def test_a_function_that_trains_its_argument_gets_the_wrapper():
    code, flags = _migrate(SCRIPT + """
train_one_epoch(model, optimizer, [torch.ones(3, 4)])
evaluate(model)
""", head="""

def train_one_epoch(net, optimizer, batches):
    net.train()
    for x in batches:
        optimizer.zero_grad()
        net(x).sum().backward()
        optimizer.step()


def evaluate(net):
    net.eval()
    return net(torch.ones(1, 4))

""")
    assert flags == []
    assert "train_one_epoch(ddp_model, optimizer, [torch.ones(3, 4)])" in code and "evaluate(model)" in code


def test_a_wrap_under_a_condition_binds_the_wrapper_to_the_model_first():
    code, flags = _migrate("""
import argparse
args = argparse.Namespace(horovod=True)
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
if args.horovod:
    hvd.init()
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
for x in [torch.ones(3, 4)]:
    model(x).sum().backward()
    optimizer.step()
""")
    assert flags == []
    assert "ddp_model = model\nif args.horovod:\n" in code and "    ddp_model = DDP(model)\n" in code
    assert "    ddp_model(x).sum().backward()" in code


def test_a_model_bound_again_after_the_wrap_is_flagged():
    _, flags = _migrate(SCRIPT + """
for x in [torch.ones(3, 4)]:
    model(x).sum().backward()
    optimizer.step()
model = torch.nn.Linear(4, 2)
""")
    assert [(f.category, f.code) for f in flags] == [("model re-bound", "model = torch.nn.Linear(4, 2)")]


def test_no_training_forward_keeps_horovods_averaging_and_says_so():
    code, flags = _migrate(SCRIPT + "print(model(torch.ones(1, 4)))\n")
    assert "optimizer = average_gradients_at_step(optimizer)" in code and "DDP(" not in code
    assert [f.category for f in flags] == ["training forward not found"]


@pytest.mark.parametrize("evidence, why", [
    ("for p in model.parameters():\n        if p.grad is None:\n            p.grad = torch.zeros_like(p)\n",
     "fills gradients that are None"),
    ("model.sample_subnet()\n", "changes what the model's forward runs"),
    ("", None),
])
def test_find_unused_parameters_only_on_evidence_and_the_report_says_why(evidence, why):
    head = """
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(4, 2), torch.nn.Linear(4, 2)

    def sample_subnet(self):
        pass

    def forward(self, x):
        return self.a(x)

"""
    body = SCRIPT.replace("torch.nn.Linear(4, 2)", "Net()") + "for x in [torch.ones(3, 4)]:\n" \
        "    model(x).sum().backward()\n" + (f"    {evidence}" if evidence else "") + "    optimizer.step()\n"
    migration = migrate_source("import horovod.torch as hvd\nimport torch\n" + head + body)
    wrap = next(c for c in migration.changes if c.after.startswith("ddp_model = DDP("))
    if why is None:
        assert wrap.after == "ddp_model = DDP(model)" and "find_unused" not in wrap.note
    else:
        assert wrap.after == "ddp_model = DDP(model, find_unused_parameters=True)" and why in wrap.note


def test_a_forward_that_branches_on_its_data_gets_find_unused_parameters():
    head = """
class Gate(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(4, 2), torch.nn.Linear(4, 2)

    def forward(self, x):
        if x.sum() > 0:
            return self.a(x)
        return self.b(x)

"""
    code, _ = _migrate(SCRIPT.replace("torch.nn.Linear(4, 2)", "Gate()") + "model(torch.ones(3, 4)).sum().backward()\n",
                       head=head)
    assert "ddp_model = DDP(model, find_unused_parameters=True)" in code


@pytest.mark.parametrize("params", [
    "list(query.parameters()) + list(key.parameters())",
    '[{"params": query.parameters()}, {"params": key.parameters(), "lr": 0.01}]',
    "itertools.chain(query.parameters(), key.parameters())",
])
def test_one_optimizer_over_two_modules_averages_both(params):
    """Never one wrapped and one not: the optimizer keeps Horovod's averaging of every parameter it covers."""
    code, flags = _migrate(f"""
import itertools
hvd.init()
query, key = torch.nn.Linear(4, 2), torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD({params}, lr=0.1)
hvd.broadcast_parameters(query.state_dict(), root_rank=0)
hvd.broadcast_parameters(key.state_dict(), root_rank=0)
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=query.named_parameters())
(query(torch.ones(3, 4)) * key(torch.ones(3, 4))).sum().backward()
optimizer.step()
""")
    assert flags == []
    assert "optimizer = average_gradients_at_step(optimizer)" in code and "DDP(" not in code
    assert code.count("dist.broadcast(tensor, src=0)") == 2


def test_a_compression_argument_is_carried_to_the_method_that_wraps():
    code, flags = _migrate("""
class Trainer:
    def __init__(self, model, compression):
        self.model = model
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        self.optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                                  compression=compression)

    def fit(self, data):
        hvd.broadcast_parameters(self.model.state_dict(), root_rank=0)
        for x in data:
            self.model(x).sum().backward()
            self.optimizer.step()


hvd.init()
Trainer(torch.nn.Linear(2, 2), hvd.Compression.fp16).fit([torch.ones(2)])
""")
    assert flags == []
    assert "        self.ddp_compression_hook = compression\n" in code
    assert ("        self.model_ddp = DDP(self.model)\n        if self.ddp_compression_hook is not None:\n"
            "            self.model_ddp.register_comm_hook(None, self.ddp_compression_hook)\n") in code


def test_a_name_the_rewrite_leaves_unbound_fails_the_migration(tmp_path, capsys):
    """compression= read where the wrap is made, outside the function that binds it and not on an object: the
    migration fails with the line (exit 2) and writes nothing, rather than flag the user's code."""
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import horovod.torch as hvd
        import torch

        hvd.init()
        model = torch.nn.Linear(4, 2)


        def make_optimizer(compression):
            global optimizer
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                                 compression=compression)


        make_optimizer(hvd.Compression.fp16)
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        model(torch.ones(3, 4)).sum().backward()
        optimizer.step()
        """))
    out = tmp_path / "train_ddp.py"
    assert compare_main(["migrate", str(script), "-o", str(out)]) == Exit.USAGE
    err = capsys.readouterr().err
    assert "nothing binds" in err and "`compression`" in err and "Traceback" not in err
    assert not out.exists()


def test_the_check_judges_a_users_own_wrap_per_function():
    """A file that rebinds the model to its wrapper itself: a model attribute read in a function that has its
    own `model` (an inference function) or before the wrap is no use of the wrapper; after it, it is."""
    original = SCRIPT + "model(torch.ones(3, 4)).sum().backward()\n"
    result = textwrap.dedent("""
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP


        def predict(model, x):
            return model.weight @ x


        dist.init_process_group()
        model = torch.nn.Linear(4, 2)
        print(model.weight.shape)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        model = DDP(model)
        model(torch.ones(3, 4)).sum().backward()
        """)
    assert [f.category for f in check_output(original, result)] == []
    after = result + "print(model.weight.shape)\n"
    assert [(f.category, f.code) for f in check_output(original, after)] == [
        ("bypasses DDP", "print(model.weight.shape)")]


# ---- flags that are right (issue 50 item 7): a loop that needs nothing, a `.module` on a correct line --------

def test_a_loop_that_needs_nothing_gets_no_flag_and_stays_as_it_was():
    """Loops with no Horovod call and no backward: data preparation before the model, an evaluation loop under
    no_grad, local metrics over the parameters, a learning-rate schedule over the param groups; beside a training
    loop whose inner loop accumulates (backward_passes_per_step). None needs a change; none is flagged (they once
    were, among the flags that named right lines), and each is left as it was (the model itself, no wrapper)."""
    loops = """
        features = []
        for x, _ in loader:  # data preparation before any model
            features.append(x.mean())
        """
    training = """
        for chunks in [loader, loader]:
            optimizer.zero_grad()
            for x, y in chunks:
                torch.nn.functional.cross_entropy(model(x), y).backward()
            for group in optimizer.param_groups:  # a schedule
                group["lr"] *= 0.9
            optimizer.step()
            correct = 0
            for x, y in loader:  # evaluation, local
                with torch.no_grad():
                    correct += (model(x).argmax(1) == y).sum().item()
            norms = {}
            for name, parameter in model.named_parameters():  # metrics, local
                norms[name] = parameter.detach().norm().item()
        """
    head = "loader = [(torch.ones(3, 4), torch.zeros(3, dtype=torch.long))] * 2\n" + textwrap.dedent(loops)
    code, flags = _migrate(SCRIPT.replace("named_parameters=model.named_parameters())",
                                          "named_parameters=model.named_parameters(),\n"
                                          "                                     backward_passes_per_step=2)")
                           + textwrap.dedent(training), head)
    assert flags == []
    for line in (*textwrap.dedent(loops).strip().splitlines(), *textwrap.dedent(training).splitlines()[5:]):
        assert line in code, line  # the schedule, the evaluation and the metrics, as they were
    assert "torch.nn.functional.cross_entropy(ddp_model(x), y)" in code  # only the accumulated forward


def test_code_that_runs_before_the_wrap_is_no_flag_and_keeps_the_model():
    """A resume inside `try:`/`except Exception:` and attribute reads before the DistributedOptimizer: they run
    before any wrapper exists and read the model itself, as they did (once they gained a `.module` and, in an
    except block, lost the checkpoint silently). No flag, no change."""
    before = """
        try:
            model.load_state_dict(torch.load("missing.pt", weights_only=True))
        except Exception:
            print("fresh start", model.weight.shape)
        """
    script = SCRIPT.replace("optimizer = hvd.DistributedOptimizer", textwrap.dedent(before).lstrip() +
                            "optimizer = hvd.DistributedOptimizer")
    code, flags = _migrate(script + "model(torch.ones(3, 4)).sum().backward()\n")
    assert flags == []
    assert textwrap.dedent(before).lstrip() in code and ".module" not in code
    assert code.index("print(\"fresh start\"") < code.index("ddp_model = DDP(model)")


def test_a_module_on_a_correct_line_is_no_flag():
    """The repository's own wrap under a condition, and `.module` read under the same condition: correct, not
    flagged; an EMA's own `.module` (another object's attribute) neither. The same read outside the condition
    fails where the model is not wrapped: flagged."""
    original = SCRIPT + "model(torch.ones(3, 4)).sum().backward()\n"
    result = textwrap.dedent("""
        import argparse
        import copy

        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP


        class EMA:
            def __init__(self, model):
                self.module = copy.deepcopy(model)


        args = argparse.Namespace(distributed=True)
        dist.init_process_group()
        model = torch.nn.Linear(4, 2)
        ema = EMA(model)
        if args.distributed:
            model = DDP(model)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        model(torch.ones(3, 4)).sum().backward()
        if args.distributed:
            torch.save(model.module.state_dict(), "model.pt")
        torch.save(ema.module.state_dict(), "ema.pt")
        """)
    assert check_output(original, result) == []
    outside = result + "print(model.module.weight.shape)\n"
    assert [(f.category, f.code) for f in check_output(original, outside)] == [
        ("module off the wrap", "print(model.module.weight.shape)")]


def test_the_averaging_helper_gives_a_zero_to_a_parameter_without_a_gradient():
    """average_gradients_at_step in a real one-process Gloo group: every parameter that requires a gradient is
    all-reduced, a zero where backward gave none (as Horovod's synchronize()), one frozen is left alone."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    namespace = {"torch": torch, "dist": dist}
    exec(HELPERS["average_gradients_at_step"], namespace)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    try:
        used, unused, frozen = (torch.nn.Parameter(torch.ones(2)) for _ in range(3))
        frozen.requires_grad_(False)
        optimizer = namespace["average_gradients_at_step"](torch.optim.SGD([used, unused, frozen], lr=0.5,
                                                                           momentum=0.9))
        (used * 3).sum().backward()
        optimizer.step()
        assert torch.equal(used.grad, torch.full((2,), 3.0)) and torch.equal(unused.grad, torch.zeros(2))
        assert frozen.grad is None and torch.equal(frozen, torch.ones(2))
    finally:
        dist.destroy_process_group()
