"""The driver's passes over a result after its rewrite, each over the tree (stage 1, no launcher): a name renamed,
a spent constant removed, and where Horovod is still named."""

from compare.migrate.check.horovod_named import horovod_named
from compare.migrate.transform.rename import names_renamed
from compare.migrate.transform.spent_constants import without_spent_constants


def test_a_name_is_renamed_where_the_file_writes_it_and_nowhere_else():
    code = ("import torch.distributed as dist\nfrom .dist import world\nfrom . import dist as d\n"
            "def f(dist):\n    return dist.rank, args.dist, g(dist=dist), f'{dist}'\n")
    assert names_renamed(code, {"dist": "torch_dist"}) == (
        "import torch.distributed as torch_dist\nfrom .dist import world\nfrom . import torch_dist as d\n"
        "def f(torch_dist):\n    return torch_dist.rank, args.dist, g(torch_dist=torch_dist), f'{torch_dist}'\n")
    # two names at once: a swap, as the driver puts a file's own `dist` back
    assert names_renamed("a = dist + held\n", {"dist": "torch_dist", "held": "dist"}) == "a = torch_dist + dist\n"
    assert names_renamed("def (:\n", {"dist": "x"}) == "def (:\n"  # what does not parse stays as it is


def test_a_spent_constant_goes_with_its_line_and_what_stood_above_it_stays():
    code = ('import os\n\n# the backend\nBACKEND = "horovod.torch"  # loaded below\nKEEP = "horovod"\n'
            'print(KEEP, KEEP)\n\nclass C:\n    x = 1\n    MODULE = "Horovod"\n')
    new, removed, lines = without_spent_constants(code, {"BACKEND", "KEEP", "MODULE"})
    assert new == 'import os\n\n# the backend\nKEEP = "horovod"\nprint(KEEP, KEEP)\n\nclass C:\n    x = 1\n'
    assert removed == [(4, 'BACKEND = "horovod.torch"  # loaded below'), (10, 'MODULE = "Horovod"')]
    # the removed lines have no place; the comment above one stays where it stood, what follows moves up one
    assert [lines.new_line(line) for line in range(1, 11)] == [1, 2, 3, None, 4, 5, 6, 7, 8, None]
    assert [lines.old_line(line) for line in range(1, 9)] == [1, 2, 3, 5, 6, 7, 8, 9]
    # named elsewhere too, not a Horovod module's name, or alone in its block: kept
    for kept in ('NAME = "horovod.torch"\nuse(NAME)\n', 'NAME = "torch"\nx = 1\n', 'class C:\n    NAME = "horovod"\n'):
        new, removed, lines = without_spent_constants(kept, {"NAME"})
        assert (new, removed, lines.new_line(2)) == (kept, [], 2)


def test_horovod_is_found_where_the_code_names_it_not_in_attributes_or_an_f_strings_text():
    code = ('import horovod.torch\nfrom .horovod import x\nargs.horovod = "horovod.torch"\n'
            'f"horovod {horovod}"\ndef horovod(horovod=1): pass\n')
    named, binds = horovod_named(code)
    assert binds
    assert [(n.line, n.string) for n in named] == [(1, None), (3, "horovod.torch"), (4, None), (5, None),
                                                   (5, None)]
    assert not horovod_named("import horovod.torch as hvd\n")[1]
    assert horovod_named("def (:\n") == ([], False)


def test_a_pass_after_the_check_moves_the_result_lines_its_flags_name():
    """The check of the output names a line of the rewrite's result; a later pass that removes a line above it
    (a Horovod-only synchronize() under a switch) moves it, as the report's "result line" must follow."""
    from compare.migrate.migrate_tree import _without_horovod_only_statements
    from compare.migrate.plan.migration import Flag, Migration

    code = "if args.horovod:\n    optimizer.synchronize()\n    x = 1\nprint(y)\n"
    migration = Migration(code, code, [], [Flag(4, "unbound name", "print(y)", "`y` is unbound", result_line=4)])
    _without_horovod_only_statements(migration)
    assert migration.code == "if args.horovod:\n    x = 1\nprint(y)\n"
    assert [c.line for c in migration.changes] == [2]
    assert migration.flags[0].result_line == 3 and migration.lines.old_line(3) == 4
