"""The line maps the passes make (compare/migrate/read/line_map.py): what a transform replaced, moved, removed or
added, placed from the trees themselves, composed over passes; where a text diff of the two texts guessed wrong."""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m
from helpers import ROOT

from compare.migrate import migrate_source
from compare.migrate.migrate_tree import migrate_tree
from compare.migrate.read.line_map import LineMap, tracked_visit
from compare.migrate.read.repository import Repository
from compare.migrate.report.migration_report import place_changes

TWO_BROADCASTS = """import torch
import horovod.torch as hvd

hvd.init()
first, second = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
hvd.broadcast_parameters(first.state_dict(), root_rank=0)
hvd.broadcast_parameters(second.state_dict(), root_rank=0)
print(hvd.rank())
"""


class _Drop(cst.CSTTransformer):
    """`drop()` statements removed."""

    def leave_SimpleStatementLine(self, original_node, updated_node):
        return cst.RemoveFromParent() if m.matches(updated_node, m.SimpleStatementLine(
            body=[m.Expr(m.Call(func=m.Name("drop")))])) else updated_node


class _Twice(cst.CSTTransformer):
    """`twice()` statements written as a two-line block in their place."""

    def leave_SimpleStatementLine(self, original_node, updated_node):
        if not m.matches(updated_node, m.SimpleStatementLine(body=[m.Expr(m.Call(func=m.Name("twice")))])):
            return updated_node
        return cst.parse_statement("for _ in range(2):\n    once()\n").with_changes(
            leading_lines=updated_node.leading_lines)


class _LastFirst(cst.CSTTransformer):
    """The module's last statement moved to the top."""

    def leave_Module(self, original_node, updated_node):
        *rest, last = updated_node.body
        return updated_node.with_changes(body=[last, *rest])


def _mapped(lines: LineMap, count: int) -> list[int | None]:
    return [lines.new_line(line) for line in range(1, count + 1)]


def _back(lines: LineMap, count: int) -> list[int | None]:
    return [lines.old_line(line) for line in range(1, count + 1)]


def test_a_call_replaced_by_a_loop_maps_to_that_loop_not_the_loop_before():
    migration = migrate_source(TWO_BROADCASTS)
    new = migration.code.splitlines()
    assert new[6:10] == ["for tensor in (first.state_dict()).values():", "    dist.broadcast(tensor, src=0)",
                         "for tensor in (second.state_dict()).values():", "    dist.broadcast(tensor, src=0)"]
    # A line diff aligns the two calls with the first two of the four lines that replace them: the second call
    # (line 7) went to line 8, the first loop's body. The rewrite knows it became the loop at line 9.
    assert _mapped(migration.lines, 8) == [1, 2, 3, 4, 6, 7, 9, 11]
    # each loop, body included, comes back to the call it stands for; what the rewrite adds at the end, to none
    assert _back(migration.lines, 13) == [1, 2, 3, 4, 4, 5, 6, 6, 7, 7, 8, None, None]
    placed = {(c.line, c.new_line) for c in place_changes(migration) if c.before.startswith("hvd.broadcast")}
    assert placed == {(6, 7), (7, 9)}


def test_a_moved_statement_is_followed_among_identical_lines():
    code = "x = 1\ny = x\nx = 1\nz = 2\n"
    new, lines = tracked_visit(cst.parse_module(code), _LastFirst())
    assert new.code == "z = 2\nx = 1\ny = x\nx = 1\n"
    # a line diff keeps the three equal lines in place and calls `z = 2` removed and added; the walk moves it
    assert _mapped(lines, 4) == [2, 3, 4, 1]
    assert _back(lines, 4) == [4, 1, 2, 3]


def test_removed_lines_have_no_place_and_nothing_comes_from_them():
    code = "a = 1\n# about drop\ndrop()\nb = 2\n"
    new, lines = tracked_visit(cst.parse_module(code), _Drop())
    assert new.code == "a = 1\nb = 2\n"  # (LibCST removes a statement with the comment above it)
    assert _mapped(lines, 4) == [1, None, None, 2]
    assert _back(lines, 2) == [1, 4]


def test_maps_compose_over_passes_and_invert():
    code = "drop()\ntwice()\nx = 1\ndrop()\nx = 1\n"
    dropped, first = tracked_visit(cst.parse_module(code), _Drop())
    doubled, second = tracked_visit(dropped, _Twice())
    assert doubled.code == "for _ in range(2):\n    once()\nx = 1\nx = 1\n"
    both = first.then(second)
    assert _mapped(both, 5) == [None, 1, 3, None, 4]
    assert _mapped(both, 5) == [second.new_line(n) if (n := first.new_line(line)) else None for line in range(1, 6)]
    assert _back(both, 4) == [2, 2, 3, 5]  # the block put in place of `twice()` comes back to it, body and all
    assert _mapped(both.inverse(), 4) == _back(both, 4)
    assert _back(both.inverse(), 5) == _mapped(both, 5)
    assert _mapped(LineMap(), 3) == [1, 2, 3]  # no pass: the same lines
    assert _mapped(LineMap().then(both), 5) == _mapped(both.then(LineMap()), 5) == _mapped(both, 5)


class _Unwrap(cst.CSTTransformer):
    """An if/else replaced by its else block's statements, as switches.py removes a switch's Horovod branch."""

    def leave_If(self, original_node, updated_node):
        return cst.FlattenSentinel(updated_node.orelse.body.body)


def test_statements_put_in_a_removed_blocks_place_come_back_to_their_own_lines():
    code = "a = 1\nif flag:\n    b = 2\nelse:\n    c = 3\n    d = 4\ne = 5\n"
    new, lines = tracked_visit(cst.parse_module(code), _Unwrap())
    assert new.code == "a = 1\nc = 3\nd = 4\ne = 5\n"
    assert _mapped(lines, 7) == [1, 2, None, None, 2, 3, 4]  # the `if` goes to the first statement it left
    # `c = 3` and `d = 4` are themselves, moved: each comes back to its own line, not to the `if`'s
    assert _back(lines, 4) == [1, 5, 6, 7]


def test_a_pass_that_moves_nothing_maps_every_line_to_itself():
    """Every line has an owner: clauses, decorators, comments within brackets, a match statement's cases."""
    code = """@decorate(
    1,  # within
)
def f(
    a,
):
    try:
        x = [
        # a comment
            1,
        ]
    except (
        ValueError
    ):
        pass
    else:
        pass
    finally:
        pass
    match (
        a
    ):
        case 1:
            pass
        case _: pass
"""
    new, lines = tracked_visit(cst.parse_module(code), cst.CSTTransformer())
    count = len(code.splitlines())
    assert new.code == code and _mapped(lines, count) == _back(lines, count) == list(range(1, count + 1))


def test_a_change_is_placed_on_its_own_statements_code_not_a_neighbours_alike():
    """gan_resume's two broadcast_optimizer_state calls become three lines each, alike but for the optimizer's
    name: each change's new line is one of those its own call became (or one the rewrite added, as the
    destroy_process_group() at the block's end), never the other call's."""
    tree = migrate_tree(Repository.read(ROOT / "examples" / "repos" / "gan_resume"))
    migration = next(f.migration for f in tree.files if f.path == "train.py")
    changes = [c for c in place_changes(migration) if c.line and c.new_line is not None]
    assert [migration.lines.old_line(c.new_line) for c in changes if migration.lines.old_line(c.new_line) not in (
        c.line, None)] == []
    code = migration.code.splitlines()
    loads = {c.line: code[c.new_line - 1].strip() for c in changes if c.before.startswith("hvd.broadcast_optimizer")}
    assert loads == {50: "opt_g.load_state_dict(optimizer_state[0])", 51: "opt_d.load_state_dict(optimizer_state[0])"}


class _MoreArguments(cst.CSTTransformer):
    """`f(...)` given two arguments before its own, one a line, as the Lightning rewrite gives a Trainer its
    strategy."""

    def leave_Call(self, original_node, updated_node):
        first = cst.Arg(cst.Name("strategy"), comma=cst.Comma(whitespace_after=cst.ParenthesizedWhitespace(
            indent=True, last_line=cst.SimpleWhitespace("    "))))
        return updated_node.with_changes(args=[first, first.with_changes(value=cst.Name("devices")),
                                               *updated_node.args])


def test_lines_within_a_statement_that_grew_follow_its_text():
    code = "x = f(\n    a,\n    b,\n)\ny = 1\n"
    new, lines = tracked_visit(cst.parse_module(code), _MoreArguments())
    assert new.code == "x = f(\n    strategy,\n    devices,\n    a,\n    b,\n)\ny = 1\n"
    # the same offset would put `a,` at `strategy,` and `b,` at `devices,`: the statement's own lines, matched,
    # do not; the arguments added come from the line before them
    assert _mapped(lines, 5) == [1, 4, 5, 6, 7]
    assert _back(lines, 7) == [1, 1, 1, 2, 3, 4, 5]


class _ElifFirst(cst.CSTTransformer):
    """An `if` whose branch goes replaced by its `elif`, as switches.py removes a switch's Horovod branch."""

    def leave_If(self, original_node, updated_node):
        if m.matches(updated_node.test, m.Name("horovod")):
            return updated_node.orelse.with_changes(leading_lines=updated_node.leading_lines)
        return updated_node


def test_an_elif_made_the_if_comes_back_to_its_own_line():
    code = "if horovod:\n    a = 1\nelif ddp:\n    b = 2\nelse:\n    c = 3\n"
    new, lines = tracked_visit(cst.parse_module(code), _ElifFirst())
    assert new.code == "if ddp:\n    b = 2\nelse:\n    c = 3\n"
    assert _mapped(lines, 6) == [1, None, 1, 2, 3, 4]
    assert _back(lines, 4) == [3, 4, 5, 6]  # `if ddp:` is the elif's test, not the removed `if horovod:`
