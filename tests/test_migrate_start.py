"""python -m compare migrate: a migrated repository starts the way its users start it (issue 50): valid syntax on
the oldest supported Python, one process group, probes and switches that still choose, helpers every importing
file reaches. Text-level tests of the rewrite and the driver; the fixture repositories' launches are in
tests/test_fixture_repos.py."""

from __future__ import annotations

import libcst as cst
import pytest

from compare.__main__ import main as compare_main
from compare.migrate import migrate_source
from compare.migrate.oldest_python import f_string_error, oldest_python_error, with_free_quotes

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
    assert "the result does not compile on Python 3.11 (line 15 of the result" in err, err
    assert len(err.strip().splitlines()) == 1 and not out.exists()
