"""Horovod (horovod.torch) -> torch.distributed + DistributedDataParallel, as a concrete-syntax-tree rewrite.

Two passes over one LibCST tree: `HorovodUses` finds every Horovod use and decides what becomes of it
(where the model is wrapped in DDP, which loop `hvd.join()` closes, which `backward()` accumulates), and
`HorovodToDDP` applies those decisions. Statements are replaced whole; everything else (formatting,
comments, blank lines) is the original's. What has no equivalent stays in place and is flagged.

Pass 1 is a LibCST visitor, pass 2 a transformer, each made of a class per concern (compare/migrate/__init__.py
holds the map of the modules). Then the whole result is checked against the original (output_check.py): its
findings join the flags.
"""

from __future__ import annotations

from collections.abc import Mapping

import libcst as cst
import libcst.matchers as m
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor
from libcst.helpers import get_full_name_for_node

from compare.migrate.check.output_check import checked_flags
from compare.migrate.plan.accumulation_plan import plan_accumulation
from compare.migrate.plan.horovod_uses import HorovodUses
from compare.migrate.plan.launch_facts import launch_facts
from compare.migrate.plan.migration import Change, Flag, Migration, NotMigratable
from compare.migrate.plan.passed_on import module_passed_on
from compare.migrate.plan.wrap_plan import TrainsArgument, plan_model_wrap
from compare.migrate.read.flag_category import Category
from compare.migrate.read.line_map import LineMap, positions_of, tracked_visit
from compare.migrate.read.parsed import NodeIndex, Parsed
from compare.migrate.transform.horovod_to_ddp import HorovodToDDP
from compare.migrate.transform.oldest_python import with_free_quotes

__all__ = ["Change", "Flag", "Migration", "NotMigratable", "migrate_source"]


def _remaining_hvd(index: NodeIndex, aliases: set[str]) -> bool:
    """A Horovod name still read after the rewrite: hvd.x, or hvd itself (returned, passed on as an argument)."""
    imported = {id(n) for alias in index.findall(m.ImportAlias()) for n in index.findall(m.Name(), alias)}
    imported |= {id(a.attr) for a in index.findall(m.Attribute())}  # config.hvd names no module
    for node in index.findall(m.Attribute() | m.Name()):
        name = get_full_name_for_node(node)
        if not name or id(node) in imported or not any(name == a or name.startswith(a + ".") for a in aliases):
            continue
        if not isinstance(node, cst.Name) or name in aliases:
            return True
    return False


def _bare_use(uses: HorovodUses, line: int) -> cst.CSTNode:
    return next(n for n in uses.parsed.findall(m.Name()) if uses.line(n) == line)


def _bare_use_line(uses: HorovodUses, aliases: set[str], passed_on: set[int]) -> int:
    """The first line that reads the Horovod module itself (`return hvd`, `library.setup(hvd)`) where the rewrite
    did not hand on torch.distributed instead, else 0."""
    found = uses.parsed.findall
    skipped = {id(n) for alias in found(m.ImportAlias()) for n in found(m.Name(), alias)} | passed_on
    for attribute in found(m.Attribute()):
        skipped |= {id(attribute.attr), id(attribute.value)}  # hvd.rank: a use the rewrite knows, or flagged
    lines = [uses.line(n) for n in found(m.Name()) if n.value in aliases and id(n) not in skipped]
    return min(lines, default=0)


def _parsed_result(code: str) -> Parsed | None:
    """The rewrite's output read for its check; None where it does not parse (the check says so)."""
    try:
        return Parsed(code)
    except cst.ParserSyntaxError:
        return None


def _with_imports(module: cst.Module, imports: set[tuple[str, str | None, str | None]],
                  ) -> tuple[cst.Module, LineMap]:
    """AddImportsVisitor's imports added to the module, and the map of its lines. It reads and changes only the
    file's first statement (a docstring, maybe), the block of imports that starts the file, and the blank lines
    before the statement after that block: so it runs on those alone, that statement stood in for by a `pass` with
    its blank lines, and the rest is put back after them. The same result, without two walks of the whole tree;
    and its transform alone: transform_module would first copy the tree for metadata this transform does not use.
    The map: the walk's own over that head, and the rest of the file shifted as a whole."""
    if not imports:
        return module, LineMap()
    context = CodemodContext()
    for module_name, obj, asname in sorted(imports, key=lambda i: (i[1] is not None, i)):
        relative = len(module_name) - len(module_name.lstrip("."))  # the helpers, from a package's top
        AddImportsVisitor.add_needed_import(context, module_name.lstrip("."), obj, asname, relative)
    body = list(module.body)
    after = 1
    while after < len(body) and m.matches(body[after], m.SimpleStatementLine(body=[m.Import() | m.ImportFrom()])):
        after += 1
    if after >= len(body):
        return tracked_visit(module, AddImportsVisitor(context))
    following = body[after]
    stand_in = cst.SimpleStatementLine([cst.Pass()], leading_lines=following.leading_lines)
    head_module = module.with_changes(body=[*body[:after], stand_in])
    positions = positions_of(head_module)
    top, head_lines = tracked_visit(head_module, AddImportsVisitor(context), positions)
    *head, lines = top.body
    # The stand-in's line is the following statement's, before and after: from it on, the text is the same.
    old_at = positions[stand_in].start.line
    new_at = head_lines.new_line(old_at)
    if new_at is None:
        raise RuntimeError("AddImportsVisitor dropped the statement after the imports")  # it only adds
    return (top.with_changes(body=[*head, following.with_changes(leading_lines=lines.leading_lines),
                                   *body[after + 1:]]),
            LineMap.head_then_same(head_lines, (old_at, new_at)))


def migrate_source(source: str, *, helpers_module: str | None = None, helper_names: dict[str, str] | None = None,
                   end_of_job: bool = True, check: bool = True,
                   trainers: Mapping[str, tuple[TrainsArgument, ...]] | None = None) -> Migration:
    """Rewrite one script. Raises NotMigratable for input that is not a Horovod PyTorch script. With check (the
    default), the whole result goes through compare.migrate.check.output_check and its findings join the flags.

    For one file of a repository (compare/migrate/migrate_tree.py): `helpers_module`, the module its helpers are
    imported from (else they are added to the file); `helper_names`, the helpers renamed where their own names
    clash; `end_of_job=False` for a module that is not the job's entry point (it destroys no process group);
    `trainers`, the repository's functions that train a model they receive (wrap_plan.repository_trainers), by
    `module.function`: the model handed to one gets the DDP wrapper."""

    def rewritten(keep: bool) -> tuple[HorovodToDDP, cst.Module, LineMap]:
        """Pass 2 over the original, with the imports it needs: its transformer, its result, the map of lines
        (with_free_quotes changes quotes alone: no line moves)."""
        transformer = transformer_for(keep)
        changed, changed_lines = tracked_visit(original.module, transformer, original.positions)
        imported, imported_lines = _with_imports(changed, transformer.imports)
        return transformer, with_free_quotes(imported), changed_lines.then(imported_lines)

    def transformer_for(keep: bool) -> HorovodToDDP:
        transformer = HorovodToDDP(uses, keep_hvd_import=keep, plan=plan, accumulation=accumulation)
        transformer.helpers_module, transformer.helper_names = helpers_module, helper_names or {}
        transformer.end_of_job = end_of_job
        transformer.passed_on = passed_on
        return transformer

    try:
        original = Parsed(source)
    except cst.ParserSyntaxError as exc:
        raise NotMigratable(f"not valid Python (line {exc.raw_line}, column {exc.raw_column}): "
                            f"{str(exc.message).splitlines()[0]}") from None
    uses = HorovodUses(original)
    original.module.visit(uses)
    uses.plan_lightning()
    uses.plan_ray()
    if not uses.hvd and not uses.horovod and not uses.hvd_imports and not uses.lightning and not uses.spark_imports:
        raise NotMigratable("no Horovod use: the script does not import horovod")
    accumulation = plan_accumulation(uses)
    uses.flags += [flag for flag in accumulation.flags if not any(
        f.line == flag.line and f.category == flag.category for f in uses.flags)]
    uses.flag_elastic_commits()
    plan = plan_model_wrap(uses, trainers)
    if plan is not None and not plan.found and not any(f.category == Category.ELASTIC for f in uses.flags):
        # No forward whose result is back-propagated: no DDP (it would average nothing); the optimizer keeps
        # Horovod's meaning, its gradients averaged at step().
        methods = [p.line for p in plan.problems if p.category == Category.BYPASSES_DDP]
        found = (f"`{plan.model}` is trained through a method of its own (line {', '.join(map(str, methods))}), "
                 "which a DDP wrapper would not run through its forward" if methods else
                 f"no call of `{plan.model}` whose result is back-propagated was found")
        uses.flags.append(Flag(uses.line(plan.wrap_stmt), Category.TRAINING_FORWARD_NOT_FOUND,
                               uses.code(plan.wrap_stmt),
                               f"{found}, so no DDP wrapper is made: the optimizer averages its gradients at step() "
                               f"as Horovod's did. For DDP, wrap the model (`{plan.wrapper} = DDP({plan.model})`) "
                               f"and call `{plan.wrapper}(...)` in the training step"))
    if plan is not None and not plan.found:
        plan = None
    for problem in plan.problems if plan is not None else ():
        uses.flags.append(Flag(problem.line, problem.category, uses.parsed.code(problem.line), problem.why))
    passed_on = module_passed_on(original, uses.hvd)
    transformer, new, lines = rewritten(False)
    # The result read once, for the question below and for the check (the imports added name no Horovod).
    result = _parsed_result(new.code) if check else None
    # A probe's name now bound to torch.distributed (to_ddp_probes.py) names no Horovod.
    if _remaining_hvd(result.index if result else NodeIndex(new), (uses.hvd | uses.horovod) - transformer.probe_bound):
        # Something stays (flagged, or not recognised at all): keep the import so that its name resolves.
        transformer, new, lines = rewritten(True)
        result = _parsed_result(new.code) if check else None
        if all(flag.category in (Category.ADASUM, Category.MULTI_HOST) for flag in uses.flags):
            line = _bare_use_line(uses, uses.hvd | uses.horovod, passed_on)
            uses.flags.append(Flag(line, Category.UNRECOGNISED, uses.code(uses.statement_of(_bare_use(uses, line)))
                                   if line else "", "a Horovod use remains that was not recognised (the module "
                                   "itself returned or passed on: its import is kept)" if line else
                                   "a Horovod use remains that was not recognised"))
    changes = sorted(transformer.changes, key=lambda c: c.line)
    flags = uses.flags + (checked_flags(source, new.code, uses.flags, lines, original, result) if check else [])
    # A parameter that received the Horovod module now receives torch.distributed under its name: it "hides"
    # the module's `dist`, with the same module (compare/migrate/plan/passed_on.py).
    renamed = {uses.line(p) for p in original.findall(m.Param()) if id(p.name) in passed_on}  # type: ignore[union-attr]
    flags = [f for f in flags if not (f.category == Category.SHADOWED_NAME and f.line in renamed and "`dist`" in f.why)]
    # A probe's name bound to torch.distributed where it was bound to Horovod: the same question, answered anew.
    flags = [f for f in flags if not (f.category == Category.SHADOWED_NAME and any(
        f.why.startswith(f"`{name}` ") for name in transformer.probe_bound))]
    return Migration(source=source, code=new.code, lines=lines, changes=changes,
                     flags=sorted(flags, key=lambda f: f.line),
                     checked=check, launch=launch_facts(original),
                     has_sync_batchnorm=uses.has_sync_batchnorm,
                     lightning=uses.lightning,
                     front_end="Ray Train's TorchTrainer" if uses.ray
                     else "pyspark's TorchDistributor" if uses.distributor_plans else None)
