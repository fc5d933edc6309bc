"""Pass 1, Lightning: a Trainer(...) that Horovod drove (Lightning 1.x), and what it means for the rest of the
script. Lightning 2 has no Horovod strategy: such a Trainer becomes Lightning's DDP under torchrun.
"""

from __future__ import annotations

import dataclasses

import libcst as cst
import libcst.matchers as m
from libcst.helpers import get_full_name_for_node

from compare.migrate.plan.uses_base import UsesBase
from compare.migrate.read import notes
from compare.migrate.read.flag_category import Category
from compare.migrate.read.horovod_api import LIGHTNING_HOROVOD_CLASSES
from compare.migrate.read.parsed import Parsed
from compare.migrate.read.syntax import dotted_name, elements_of, is_horovod_string


@dataclasses.dataclass
class TrainerPlan:
    """A Lightning Trainer(...) that Horovod drove, and the DDP arguments that replace Horovod's."""
    replaced: set[int]                # ids of the Horovod arguments; the new ones take the first one's place
    dropped: set[int]                 # ids of gpus=, devices=, num_nodes=, num_processes=
    new_args: list[tuple[str, str]]   # (keyword, code): strategy, accelerator (unless kept), devices, num_nodes
    plugins_kept: dict[int, list[int]]  # id(plugins= argument) -> the indices of its other plugins, kept


class LightningUses(UsesBase):
    """Lightning's names, its Horovod classes and "horovod" strings, and the plan of each Trainer Horovod drove."""

    def __init__(self, parsed: Parsed):
        super().__init__(parsed)
        self.lightning_names: dict[str, str] = {}  # bound name -> what it names ("pl" -> "pytorch_lightning")
        self.lightning_imports: list[cst.ImportFrom] = []  # those that import Lightning's Horovod classes
        self.horovod_class_refs: list[tuple[str | None, cst.CSTNode]] = []  # (the imported name, the use)
        self.horovod_subclasses: set[str] = set()
        self.horovod_strings: list[cst.SimpleString] = []
        self.trainers: dict[int, TrainerPlan] = {}  # id(Trainer call) -> its rewrite
        self.consumed: set[int] = set()  # ids of the Horovod strings and class uses those rewrites replace
        self.lightning = False  # a Trainer was Horovod-driven: Lightning makes and owns the process group
        self.removable_lightning_names: set[str] = set()  # imported Horovod class names no use is left of

    def record_lightning_import(self, node: cst.ImportFrom, module: str) -> None:
        """`from pytorch_lightning import ...`: the names it binds, and whether it imports a Horovod class."""
        if isinstance(node.names, cst.ImportStar):
            self.lightning_names["Trainer"] = f"{module}.Trainer"
            return
        for alias in node.names:
            name = get_full_name_for_node(alias.name) or ""
            self.lightning_names[get_full_name_for_node(alias.asname.name) if alias.asname else name] = \
                f"{module}.{name}"  # type: ignore[index]
            if name in LIGHTNING_HOROVOD_CLASSES and node not in self.lightning_imports:
                self.lightning_imports.append(node)

    def lightning_name(self, node: cst.CSTNode | None) -> str | None:
        """'pytorch_lightning.Trainer' for pl.Trainer after `import pytorch_lightning as pl`, else None."""
        name = dotted_name(node)
        head, _, rest = (name or "").partition(".")
        base = self.lightning_names.get(head)
        return None if base is None else (f"{base}.{rest}" if rest else base)

    def is_trainer(self, node: cst.CSTNode) -> bool:
        return (self.lightning_name(node) or "").split(".")[-1] == "Trainer"

    def is_horovod_class(self, node: cst.CSTNode | None) -> bool:
        """Lightning's HorovodStrategy / HorovodPlugin (not a subclass of the script's own)."""
        return (self.lightning_name(node) or "").split(".")[-1] in LIGHTNING_HOROVOD_CLASSES

    def visit_Name(self, node: cst.Name) -> None:
        parent = self.parents[node]
        if isinstance(parent, (cst.ImportAlias, cst.AsName)) or (isinstance(parent, cst.Attribute)
                                                                 and parent.attr is node):
            return
        if not isinstance(parent, cst.Attribute) and self.is_horovod_class(node):
            self.horovod_class_refs.append((node.value, node))

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if is_horovod_string(node):
            self.horovod_strings.append(node)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if any(self.is_horovod_class(base.value) or dotted_name(base.value) in self.horovod_subclasses
               for base in node.bases):
            self.horovod_subclasses.add(node.name.value)
            self.flag(node, Category.LIGHTNING, notes.LIGHTNING_SUBCLASS)

    def _horovod_value(self, value: cst.BaseExpression) -> bool:
        """'horovod', HorovodStrategy() or HorovodPlugin() (Lightning's, with or without arguments)."""
        if is_horovod_string(value):
            return True
        return (isinstance(value, cst.Call) and self.is_horovod_class(value.func)) or self.is_horovod_class(value)

    def _mentions_horovod(self, node: cst.CSTNode) -> bool:
        """A 'horovod' string, a name with Horovod in it, or a subclass of Lightning's Horovod strategy (comments
        do not count)."""
        return any(is_horovod_string(n) or (isinstance(n, cst.Name) and (
            "horovod" in n.value.lower() or n.value in self.horovod_subclasses))
            for n in m.findall(node, m.Name() | m.SimpleString()))

    def _plan_trainer(self, call: cst.Call) -> None:
        """A Trainer(...) that Horovod drove -> Lightning 2's DDP under torchrun; what cannot be told is flagged."""
        horovod_args: list[cst.Arg] = []
        dropped: list[cst.Arg] = []
        accelerator = gpus = None
        plugins_kept: dict[int, list[int]] = {}
        for arg in call.args:
            key = arg.keyword.value if arg.keyword else None
            if key in ("accelerator", "strategy", "distributed_backend") and self._horovod_value(arg.value):
                horovod_args.append(arg)
            elif key == "plugins" and any(self._horovod_value(v) for v in
                                          [e.value for e in (elements_of(arg.value) or [cst.Element(arg.value)])]):
                horovod_args.append(arg)
                elements = elements_of(arg.value)
                kept = [i for i, e in enumerate(elements or []) if not self._horovod_value(e.value)]
                if kept:
                    plugins_kept[id(arg)] = kept
            elif key == "accelerator":
                accelerator = arg
            elif key == "gpus":
                gpus = arg
            elif key in ("devices", "num_nodes", "num_processes"):
                dropped.append(arg)
        if not horovod_args:
            if self._mentions_horovod(call):
                self.lightning = True
                self.flag(call, Category.LIGHTNING, notes.LIGHTNING_UNTRANSLATABLE)
            return
        self.lightning = True
        values = [e.value for arg in horovod_args for e in (elements_of(arg.value) or [cst.Element(arg.value)])
                  if self._horovod_value(e.value)]
        with_arguments = [v for v in values if isinstance(v, cst.Call) and v.args]
        rest = [a for a in call.args if a not in horovod_args]
        rest_plugins = [e for a in horovod_args for i, e in enumerate(elements_of(a.value) or [])
                        if i in plugins_kept.get(id(a), [])]
        if with_arguments or any(self._mentions_horovod(node) for node in [*rest, *rest_plugins]):
            self.flag(call, Category.LIGHTNING, notes.LIGHTNING_UNTRANSLATABLE)
            return
        for value in values:
            self.consumed.add(id(value.func if isinstance(value, cst.Call) else value))
        strings = [v for v in values if isinstance(v, cst.SimpleString)]
        quote = strings[0].quote if strings else '"'
        new_args = [("strategy", f"{quote}ddp{quote}")]
        if accelerator is None:
            new_args.append(("accelerator", self._accelerator_from(gpus, quote)))
        if gpus is not None:
            dropped.append(gpus)
        new_args += [("devices", f"int(os.environ.get({quote}LOCAL_WORLD_SIZE{quote}, 1))"),
                     ("num_nodes", f"int(os.environ.get({quote}GROUP_WORLD_SIZE{quote}, 1))")]
        self.trainers[id(call)] = TrainerPlan({id(a) for a in horovod_args}, {id(a) for a in dropped}, new_args,
                                              plugins_kept)

    def _accelerator_from(self, gpus: cst.Arg | None, quote: str) -> str:
        """Horovod's accelerator took the device from gpus= (one GPU per process; none or 0: the CPU)."""
        cpu, gpu = f"{quote}cpu{quote}", f"{quote}gpu{quote}"
        value = gpus.value if gpus is not None else None
        if value is None or m.matches(value, m.Name("None") | m.Integer("0")):
            return cpu
        if isinstance(value, cst.Integer):
            return gpu
        code = self.module.code_for_node(value)
        atomic = isinstance(value, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) or bool(
            getattr(value, "lpar", None))
        return f"{gpu} if {code if atomic else f'({code})'} else {cpu}"

    def plan_lightning(self) -> None:
        """After pass 1: what a Horovod-driven Trainer means for the rest of the script."""
        if not self.lightning_names:
            return
        for _, ref in self.horovod_class_refs:
            if id(ref) not in self.consumed:
                self.flag(ref, Category.LIGHTNING, notes.LIGHTNING_HOROVOD_CLASS)
        for string in self.horovod_strings:
            if id(string) not in self.consumed:
                self.flag(string, Category.LIGHTNING, notes.LIGHTNING_HOROVOD_STRING)
        left = {name for name, ref in self.horovod_class_refs if id(ref) not in self.consumed}
        if left or any(id(string) not in self.consumed for string in self.horovod_strings):
            self.lightning = True  # Horovod drives Lightning somewhere this tool cannot follow (flagged)
        self.removable_lightning_names = {name for name, full in self.lightning_names.items()
                                          if full.split(".")[-1] in LIGHTNING_HOROVOD_CLASSES and name not in left}
        if not self.lightning:
            return
        for call in self.init_calls:
            if self.statement_of(call) is not self.init_stmt or not m.matches(self.init_stmt, m.SimpleStatementLine(
                    body=[m.Expr(value=m.Call())])):
                self.flag(call, Category.LIGHTNING, "hvd.init() other than as a statement of its own in a Lightning "
                                             "script: remove it by hand (Lightning makes the process group)")
        wrapping = [c for c in m.findall(self.module, m.Call()) if self.hvd_name(c.func) in (
            "DistributedOptimizer", "broadcast_parameters", "broadcast_optimizer_state", "join")]
        for call in wrapping:
            self.flag(call, Category.LIGHTNING, notes.LIGHTNING_WRAPS)
