"""python -m compare migrate, two rewrites: gradient accumulation over an inner loop of micro-batches (the shape
of Horovod's ImageNet example) and Lightning scripts whose Trainer Horovod drove (Lightning 1.x). Text-level tests, one
behaviour test of the generated loops, and (slow) the migrated Lightning corpus script under torchrun."""

from __future__ import annotations

import ast
import contextlib
import re
import sys

import pytest
from helpers import ROOT, ok, run, tool

from compare.__main__ import main as compare_main
from compare.migrate import migrate_source
from compare.migrate.read import notes

CORPUS = ROOT / "examples" / "horovod_scripts"

HEAD = """import math

import horovod.torch as hvd
import torch
import torch.nn.functional as F

hvd.init()
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                     backward_passes_per_step=args.micro_batches)
"""

MICRO_BATCH_LOOP = """
for inputs, labels in loader:
    optimizer.zero_grad()
    # one backward() per micro-batch, one step for them all
    for start in range(0, len(inputs), args.micro_batch):
        stop = start + args.micro_batch
        micro_loss = F.cross_entropy(model(inputs[start:stop]), labels[start:stop])
        micro_loss = micro_loss / math.ceil(len(inputs) / args.micro_batch)
        micro_loss.backward()
    optimizer.step()
"""


# ---- inner-loop gradient accumulation --------------------------------------------------------------------

def test_inner_range_loop_syncs_on_its_last_pass():
    migration = migrate_source(HEAD + MICRO_BATCH_LOOP)
    assert migration.flags == []
    code = migration.code
    assert ("    # one backward() per micro-batch, one step for them all\n"
            "    passes = range(0, len(inputs), args.micro_batch)\n"
            "    for start in passes:\n") in code
    assert ("        micro_loss = micro_loss / math.ceil(len(inputs) / args.micro_batch)\n"
            "        with contextlib.nullcontext() if start == passes[-1] else ddp_model.no_sync():\n"
            "            micro_loss.backward()\n"
            "    optimizer.step()\n") in code
    assert "import contextlib" in code and "ddp_model = DDP(model)" in code and "hvd" not in code
    assert "F.cross_entropy(ddp_model(inputs[start:stop]), labels[start:stop])" in code  # the training forward
    by_note = {change.note: change for change in migration.changes}
    assert by_note[notes.INNER_ACCUMULATION].line == HEAD.count("\n") + 9  # the backward() line
    assert by_note[notes.INNER_LOOP_RANGE].after == ("passes = range(0, len(inputs), args.micro_batch); "
                                                     "for start in passes:")
    for words in ("no_sync()", "backward_passes_per_step", "k == the number of passes", "scaling"):
        assert words in notes.INNER_ACCUMULATION


def test_inner_loop_with_a_step_and_over_any_iterable():
    source = HEAD + """
for data, target in loader:
    optimizer.zero_grad()
    for j in range(len(data) - 1, -1, -args.batch_size):
        loss = F.cross_entropy(model(data[j:j + 1]), target[j:j + 1])
        loss.backward()
    optimizer.step()
    passes = 0
    for x, y in zip(data.chunk(4), target.chunk(4)):
        loss = F.cross_entropy(model(x), y) / 4
        loss.backward()
    print("stepping")
    optimizer.step()
"""
    migration = migrate_source(source)
    assert migration.flags == []
    code = migration.code
    # `passes` is taken by the script: the range gets another name
    assert "    passes_2 = range(len(data) - 1, -1, -args.batch_size)\n    for j in passes_2:\n" in code
    assert "with contextlib.nullcontext() if j == passes_2[-1] else ddp_model.no_sync():\n" \
           "            loss.backward()" in code
    assert "    for is_last_pass, (x, y) in mark_last(zip(data.chunk(4), target.chunk(4))):\n" in code
    assert "with contextlib.nullcontext() if is_last_pass else ddp_model.no_sync():\n            loss.backward()" \
        in code
    assert "def mark_last(iterable):" in code
    assert any(c.note == notes.INNER_LOOP_ITERABLE for c in migration.changes)


class _FakeDDP:
    """Records, for each backward(), whether DDP would all-reduce in it (outside no_sync())."""

    def __init__(self):
        self.syncing = True
        self.backwards: list[tuple[object, bool]] = []

    @contextlib.contextmanager
    def no_sync(self):
        self.syncing = False
        try:
            yield
        finally:
            self.syncing = True

    def __call__(self, item):  # the forward: its result is back-propagated
        model = self

        class Loss:
            def backward(self):
                model.backwards.append((item, model.syncing))
        return Loss()


@pytest.mark.parametrize("loop, items", [
    ("range(0, 10, 3)", [0, 3, 6, 9]),
    ("range(10, 0, -4)", [10, 6, 2]),
    ("range(1)", [0]),
    ("range(3, 3)", []),
    ("iter([5, 7, 5])", [5, 7, 5]),  # an iterator, with a repeated value
    ("(n * n for n in range(3))", [0, 1, 4]),
    ("[]", []),
])
def test_generated_loop_syncs_exactly_on_the_last_pass(loop, items):
    """Run the generated loop with a stand-in for the DDP model: only the last pass's backward() syncs."""
    source = HEAD + f"""
for batch in loader:
    for item in {loop}:
        loss = model(item)
        loss.backward()
    optimizer.step()
"""
    code = migrate_source(source).code
    body = "\n".join(line for line in code.splitlines()
                     if not line.lstrip().startswith(("import ", "from ", "dist.", "if not dist.", "ddp_model = DDP(")))
    body = body.split("model = torch.nn.Linear(4, 2)\n")[0] + body.split("optimizer = torch.optim.SGD(")[1].split(
        "\n", 1)[1]
    model = _FakeDDP()
    steps = []
    namespace = {"contextlib": contextlib, "ddp_model": model, "loader": [None],
                 "optimizer": type("Optimizer", (), {"step": lambda self: steps.append(1)})()}
    exec(compile(body, "<migrated>", "exec"), namespace)
    assert model.backwards == [(item, index == len(items) - 1) for index, item in enumerate(items)]
    assert steps == [1]


def test_inner_loop_without_a_step_after_it_stays_flagged(tmp_path, capsys):
    source = HEAD + """
for data, target in loader:
    for x in data.chunk(2):
        loss = F.cross_entropy(model(x), target[:1])
        loss.backward()
    print("no step in this block")
optimizer.step()
"""
    migration = migrate_source(source)
    assert [f.category for f in migration.flags] == ["unrecognised"]
    assert "backward_passes_per_step" in migration.flags[0].why
    assert "loss.backward()" in source.splitlines()[migration.flags[0].line - 1]
    script = tmp_path / "train.py"
    script.write_text(source)
    assert compare_main(["migrate", str(script), "-o", str(tmp_path / "out.py")]) == 6
    assert "needs a person" in capsys.readouterr().err


# ---- Lightning ---------------------------------------------------------------------------------------------

def _trainer_calls(code: str) -> list[str]:
    return [ast.unparse(node) for node in ast.walk(ast.parse(code))
            if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("Trainer")]


LIGHTNING_FORMS = {
    "accelerator": ("from pytorch_lightning import Trainer", "Trainer(accelerator='horovod', max_epochs=2)"),
    "strategy string, pl": ("import pytorch_lightning as pl", 'pl.Trainer(strategy="horovod", max_epochs=2)'),
    "HorovodStrategy()": ("from pytorch_lightning import Trainer\n"
                          "from pytorch_lightning.strategies import DDPStrategy, HorovodStrategy",
                          "Trainer(strategy=HorovodStrategy(), max_epochs=2)"),
    "lightning.pytorch": ("from lightning.pytorch import Trainer", 'Trainer(max_epochs=2, strategy="horovod")'),
    "L, plugins": ("import lightning as L\nfrom pytorch_lightning.plugins import HorovodPlugin",
                   "L.Trainer(max_epochs=2, plugins=[HorovodPlugin(), MyEnvironment()])"),
    "distributed_backend, gpus": ("import pytorch_lightning as pl",
                                  "pl.Trainer(distributed_backend='horovod', gpus=1, max_epochs=2)"),
}


@pytest.mark.parametrize("form", sorted(LIGHTNING_FORMS))
def test_horovod_trainer_becomes_lightning_ddp(form):
    imports, trainer = LIGHTNING_FORMS[form]
    source = f"import horovod.torch as hvd\n{imports}\n\nhvd.init()\ntrainer = {trainer}\ntrainer.fit(model)\n"
    migration = migrate_source(source)
    assert migration.flags == []
    (call,) = _trainer_calls(migration.code)
    assert "horovod" not in call.lower() and "gpus" not in call
    assert "strategy='ddp'" in call and "max_epochs=2" in call
    assert "devices=int(os.environ.get('LOCAL_WORLD_SIZE', 1))" in call
    assert "num_nodes=int(os.environ.get('GROUP_WORLD_SIZE', 1))" in call
    assert ("accelerator='gpu'" if "gpus=1" in trainer else "accelerator='cpu'") in call
    assert "Horovod" not in migration.code.replace("# Horovod", "")  # the strategy class's import is gone too
    assert "import os" in migration.code
    if form == "HorovodStrategy()":
        assert "from pytorch_lightning.strategies import DDPStrategy\n" in migration.code
    if form == "L, plugins":
        assert "plugins=[MyEnvironment()]" in call
    assert any(c.note == notes.LIGHTNING_STRATEGY and c.after.startswith("strategy=") for c in migration.changes)


def test_a_one_line_trainer_is_laid_out_one_argument_a_line():
    source = "import pytorch_lightning as pl\ntrainer = pl.Trainer(strategy='horovod', gpus=args.gpus)\n"
    assert migrate_source(source).code.endswith(
        "trainer = pl.Trainer(strategy='ddp',\n"
        "                     accelerator='gpu' if args.gpus else 'cpu',\n"
        "                     devices=int(os.environ.get('LOCAL_WORLD_SIZE', 1)),\n"
        "                     num_nodes=int(os.environ.get('GROUP_WORLD_SIZE', 1)))\n")


def test_comments_in_the_trainer_stay_and_do_not_count_as_horovod():
    source = ("from pytorch_lightning import Trainer\n"
              "trainer = Trainer(accelerator='horovod',  # Horovod: one process per slot\n"
              "                  max_epochs=3,  # as with Horovod\n"
              "                  default_root_dir='runs/horovod')\n")
    migration = migrate_source(source)
    assert migration.flags == []
    assert ("                  num_nodes=int(os.environ.get('GROUP_WORLD_SIZE', 1)),  # Horovod: one process per slot\n"
            "                  max_epochs=3,  # as with Horovod\n") in migration.code


@pytest.mark.parametrize("gpus, accelerator", [
    ("", "'cpu'"), ("gpus=0, ", "'cpu'"), ("gpus=None, ", "'cpu'"), ("gpus=2, ", "'gpu'"),
    ("gpus=(1 if args.cuda else 0), ", "'gpu' if (1 if args.cuda else 0) else 'cpu'"),
    ("gpus=1 if args.cuda else 0, ", "'gpu' if (1 if args.cuda else 0) else 'cpu'"),
])
def test_gpus_chooses_the_accelerator(gpus, accelerator):
    source = f"from pytorch_lightning import Trainer\ntrainer = Trainer({gpus}accelerator='horovod')\n"
    (call,) = _trainer_calls(migrate_source(source).code)
    assert f"accelerator={accelerator}," in call


def test_a_kept_accelerator_and_replaced_devices():
    source = ("from pytorch_lightning import Trainer\n"
              "trainer = Trainer(strategy='horovod', accelerator='gpu', devices=1, num_nodes=4)\n")
    (call,) = _trainer_calls(migrate_source(source).code)
    assert call == ("Trainer(strategy='ddp', devices=int(os.environ.get('LOCAL_WORLD_SIZE', 1)), "
                    "num_nodes=int(os.environ.get('GROUP_WORLD_SIZE', 1)), accelerator='gpu')")


def test_lightning_script_keeps_no_process_group_of_its_own():
    migration = migrate_source((CORPUS / "lightning_mnist.py").read_text())
    assert migration.flags == []
    code = migration.code
    after_docstring = code.split('"""', 2)[2]
    for gone in ("init_process_group", "destroy_process_group", "dist.", "hvd", "horovod'", "gpus="):
        assert gone not in after_docstring, gone
    assert "num_replicas=int(os.environ.get(\"WORLD_SIZE\", 1)), rank=int(os.environ.get(\"RANK\", 0))" in code
    assert "lr=self.lr * int(os.environ.get(\"WORLD_SIZE\", 1))" in code
    assert "    if int(os.environ.get(\"RANK\", 0)) == 0:\n        print(f\"world size {trainer.world_size}\")" in code
    assert ("        trainer = Trainer(strategy='ddp',\n"
            "                          accelerator='gpu' if (1 if args.cuda else 0) else 'cpu',\n"
            "                          devices=int(os.environ.get('LOCAL_WORLD_SIZE', 1)),\n"
            "                          num_nodes=int(os.environ.get('GROUP_WORLD_SIZE', 1)),\n"
            "                          callbacks=[history],\n") in code
    assert "# Horovod: initialize library.\n    torch.manual_seed(args.seed)" in code  # its comment stays
    notes_by_line = {(c.line, c.note) for c in migration.changes}
    init_line = next(i for i, line in enumerate(migration.source.splitlines(), 1) if line == "    hvd.init()")
    assert (init_line, notes.LIGHTNING_INIT) in notes_by_line
    ast.parse(code)


def test_lightning_init_not_a_statement_and_collectives_after_fit():
    source = ("import horovod.torch as hvd\nimport pytorch_lightning as pl\nhvd.init()\n"
              "trainer = pl.Trainer(strategy='horovod')\ntrainer.fit(model)\nloss = hvd.allreduce(loss)\n")
    code = migrate_source(source).code
    assert "import torch.distributed as dist" in code and "loss = all_reduce_mean(loss)" in code
    assert "init_process_group" not in code and "destroy_process_group" not in code


@pytest.mark.parametrize("source, line", [
    ("from pytorch_lightning import Trainer\nfrom pytorch_lightning.strategies import HorovodStrategy\n"
     "trainer = Trainer(strategy=HorovodStrategy(parallel_devices=devices))\n", 3),
    ("import pytorch_lightning as pl\nfrom pytorch_lightning.strategies import HorovodStrategy\n"
     "class MyStrategy(HorovodStrategy):\n    pass\ntrainer = pl.Trainer(strategy=MyStrategy())\n", 3),
    ("import pytorch_lightning as pl\ntrainer = pl.Trainer(plugins=[MyHorovodPlugin()], max_epochs=1)\n", 2),
    ("import pytorch_lightning as pl\nkwargs = dict(accelerator='horovod')\ntrainer = pl.Trainer(**kwargs)\n", 2),
    ("import horovod.torch as hvd\nimport pytorch_lightning as pl\nhvd.init()\n"
     "trainer = pl.Trainer(accelerator='horovod', callbacks=[HorovodTimeline()])\n", 4),
])
def test_untranslatable_horovod_in_a_trainer_needs_a_person(tmp_path, capsys, source, line):
    migration = migrate_source(source)
    assert "Lightning" in {f.category for f in migration.flags}
    assert line in {f.line for f in migration.flags if f.category == "Lightning"}
    script = tmp_path / "train.py"
    script.write_text(source)
    assert compare_main(["migrate", str(script), "-o", str(tmp_path / "out.py")]) == 6
    assert "needs a person" in capsys.readouterr().err
    assert _trainer_calls(migration.code) == _trainer_calls(source)  # left as it was, for the person


def test_generated_trainer_arguments_are_lightning_2s():
    """The migrated Trainer call builds a Lightning 2 Trainer (no gpus=, a DDP strategy on CPU)."""
    pytest.importorskip("pytorch_lightning")
    source = ("import os\nimport pytorch_lightning as pl\n"
              "trainer = pl.Trainer(accelerator='horovod', gpus=0, max_epochs=1, logger=False)\n")
    code = migrate_source(source).code
    result = run([sys.executable, "-c", code + "print(type(trainer.strategy).__name__, trainer.world_size, "
                                                 "type(trainer.accelerator).__name__)"])
    assert ok(result).stdout.split()[-3:] == ["DDPStrategy", "1", "CPUAccelerator"]


@pytest.mark.slow
def test_migrated_lightning_script_trains_under_torchrun(tmp_path):
    """Migrated, lightning_mnist.py trains with Lightning 2's DDP at world size 2 on CPU (Gloo)."""
    pytest.importorskip("pytorch_lightning")
    out = tmp_path / "lightning_mnist_ddp.py"
    assert compare_main(["migrate", str(CORPUS / "lightning_mnist.py"), "-o", str(out)]) == 0
    result = ok(run([tool("torchrun"), "--standalone", "--nproc-per-node", "2", str(out), "--epochs", "3"],
                    timeout=500))
    output = result.stdout + result.stderr
    assert "world size 2" in result.stdout, output[-3000:]
    assert "distributed_backend=gloo" in output
    losses = [float(x) for x in re.findall(r"^epoch \d+ train_loss (\S+)$", result.stdout, re.MULTILINE)]
    assert len(losses) == 3 and losses[-1] < losses[0] * 0.8, losses
    assert not (ROOT / "lightning_logs").exists()


@pytest.mark.parametrize("compression, hook", [
    ("hvd.Compression.fp16 if args.fp16 else hvd.Compression.none",
     "default_hooks.fp16_compress_hook if args.fp16 else None"),
    ("(hvd.Compression.none, hvd.Compression.fp16)[args.fp16]", "(None, default_hooks.fp16_compress_hook)[args.fp16]"),
])
def test_an_inline_compression_expression_becomes_one_bound_hook(compression, hook):
    """DistributedOptimizer(..., compression=<an expression>): the expression rewritten (fp16 -> DDP's fp16 hook,
    none -> None), bound once under a name the script does not use, and registered when not None. (The
    expression was copied as it was, hvd names and all, into `if X if c else Y is not None:`.)"""
    source = ("import torch\nimport horovod.torch as hvd\n\n\ndef main(args):\n    compression_hook = 1\n"
              "    hvd.init()\n"
              "    model = torch.nn.Linear(4, 2)\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
              "    hvd.broadcast_parameters(model.state_dict(), root_rank=0)\n"
              f"    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters(),\n"
              f"                                   compression={compression})\n"
              "    for _ in range(2):\n        opt.zero_grad()\n        model(torch.ones(1, 4)).sum().backward()\n"
              "        opt.step()\n")
    migration = migrate_source(source)
    assert not migration.flags, migration.flags
    assert f"    compression_hook_2 = {hook}\n    if compression_hook_2 is not None:\n" \
           "        ddp_model.register_comm_hook(None, compression_hook_2)\n" in migration.code, migration.code
    assert "hvd" not in migration.code
    ast.parse(migration.code)
