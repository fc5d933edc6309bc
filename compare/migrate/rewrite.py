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

import libcst as cst
import libcst.matchers as m
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor
from libcst.helpers import get_full_name_for_node
from libcst.metadata import MetadataWrapper

from compare.migrate.horovod_to_ddp import HorovodToDDP
from compare.migrate.horovod_uses import HorovodUses
from compare.migrate.launch_facts import launch_facts
from compare.migrate.migration import Change, Flag, Migration, NotMigratable
from compare.migrate.output_check import checked_flags
from compare.migrate.passed_on import module_passed_on

__all__ = ["Change", "Flag", "Migration", "NotMigratable", "migrate_source"]


def _remaining_hvd(module: cst.Module, aliases: set[str]) -> bool:
    """A Horovod name still read after the rewrite: hvd.x, or hvd itself (returned, passed on as an argument)."""
    imported = {id(n) for alias in m.findall(module, m.ImportAlias()) for n in m.findall(alias, m.Name())}
    imported |= {id(a.attr) for a in m.findall(module, m.Attribute())}  # config.hvd names no module
    for node in m.findall(module, m.Attribute() | m.Name()):
        name = get_full_name_for_node(node)
        if not name or id(node) in imported or not any(name == a or name.startswith(a + ".") for a in aliases):
            continue
        if not isinstance(node, cst.Name) or name in aliases:
            return True
    return False


def _bare_use(uses: HorovodUses, line: int) -> cst.CSTNode:
    return next(n for n in m.findall(uses.module, m.Name()) if uses.line(n) == line)


def _bare_use_line(uses: HorovodUses, aliases: set[str], passed_on: set[int]) -> int:
    """The first line that reads the Horovod module itself (`return hvd`, `library.setup(hvd)`) where the rewrite
    did not hand on torch.distributed instead, else 0."""
    skipped = {id(n) for alias in m.findall(uses.module, m.ImportAlias()) for n in m.findall(alias, m.Name())}
    skipped |= passed_on
    for attribute in m.findall(uses.module, m.Attribute()):
        skipped |= {id(attribute.attr), id(attribute.value)}  # hvd.rank: a use the rewrite knows, or flagged
    lines = [uses.line(n) for n in m.findall(uses.module, m.Name()) if n.value in aliases and id(n) not in skipped]
    return min(lines, default=0)


def migrate_source(source: str, *, helpers_module: str | None = None, helper_names: dict[str, str] | None = None,
                   end_of_job: bool = True, check: bool = True) -> Migration:
    """Rewrite one script. Raises NotMigratable for input that is not a Horovod PyTorch script. With check (the
    default), the whole result goes through compare.migrate.output_check and its findings join the flags.

    For one file of a repository (compare/migrate/migrate_tree.py): `helpers_module`, the module its helpers are
    imported from (else they are added to the file); `helper_names`, the helpers renamed where their own names
    clash; `end_of_job=False` for a module that is not the job's entry point (it destroys no process group)."""

    def transformer_for(keep: bool) -> HorovodToDDP:
        transformer = HorovodToDDP(uses, keep_hvd_import=keep)
        transformer.helpers_module, transformer.helper_names = helpers_module, helper_names or {}
        transformer.end_of_job = end_of_job
        transformer.passed_on = passed_on
        return transformer

    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        raise NotMigratable(f"not valid Python (line {exc.raw_line}, column {exc.raw_column}): "
                            f"{str(exc.message).splitlines()[0]}") from None
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)  # parsed here: nobody else holds it
    uses = HorovodUses(wrapper)
    wrapper.module.visit(uses)
    uses.plan_lightning()
    uses.plan_ray()
    if not uses.hvd and not uses.horovod and not uses.hvd_imports and not uses.lightning and not uses.spark_imports:
        raise NotMigratable("no Horovod use: the script does not import horovod")
    uses.plan_accumulation()
    uses.flag_elastic_commits()
    passed_on = module_passed_on(wrapper.module, uses.parents, uses.hvd)
    transformer = transformer_for(False)
    new = wrapper.module.visit(transformer)
    if _remaining_hvd(new, uses.hvd | uses.horovod):
        # Something stays (flagged, or not recognised at all): keep the import so that its name resolves.
        transformer = transformer_for(True)
        new = wrapper.module.visit(transformer)
        if all(flag.category in ("Adasum", "multi-host") for flag in uses.flags):
            line = _bare_use_line(uses, uses.hvd | uses.horovod, passed_on)
            uses.flags.append(Flag(line, "unrecognised", uses.code(uses.statement_of(_bare_use(uses, line)))
                                   if line else "", "a Horovod use remains that was not recognised (the module "
                                   "itself returned or passed on: its import is kept)" if line else
                                   "a Horovod use remains that was not recognised"))
    context = CodemodContext()
    for module_name, obj, asname in sorted(transformer.imports, key=lambda i: (i[1] is not None, i)):
        AddImportsVisitor.add_needed_import(context, module_name, obj, asname)
    if transformer.imports:
        new = AddImportsVisitor(context).transform_module(new)
    changes = sorted(transformer.changes, key=lambda c: c.line)
    flags = uses.flags + (checked_flags(source, new.code, uses.flags) if check else [])
    # A parameter that received the Horovod module now receives torch.distributed under its name: it "hides"
    # the module's `dist`, with the same module (compare/migrate/passed_on.py).
    renamed = {uses.line(p) for p in m.findall(wrapper.module, m.Param()) if id(p.name) in passed_on}  # type: ignore[union-attr]
    flags = [f for f in flags if not (f.category == "shadowed name" and f.line in renamed and "`dist`" in f.why)]
    return Migration(source=source, code=new.code, changes=changes, flags=sorted(flags, key=lambda f: f.line),
                     checked=check, launch=launch_facts(wrapper.module, uses.parents, uses.positions),
                     has_sync_batchnorm=uses.has_sync_batchnorm,
                     lightning=uses.lightning,
                     front_end="Ray Train's TorchTrainer" if uses.ray
                     else "pyspark's TorchDistributor" if uses.distributor_plans else None)
