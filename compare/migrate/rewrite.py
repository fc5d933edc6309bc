"""Horovod (horovod.torch) -> torch.distributed + DistributedDataParallel, as a concrete-syntax-tree rewrite.

Two passes over one LibCST tree: `HorovodUses` finds every Horovod use and decides what becomes of it
(where the model is wrapped in DDP, which loop `hvd.join()` closes, which `backward()` accumulates), and
`HorovodToDDP` applies those decisions. Statements are replaced whole; everything else (formatting,
comments, blank lines) is the original's. What has no equivalent stays in place and is flagged.
"""

from __future__ import annotations

import dataclasses

import libcst as cst
import libcst.matchers as m
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor
from libcst.helpers import get_full_name_for_node
from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider

from compare.migrate import notes


class NotMigratable(Exception):
    """The input is not a Horovod PyTorch script this tool can read (one line)."""


@dataclasses.dataclass
class Change:
    line: int          # in the original
    before: str        # the original code (one line, shortened)
    after: str         # what it became ("" when removed)
    note: str          # why it is equivalent, or in what it is not
    new_line: int | None = None  # in the result; filled in by the report from a line diff


@dataclasses.dataclass
class Flag:
    line: int
    category: str      # Adasum | elastic | timeline | process sets | unrecognised | multi-host | ...
    code: str
    why: str


@dataclasses.dataclass
class InnerLoop:
    """An inner `for` loop (backward() in its body, optimizer.step() after it): how its last pass is told."""
    name: str          # the variable that holds the range (`passes`), or the last-pass flag (`is_last_pass`)
    condition: str     # true on the last pass: `i == passes[-1]`, or `is_last_pass`
    over_range: bool   # `for i in range(...)`; otherwise any iterable, through mark_last()


@dataclasses.dataclass
class TrainerPlan:
    """A Lightning Trainer(...) that Horovod drove, and the DDP arguments that replace Horovod's."""
    replaced: set[int]                # ids of the Horovod arguments; the new ones take the first one's place
    dropped: set[int]                 # ids of gpus=, devices=, num_nodes=, num_processes=
    new_args: list[tuple[str, str]]   # (keyword, code): strategy, accelerator (unless kept), devices, num_nodes
    plugins_kept: dict[int, list[int]]  # id(plugins= argument) -> the indices of its other plugins, kept


@dataclasses.dataclass
class Migration:
    source: str
    code: str
    changes: list[Change]
    flags: list[Flag]
    has_sync_batchnorm: bool = False
    lightning: bool = False  # a Horovod-driven Lightning Trainer: the original cannot run under Lightning 2


# hvd.X() -> an expression (a string parsed once)
SIMPLE_CALLS = {
    "rank": ("dist.get_rank()", notes.RANK),
    "size": ("dist.get_world_size()", notes.SIZE),
    "local_rank": ('int(os.environ["LOCAL_RANK"])', notes.LOCAL_RANK),
    "local_size": ('int(os.environ["LOCAL_WORLD_SIZE"])', notes.LOCAL_SIZE),
    "cross_rank": ('int(os.environ["GROUP_RANK"])', notes.CROSS_RANK),
    "cross_size": ('dist.get_world_size() // int(os.environ["LOCAL_WORLD_SIZE"])', notes.CROSS_SIZE),
    "is_initialized": ("dist.is_initialized()", notes.IS_INITIALIZED),
    "barrier": ("dist.barrier()", notes.BARRIER),
    "nccl_built": ("dist.is_nccl_available()", notes.NCCL_BUILT),
}
NEEDS_OS = {"local_rank", "local_size", "cross_rank", "cross_size"}
REDUCE_OPS = {"Sum": "SUM", "Min": "MIN", "Max": "MAX", "Product": "PRODUCT"}
# Horovod names that need a person, by category
NEEDS_A_PERSON = {
    "Adasum": ("Adasum", notes.ADASUM),
    "elastic": ("elastic", notes.ELASTIC),
    "start_timeline": ("timeline", notes.TIMELINE),
    "stop_timeline": ("timeline", notes.TIMELINE),
    "ProcessSet": ("process sets", notes.PROCESS_SETS),
    "add_process_set": ("process sets", notes.PROCESS_SETS),
    "remove_process_set": ("process sets", notes.PROCESS_SETS),
    "global_process_set": ("process sets", notes.PROCESS_SETS),
}
# In a Lightning script there is no process group before trainer.fit() (Lightning makes it): torchrun's variables.
LIGHTNING_CALLS = {
    "rank": 'int(os.environ.get("RANK", 0))',
    "size": 'int(os.environ.get("WORLD_SIZE", 1))',
    "local_rank": 'int(os.environ.get("LOCAL_RANK", 0))',
    "local_size": 'int(os.environ.get("LOCAL_WORLD_SIZE", 1))',
    "cross_rank": 'int(os.environ.get("GROUP_RANK", 0))',
    "cross_size": 'int(os.environ.get("GROUP_WORLD_SIZE", 1))',
}
LIGHTNING_PACKAGES = ("pytorch_lightning", "lightning")
LIGHTNING_HOROVOD_CLASSES = {"HorovodStrategy", "HorovodPlugin"}
HANDLED = {*SIMPLE_CALLS, "init", "shutdown", "allreduce", "allreduce_", "allgather", "broadcast", "broadcast_",
           "allgather_object", "broadcast_object", "broadcast_parameters", "broadcast_optimizer_state",
           "DistributedOptimizer", "join", "SyncBatchNorm", "Compression.fp16", "Compression.none"}

HELPERS = {
    "all_reduce": '''
def all_reduce(tensor, op=dist.ReduceOp.SUM):
    """hvd.allreduce(op=Sum/Min/Max/Product): a reduced copy (torch.distributed reduces in place)."""
    result = tensor.clone()
    dist.all_reduce(result, op=op)
    return result
''',
    "all_reduce_mean": '''
def all_reduce_mean(tensor):
    """hvd.allreduce's default op=Average: dist.all_reduce sums, so divide by the world size."""
    result = tensor.clone()
    dist.all_reduce(result)
    return result / dist.get_world_size()
''',
    "all_reduce_mean_": '''
def all_reduce_mean_(tensor):
    """hvd.allreduce_ (in place, op=Average): sum in place, then divide in place."""
    dist.all_reduce(tensor)
    return tensor.div_(dist.get_world_size())
''',
    "all_gather_cat": '''
def all_gather_cat(tensor):
    """hvd.allgather: every rank's tensor, concatenated along dimension 0 (here all of the same shape)."""
    parts = [torch.empty_like(tensor) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, tensor.contiguous())
    return torch.cat(parts)
''',
    "broadcast_copy": '''
def broadcast_copy(tensor, src):
    """hvd.broadcast: a copy of rank src's tensor (dist.broadcast overwrites its argument in place)."""
    result = tensor.clone()
    dist.broadcast(result, src=src)
    return result
''',
    "broadcast_inplace": '''
def broadcast_inplace(tensor, src):
    """hvd.broadcast_: overwrite tensor with rank src's, and return it."""
    dist.broadcast(tensor, src=src)
    return tensor
''',
    "all_gather_objects": '''
def all_gather_objects(obj):
    """hvd.allgather_object: the list of every rank's object."""
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, obj)
    return gathered
''',
    "broadcast_object": '''
def broadcast_object(obj, src=0):
    """hvd.broadcast_object: rank src's object on every rank."""
    box = [obj]
    dist.broadcast_object_list(box, src=src)
    return box[0]
''',
    "mark_last": '''
def mark_last(iterable):
    """backward_passes_per_step=k over an inner loop: each item with whether it is the last pass, whose
    backward() DDP syncs (the items and their order unchanged; each is read one pass ahead)."""
    iterator = iter(iterable)
    try:
        item = next(iterator)
    except StopIteration:
        return
    for following in iterator:
        yield False, item
        item = following
    yield True, item
''',
    "run_spawned": '''
def _spawned_worker(local_rank, fn, np, port, args, kwargs, results):
    # What torchrun would set: init_process_group() reads it (env://).
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(local_rank), WORLD_SIZE=str(np),
                      LOCAL_RANK=str(local_rank), LOCAL_WORLD_SIZE=str(np), GROUP_RANK="0")
    results[local_rank] = fn(*args, **kwargs)


def run_spawned(fn, args=(), kwargs=None, np=1):
    """horovod.run(fn, args, np=N) on one host: torch.multiprocessing.spawn, returning each rank's result."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with torch.multiprocessing.Manager() as manager:
        results = manager.dict()
        torch.multiprocessing.spawn(_spawned_worker, args=(fn, np, port, args, kwargs or {}, results), nprocs=np)
        return [results[rank] for rank in range(np)]
''',
}
HELPER_IMPORTS = {"run_spawned": ("os", "socket")}


def _short(code: str, limit: int = 100) -> str:
    text = " ".join(code.strip().split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _arg(call: cst.Call, position: int, keyword: str) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg.value
    positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
    return positional[position].value if position < len(positional) else None


def _keywords(call: cst.Call) -> dict[str, cst.BaseExpression]:
    return {arg.keyword.value: arg.value for arg in call.args if arg.keyword is not None}


def _is_lightning_module(name: str | None) -> bool:
    return bool(name) and name.split(".")[0] in LIGHTNING_PACKAGES  # type: ignore[union-attr]


def _is_horovod_string(node: cst.CSTNode | None) -> bool:
    return isinstance(node, cst.SimpleString) and str(node.evaluated_value).lower() == "horovod"


def _elements(value: cst.BaseExpression) -> list[cst.BaseElement] | None:
    """The elements of a list or tuple display, else None."""
    return list(value.elements) if isinstance(value, (cst.List, cst.Tuple)) else None


def _expr(code: str) -> cst.BaseExpression:
    return cst.parse_expression(code)


def _stmt(code: str) -> cst.BaseStatement:
    return cst.parse_statement(code)


def _dotted(node: cst.CSTNode | None) -> str | None:
    """'a.b.c' for a chain of names only (not hvd.broadcast(...).item, whose full name would read the same)."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        value = _dotted(node.value)
        return f"{value}.{node.attr.value}" if value else None
    return None


def _receiver(node: cst.BaseExpression | None, method: str) -> str | None:
    """'model' for model.state_dict() when method is 'state_dict'."""
    if m.matches(node, m.Call(func=m.Attribute(attr=m.Name(method)))):
        return get_full_name_for_node(node.func.value)  # type: ignore[union-attr]
    return None


class HorovodUses(m.MatcherDecoratableVisitor):
    """Pass 1: where Horovod is used, and what each use becomes."""

    def __init__(self, wrapper: MetadataWrapper):
        super().__init__()
        self.module = wrapper.module
        self.positions = wrapper.resolve(PositionProvider)
        self.parents = wrapper.resolve(ParentNodeProvider)
        self.hvd: set[str] = set()          # names bound to horovod.torch ("hvd")
        self.horovod: set[str] = set()      # names bound to the horovod package (for horovod.run)
        self.hvd_imports: list[cst.CSTNode] = []
        self.flags: list[Flag] = []
        self.model: str | None = None
        self.optimizers: set[str] = set()   # names bound to a hvd.DistributedOptimizer
        self.loaded_optimizers: set[str] = set()
        self.dist_optimizer_stmt: cst.SimpleStatementLine | None = None
        self.dist_optimizer_call: cst.Call | None = None
        self.broadcast_parameters_stmts: list[cst.SimpleStatementLine] = []
        self.join_loops: dict[int, cst.CSTNode] = {}   # id(loop) -> the hvd.join() statement that follows it
        self.accumulate: dict[int, tuple[str, str]] = {}  # id(backward statement) -> (the sync condition, note)
        self.inner_loops: dict[int, InnerLoop] = {}  # id(inner for loop) -> how its last pass is told
        self._names: set[str] | None = None
        self.backward_stmts: list[cst.SimpleStatementLine] = []
        self.step_guards: list[cst.If] = []
        self.init_stmt: cst.SimpleStatementLine | None = None
        self.has_shutdown = False
        self.has_sync_batchnorm = False
        self.rank_guards: list[cst.If] = []
        self.commit_calls: list[cst.Call] = []
        # Lightning: a Trainer that Horovod drove (accelerator/strategy/plugins "horovod", HorovodStrategy())
        self.lightning_names: dict[str, str] = {}  # bound name -> what it names ("pl" -> "pytorch_lightning")
        self.lightning_imports: list[cst.ImportFrom] = []  # those that import Lightning's Horovod classes
        self.horovod_class_refs: list[tuple[str | None, cst.CSTNode]] = []  # (the imported name, the use)
        self.horovod_subclasses: set[str] = set()
        self.horovod_strings: list[cst.SimpleString] = []
        self.trainers: dict[int, TrainerPlan] = {}  # id(Trainer call) -> its rewrite
        self.consumed: set[int] = set()  # ids of the Horovod strings and class uses those rewrites replace
        self.lightning = False  # a Trainer was Horovod-driven: Lightning makes and owns the process group
        self.removable_lightning_names: set[str] = set()  # imported Horovod class names no use is left of
        self.init_calls: list[cst.Call] = []

    # helpers
    def line(self, node: cst.CSTNode) -> int:
        return self.positions[node].start.line

    def code(self, node: cst.CSTNode) -> str:
        if hasattr(node, "leading_lines"):
            node = node.with_changes(leading_lines=())
        if isinstance(node, cst.BaseCompoundStatement):  # its first line only
            return _short(self.module.code_for_node(node).split("\n")[0])
        return _short(self.module.code_for_node(node))

    def statement_of(self, node: cst.CSTNode) -> cst.CSTNode:
        while not isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            node = self.parents[node]
        return node

    def hvd_name(self, node: cst.CSTNode) -> str | None:
        """'rank' for hvd.rank, 'Compression.fp16' for hvd.Compression.fp16, else None."""
        name = _dotted(node)
        for alias in self.hvd:
            if name and name.startswith(alias + "."):
                return name[len(alias) + 1:]
        return None

    def flag(self, node: cst.CSTNode, category: str, why: str) -> None:
        line = self.line(node)
        if not any(f.line == line and f.category == category for f in self.flags):
            self.flags.append(Flag(line, category, self.code(self.statement_of(node)), why))

    # imports
    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            name = get_full_name_for_node(alias.name)
            bound = get_full_name_for_node(alias.asname.name) if alias.asname else name
            if name == "horovod.torch":
                self.hvd.add(bound)  # `import horovod.torch` binds the dotted name itself
                self.hvd_imports.append(node)
            elif name == "horovod":
                self.horovod.add(bound)
                self.hvd_imports.append(node)
            elif name and name.startswith("horovod"):
                self.hvd_imports.append(node)
                self.flag(node, "unrecognised", f"import of {name}: only horovod.torch is migrated")
            elif _is_lightning_module(name):
                if alias.asname:
                    self.lightning_names[bound] = name  # type: ignore[index,assignment]
                else:  # `import lightning.pytorch` binds `lightning`
                    self.lightning_names[name.split(".")[0]] = name.split(".")[0]  # type: ignore[union-attr]

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        module = get_full_name_for_node(node.module) if node.module else ""
        if _is_lightning_module(module):
            if isinstance(node.names, cst.ImportStar):
                self.lightning_names["Trainer"] = f"{module}.Trainer"
                return
            for alias in node.names:
                name = get_full_name_for_node(alias.name) or ""
                self.lightning_names[get_full_name_for_node(alias.asname.name) if alias.asname else name] = \
                    f"{module}.{name}"  # type: ignore[index]
                if name in LIGHTNING_HOROVOD_CLASSES and node not in self.lightning_imports:
                    self.lightning_imports.append(node)
            return
        if not module or not module.startswith("horovod"):
            return
        self.hvd_imports.append(node)
        names = node.names if isinstance(node.names, (list, tuple)) else []
        if module == "horovod" and names and all(get_full_name_for_node(a.name) == "torch" for a in names):
            self.hvd.add(get_full_name_for_node(names[0].asname.name) if names[0].asname else "torch")
        elif module == "horovod" and names and all(get_full_name_for_node(a.name) == "run" for a in names):
            self.flag(node, "unrecognised", "from horovod import run: write horovod.run(...) to have it migrated")
        else:
            category = "elastic" if "elastic" in module else "unrecognised"
            self.flag(node, category, f"from {module} import ...: not migrated; rewrite with "
                                      "`import horovod.torch as hvd`")

    # Lightning
    def lightning_name(self, node: cst.CSTNode | None) -> str | None:
        """'pytorch_lightning.Trainer' for pl.Trainer after `import pytorch_lightning as pl`, else None."""
        name = _dotted(node)
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
        if _is_horovod_string(node):
            self.horovod_strings.append(node)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if any(self.is_horovod_class(base.value) or _dotted(base.value) in self.horovod_subclasses
               for base in node.bases):
            self.horovod_subclasses.add(node.name.value)
            self.flag(node, "Lightning", notes.LIGHTNING_SUBCLASS)

    def _horovod_value(self, value: cst.BaseExpression) -> bool:
        """'horovod', HorovodStrategy() or HorovodPlugin() (Lightning's, with or without arguments)."""
        if _is_horovod_string(value):
            return True
        return (isinstance(value, cst.Call) and self.is_horovod_class(value.func)) or self.is_horovod_class(value)

    def _mentions_horovod(self, node: cst.CSTNode) -> bool:
        """A 'horovod' string, a name with Horovod in it, or a subclass of Lightning's Horovod strategy (comments
        do not count)."""
        return any(_is_horovod_string(n) or (isinstance(n, cst.Name) and (
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
                                          [e.value for e in (_elements(arg.value) or [cst.Element(arg.value)])]):
                horovod_args.append(arg)
                elements = _elements(arg.value)
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
                self.flag(call, "Lightning", notes.LIGHTNING_UNTRANSLATABLE)
            return
        self.lightning = True
        values = [e.value for arg in horovod_args for e in (_elements(arg.value) or [cst.Element(arg.value)])
                  if self._horovod_value(e.value)]
        with_arguments = [v for v in values if isinstance(v, cst.Call) and v.args]
        rest = [a for a in call.args if a not in horovod_args]
        rest_plugins = [e for a in horovod_args for i, e in enumerate(_elements(a.value) or [])
                        if i in plugins_kept.get(id(a), [])]
        if with_arguments or any(self._mentions_horovod(node) for node in [*rest, *rest_plugins]):
            self.flag(call, "Lightning", notes.LIGHTNING_UNTRANSLATABLE)
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
                self.flag(ref, "Lightning", notes.LIGHTNING_HOROVOD_CLASS)
        for string in self.horovod_strings:
            if id(string) not in self.consumed:
                self.flag(string, "Lightning", notes.LIGHTNING_HOROVOD_STRING)
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
                self.flag(call, "Lightning", "hvd.init() other than as a statement of its own in a Lightning "
                                             "script: remove it by hand (Lightning makes the process group)")
        wrapping = [c for c in m.findall(self.module, m.Call()) if self.hvd_name(c.func) in (
            "DistributedOptimizer", "broadcast_parameters", "broadcast_optimizer_state", "join")]
        for call in wrapping:
            self.flag(call, "Lightning", notes.LIGHTNING_WRAPS)

    # every use
    def visit_Attribute(self, node: cst.Attribute) -> None:
        parent = self.parents[node]
        if isinstance(parent, cst.Attribute) and parent.value is node:
            return  # only the outermost of hvd.a.b
        if self.is_horovod_class(node):
            self.horovod_class_refs.append((None, node))
        name = self.hvd_name(node)
        if name is None:
            horovod_name = get_full_name_for_node(node)
            if horovod_name in {f"{alias}.run" for alias in self.horovod} and not (
                    isinstance(parent, cst.Call) and parent.func is node):
                self.flag(node, "unrecognised", "horovod.run used other than as a call")
            return
        root = name.split(".")[0]
        if root in NEEDS_A_PERSON or name in NEEDS_A_PERSON:
            category, why = NEEDS_A_PERSON.get(name) or NEEDS_A_PERSON[root]
            self.flag(node, category, why)
        elif name in ("Average", "Sum", "Min", "Max", "Product"):
            if not self._inside_handled_call(node):
                self.flag(node, "unrecognised", f"hvd.{name} outside an allreduce: give the reduction by hand")
        elif name not in HANDLED:
            self.flag(node, "unrecognised", f"hvd.{name} has no migration here: rewrite it by hand")
        elif name not in ("Compression.fp16", "Compression.none") and not (
                isinstance(parent, cst.Call) and parent.func is node):
            self.flag(node, "unrecognised", f"hvd.{name} used other than as a call: rewrite it by hand")

    def _inside_handled_call(self, node: cst.CSTNode) -> bool:
        while True:
            node = self.parents[node]
            if isinstance(node, cst.Call) and self.hvd_name(node.func) in ("allreduce", "allreduce_",
                                                                           "DistributedOptimizer"):
                return True
            if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement, cst.Module)):
                return False

    def visit_Call(self, node: cst.Call) -> None:
        if m.matches(node.func, m.Attribute(attr=m.Name("commit"))):
            self.commit_calls.append(node)
        name = self.hvd_name(node.func)
        keywords = _keywords(node)
        if "process_set" in keywords or "process_sets" in keywords:
            self.flag(node, "process sets", notes.PROCESS_SETS)
        if self.is_trainer(node.func):
            self._plan_trainer(node)
        if name == "init":
            self.init_calls.append(node)
            stmt = self.statement_of(node)
            if isinstance(stmt, cst.SimpleStatementLine):
                self.init_stmt = stmt
            if node.args:
                self.flag(node, "process sets", "hvd.init(...) arguments (communicator, process sets): "
                                                 "dist.init_process_group / dist.new_group by hand")
        elif name == "shutdown":
            self.has_shutdown = True
        elif name == "SyncBatchNorm":
            self.has_sync_batchnorm = True
        elif name == "DistributedOptimizer":
            self._distributed_optimizer(node, keywords)
        elif name == "broadcast_parameters":
            stmt = self.statement_of(node)
            if isinstance(stmt, cst.SimpleStatementLine) and m.matches(stmt, m.SimpleStatementLine(
                    body=[m.Expr(value=m.Call())])):
                self.broadcast_parameters_stmts.append(stmt)
                params = _arg(node, 0, "params")
                self.model = self.model or _receiver(params, "state_dict") or _receiver(params, "named_parameters")
            else:
                self.flag(node, "unrecognised", "hvd.broadcast_parameters(...) not as a statement of its own")
        elif name == "broadcast_optimizer_state":
            if not m.matches(self.statement_of(node), m.SimpleStatementLine(body=[m.Expr(value=m.Call())])):
                self.flag(node, "unrecognised", "hvd.broadcast_optimizer_state(...) not as a statement of its own")
        elif name == "join":
            self._join(node)
        elif name in ("allreduce", "allreduce_"):
            op = keywords.get("op")
            if op is not None and self.hvd_name(op) not in ("Average", "Sum", "Min", "Max", "Product", "Adasum"):
                self.flag(node, "unrecognised", "allreduce op= is an expression: give the reduction by hand")
            for scale in ("prescale_factor", "postscale_factor"):
                if scale in keywords:
                    self.flag(node, "unrecognised", f"allreduce {scale}: multiply the tensor by hand")
        elif m.matches(node.func, m.Attribute(attr=m.Name("load_state_dict"))):
            receiver = get_full_name_for_node(node.func.value)  # type: ignore[union-attr]
            if receiver:
                self.loaded_optimizers.add(receiver)
        elif m.matches(node.func, m.Attribute(attr=m.Name("backward"))):
            stmt = self.statement_of(node)
            if m.matches(stmt, m.SimpleStatementLine(body=[m.Expr(value=m.Call())])):
                self.backward_stmts.append(stmt)
        if get_full_name_for_node(node.func) in {f"{a}.run" for a in self.horovod}:
            for multi_host in ("hosts", "hostfile", "min_np", "max_np", "host_discovery_script"):
                if multi_host in keywords:
                    self.flag(node, "multi-host", f"horovod.run({multi_host}=...): torch.multiprocessing.spawn "
                                                  "starts local processes only; use torchrun on each host")

    def visit_If(self, node: cst.If) -> None:
        if any(self.hvd_name(call.func) == "rank" for call in m.findall(node.test, m.Call())):
            self.rank_guards.append(node)
        if m.findall(node.body, m.Call(func=m.Attribute(attr=m.Name("step")))):
            self.step_guards.append(node)

    def _distributed_optimizer(self, node: cst.Call, keywords: dict) -> None:
        stmt = self.statement_of(node)
        assign = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
        if not (isinstance(assign, cst.Assign) and len(assign.targets) == 1 and assign.value is node):
            self.flag(node, "unrecognised", "hvd.DistributedOptimizer(...) other than as `name = hvd.Distributed"
                                            "Optimizer(...)`: wrap the model in DDP by hand")
            return
        target = get_full_name_for_node(assign.targets[0].target)
        self.optimizers.add(target or "")
        self.dist_optimizer_stmt, self.dist_optimizer_call = stmt, node
        inner = _arg(node, 0, "optimizer")
        self.model = (_receiver(keywords.get("named_parameters"), "named_parameters") or self.model
                      or _receiver(_arg(inner, 0, "params") if isinstance(inner, cst.Call) else None, "parameters"))
        op = keywords.get("op")
        if op is not None:
            names = {self.hvd_name(a) for a in m.findall(op, m.Attribute())}
            if "Adasum" not in names and names - {"Average"}:
                self.flag(op, "unrecognised", notes.OPTIMIZER_OP)
        for dropped in ("gradient_predivide_factor", "groups", "sparse_as_dense", "num_groups"):
            if dropped in keywords and dropped in ("groups", "num_groups"):
                self.flag(node, "unrecognised", f"DistributedOptimizer({dropped}=...): DDP buckets by size "
                                                "(bucket_cap_mb); choose one by hand")

    def _join(self, node: cst.Call) -> None:
        stmt = self.statement_of(node)
        parent = self.parents[stmt]
        body = getattr(parent, "body", None)
        own_statement = m.matches(stmt, m.SimpleStatementLine(body=[m.Expr(value=m.Call())]))
        if not own_statement or not isinstance(body, tuple | list):
            self.flag(node, "unrecognised", "hvd.join() other than as a statement of its own: use "
                                            "torch.distributed.algorithms.Join by hand")
            return
        index = list(body).index(stmt)
        loops = [s for s in body[:index] if isinstance(s, (cst.For, cst.While))]
        if not loops:
            self.flag(node, "unrecognised", "hvd.join() with no loop before it in the same block: wrap the "
                                            "training loop in `with Join([model]):` by hand")
            return
        self.join_loops[id(loops[-1])] = stmt

    def flag_elastic_commits(self) -> None:
        """state.commit() has no hvd. in it: in an elastic script, flag it with the rest of the elastic state."""
        if any(flag.category == "elastic" for flag in self.flags):
            for call in self.commit_calls:
                self.flag(call, "elastic", notes.ELASTIC)

    def plan_accumulation(self) -> None:
        """backward_passes_per_step=k: each backward() before an `if ...: optimizer.step()` syncs only when
        that condition holds (DDP's no_sync() on the others), as Horovod reduces on every k-th pass; a
        backward() in an inner `for` loop followed by optimizer.step() syncs on that loop's last pass only."""
        if self.dist_optimizer_call is None:
            return
        k = _keywords(self.dist_optimizer_call).get("backward_passes_per_step")
        if k is None or m.matches(k, m.Integer("1")):
            return
        for stmt in self.backward_stmts:
            parent = self.parents[stmt]
            body = list(getattr(parent, "body", []))
            after = body[body.index(stmt) + 1:] if stmt in body else []
            guards = [s for s in after if isinstance(s, cst.If) and s in self.step_guards]
            loop = self._stepped_inner_loop(stmt)
            if guards:
                self.accumulate[id(stmt)] = (self.module.code_for_node(guards[0].test), notes.ACCUMULATION)
            elif loop is not None:
                plan = self.inner_loops.get(id(loop)) or self._plan_inner_loop(loop)
                self.accumulate[id(stmt)] = (plan.condition, notes.INNER_ACCUMULATION)
            else:
                self.flag(stmt, "unrecognised", "backward_passes_per_step: no `if ...: optimizer.step()` after "
                                                "this backward(), and no optimizer.step() after an inner `for` "
                                                "loop around it; put it in `with model.no_sync():` on the "
                                                "passes that do not step")

    def _stepped_inner_loop(self, stmt: cst.SimpleStatementLine) -> cst.For | None:
        """The `for` loop whose body holds stmt directly, when a statement after that loop in its own block
        calls the optimizer's step() (optimizer.step(), or scaler.step(optimizer))."""
        block = self.parents[stmt]
        loop = self.parents[block] if isinstance(block, cst.IndentedBlock) else None
        if not isinstance(loop, cst.For) or loop.body is not block or loop.asynchronous is not None:
            return None
        outer = self.parents[loop]
        siblings = list(getattr(outer, "body", []))
        after = siblings[siblings.index(loop) + 1:] if loop in siblings else []
        return loop if any(self._steps_optimizer(s) for s in after) else None

    def _steps_optimizer(self, stmt: cst.BaseStatement) -> bool:
        if not isinstance(stmt, cst.SimpleStatementLine):
            return False
        for call in m.findall(stmt, m.Call(func=m.Attribute(attr=m.Name("step")))):
            receivers = [call.func.value, *(arg.value for arg in call.args)]  # type: ignore[attr-defined]
            if any(get_full_name_for_node(r) in self.optimizers for r in receivers):
                return True
        return False

    def _plan_inner_loop(self, loop: cst.For) -> InnerLoop:
        iterable = loop.iter
        is_range = m.matches(iterable, m.Call(func=m.Name("range"))) and isinstance(loop.target, cst.Name) \
            and 1 <= len(iterable.args) <= 3 and all(a.keyword is None and not a.star for a in iterable.args)  # type: ignore[attr-defined]
        if is_range:
            passes = self.fresh_name("passes")
            plan = InnerLoop(passes, f"{loop.target.value} == {passes}[-1]", over_range=True)  # type: ignore[attr-defined]
        else:
            last = self.fresh_name("is_last_pass")
            plan = InnerLoop(last, last, over_range=False)
        self.inner_loops[id(loop)] = plan
        return plan

    def fresh_name(self, base: str) -> str:
        """base, or base_2, base_3...: a name the script does not use."""
        if self._names is None:
            self._names = {name.value for name in m.findall(self.module, m.Name())}
        name, number = base, 1
        while name in self._names:
            number += 1
            name = f"{base}_{number}"
        self._names.add(name)
        return name


class HorovodToDDP(m.MatcherDecoratableTransformer):
    """Pass 2: apply the plan of HorovodUses."""

    def __init__(self, uses: HorovodUses, keep_hvd_import: bool):
        super().__init__()
        self.uses = uses
        self.keep_hvd_import = keep_hvd_import
        self.changes: list[Change] = []
        self.helpers: list[str] = []
        self.imports: set[tuple[str, str | None, str | None]] = set()
        # id(updated statement) -> (the statement, what replaces it). The statement is held: a dropped one's id
        # would be reused by a node made later, which would then be replaced in its stead.
        self.expand: dict[int, tuple[cst.BaseStatement, list[cst.BaseStatement]]] = {}
        self.model = None if uses.lightning else uses.model  # Lightning's strategy wraps the model itself
        self.dist_import: cst.CSTNode | None = None  # the `import torch.distributed as dist` made from hvd's
        stmts = [*uses.broadcast_parameters_stmts, *([uses.dist_optimizer_stmt] if uses.dist_optimizer_stmt else [])]
        self.wrap_stmt = max(stmts, key=uses.line) if (stmts and self.model) else None
        self.wrap_line = uses.line(self.wrap_stmt) if self.wrap_stmt else None
        self.wrap_function: cst.FunctionDef | None = None
        self.function_depth: list[cst.FunctionDef] = []
        if self.wrap_stmt is not None:
            node = self.wrap_stmt
            while not isinstance(node, (cst.FunctionDef, cst.Module)):
                node = uses.parents[node]
            self.wrap_function = node if isinstance(node, cst.FunctionDef) else None

    # bookkeeping
    def note(self, original: cst.CSTNode, after: str, note: str) -> None:
        self.changes.append(Change(self.uses.line(original), self.uses.code(original), _short(after), note))

    def need(self, module: str, obj: str | None = None, asname: str | None = None) -> None:
        self.imports.add((module, obj, asname))

    def helper(self, name: str) -> str:
        if name not in self.helpers:
            self.helpers.append(name)
            for module in HELPER_IMPORTS.get(name, ()):
                self.need(module)
            self.need("torch")
        return name

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.function_depth.append(node)

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        self.function_depth.pop()
        return updated

    # imports
    def leave_Import(self, original: cst.Import, updated: cst.Import) -> cst.Import | cst.RemovalSentinel:
        if original not in self.uses.hvd_imports or any(f.line == self.uses.line(original) for f in self.uses.flags):
            return updated
        names = [get_full_name_for_node(a.name) for a in original.names]
        if "horovod.torch" in names:
            if self.keep_hvd_import:
                self.note(original, "import torch.distributed as dist (added; this import kept)", notes.IMPORT_KEPT)
                self.need("torch.distributed", asname="dist")
                return updated
            self.note(original, "import torch.distributed as dist", notes.IMPORT)
            self.dist_import = cst.Import(names=[cst.ImportAlias(name=_expr("torch.distributed"),  # type: ignore[arg-type]
                                                                 asname=cst.AsName(name=cst.Name("dist")))])
            return self.dist_import
        if names == ["horovod"] and not self.keep_hvd_import:
            self.note(original, "", notes.IMPORT_HOROVOD)
            return cst.RemoveFromParent()
        return updated

    def leave_ImportFrom(self, original: cst.ImportFrom, updated: cst.ImportFrom,
                         ) -> cst.ImportFrom | cst.RemovalSentinel:
        if original in self.uses.hvd_imports and not any(f.line == self.uses.line(original) for f in self.uses.flags):
            if self.keep_hvd_import:
                self.need("torch.distributed", asname="dist")
                return updated
            self.note(original, "import torch.distributed as dist", notes.IMPORT)
            self.dist_import = cst.parse_statement("import torch.distributed as dist").body[0]  # type: ignore[attr-defined]
            return self.dist_import  # type: ignore[return-value]
        if original in self.uses.lightning_imports and isinstance(updated.names, (list, tuple)):
            removable = self.uses.removable_lightning_names
            kept = [a for a in updated.names
                    if get_full_name_for_node(a.asname.name if a.asname else a.name) not in removable]
            if len(kept) < len(updated.names):
                self.note(original, "" if not kept else "(the Horovod class removed from this import)",
                          notes.LIGHTNING_IMPORT_CLASS)
            if not kept:
                return cst.RemoveFromParent()
            kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            return updated.with_changes(names=kept)
        return updated

    # expressions
    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        uses = self.uses
        if id(original) in uses.trainers:
            return self._trainer(original, updated, uses.trainers[id(original)])
        name = uses.hvd_name(original.func)
        if uses.lightning and name in LIGHTNING_CALLS:
            self.need("os")
            self.note(original, LIGHTNING_CALLS[name], notes.LIGHTNING_RANK)
            return _expr(LIGHTNING_CALLS[name])
        if uses.lightning and name == "init":
            return updated  # the statement is removed (leave_SimpleStatementLine)
        if name in SIMPLE_CALLS:
            code, note = SIMPLE_CALLS[name]
            if name in NEEDS_OS:
                self.need("os")
            if name == "size" and self._scales(original):
                note = notes.LR_SCALING
            if name == "local_rank" and m.matches(uses.parents[original],
                                                  m.Arg(value=original)):
                outer = uses.parents[uses.parents[original]]
                if get_full_name_for_node(getattr(outer, "func", None)) == "torch.cuda.set_device":
                    note = notes.SET_DEVICE
            self.note(original, code, note)
            return _expr(code)
        if name == "init":
            self.note(original, "dist.init_process_group()", notes.INIT)
            return _expr("dist.init_process_group()")
        if name == "SyncBatchNorm":
            self.need("torch")
            self.note(original, "torch.nn.SyncBatchNorm(...)", notes.SYNC_BATCHNORM)
            return updated.with_changes(func=_expr("torch.nn.SyncBatchNorm"))
        if name in ("allreduce", "allreduce_"):
            return self._allreduce(original, updated, name)
        if name in ("allgather", "broadcast", "broadcast_", "allgather_object", "broadcast_object"):
            return self._collective(original, updated, name)
        if name == "DistributedOptimizer" and self.model:  # (without a model it stays, flagged)
            inner = _arg(updated, 0, "optimizer")
            return inner if inner is not None else updated
        if get_full_name_for_node(original.func) in {f"{a}.run" for a in uses.horovod}:
            kept = [a for a in updated.args if a.keyword is None or a.keyword.value in ("args", "kwargs", "np")]
            if kept:
                kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            self.need("torch")
            self.note(original, "run_spawned(...)  # torch.multiprocessing.spawn", notes.HOROVOD_RUN)
            return updated.with_changes(func=cst.Name(self.helper("run_spawned")), args=kept)
        if (get_full_name_for_node(original.func) or "").endswith("DistributedSampler"):
            return self._sampler(original, updated)
        if self.model and m.matches(original.func, m.Attribute(attr=m.Name("state_dict") | m.Name("load_state_dict"))) \
                and get_full_name_for_node(original.func.value) == self.model and self._after_wrap(original):  # type: ignore[union-attr]
            func = updated.func.with_changes(value=_expr(f"{self.model}.module"))  # type: ignore[union-attr]
            self.note(original, f"{self.model}.module.{original.func.attr.value}(...)", notes.MODULE_STATE)  # type: ignore[union-attr]
            return updated.with_changes(func=func)
        return updated

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        name = self.uses.hvd_name(original)
        if name == "Compression.fp16":
            self.need("torch.distributed.algorithms.ddp_comm_hooks", "default_hooks")
            self.note(original, "default_hooks.fp16_compress_hook", notes.COMPRESSION)
            return _expr("default_hooks.fp16_compress_hook")
        if name == "Compression.none":
            self.note(original, "None", notes.COMPRESSION_NONE)
            return _expr("None")
        return updated

    def _trainer(self, original: cst.Call, updated: cst.Call, plan: TrainerPlan) -> cst.Call:
        """The Horovod arguments -> strategy, accelerator, devices, num_nodes for Lightning 2 under torchrun, in
        the first one's place (one a line where the call has one argument a line)."""
        uses = self.uses
        self.need("os")
        first = next(i for i, a in enumerate(original.args) if id(a) in plan.replaced)
        comma = updated.args[first].comma
        one_a_line = isinstance(comma, cst.Comma) and isinstance(comma.whitespace_after, cst.ParenthesizedWhitespace)
        column = uses.positions[original.args[0]].start.column
        between = comma if one_a_line else cst.Comma(whitespace_after=cst.ParenthesizedWhitespace(
            last_line=cst.SimpleWhitespace(" " * column), indent=False))
        equal = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))
        args: list[cst.Arg] = []
        for index, (old, new) in enumerate(zip(original.args, updated.args, strict=True)):
            if index == first:
                made = [cst.Arg(value=_expr(code), keyword=cst.Name(key), equal=equal, comma=between)
                        for key, code in plan.new_args]
                args += [*made[:-1], made[-1].with_changes(comma=new.comma)]
            if id(old) in plan.plugins_kept:
                value = new.value
                kept = [e for i, e in enumerate(value.elements) if i in plan.plugins_kept[id(old)]]  # type: ignore[attr-defined]
                if isinstance(value, cst.List):
                    kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
                args.append(new.with_changes(value=value.with_changes(elements=kept)))
            elif id(old) not in plan.replaced and id(old) not in plan.dropped:
                args.append(new)
        if id(original.args[-1]) in plan.replaced | plan.dropped:
            args[-1] = args[-1].with_changes(comma=updated.args[-1].comma)
        if not one_a_line:  # the call was on one line: now one argument a line, aligned after the parenthesis
            args = [a.with_changes(comma=between) for a in args[:-1]] + args[-1:]
        made_code = dict(plan.new_args)
        for old in original.args:
            before = uses.module.code_for_node(old.with_changes(comma=cst.MaybeSentinel.DEFAULT))
            if id(old) in plan.replaced:
                after = f"strategy={made_code['strategy']}" if old is original.args[first] else ""
                self.changes.append(Change(uses.line(old), _short(before), after, notes.LIGHTNING_STRATEGY))
            elif id(old) in plan.dropped and old.keyword and old.keyword.value == "gpus":
                self.changes.append(Change(uses.line(old), _short(before), f"accelerator={made_code['accelerator']}",
                                           notes.LIGHTNING_ACCELERATOR))
            elif id(old) in plan.dropped:
                self.changes.append(Change(uses.line(old), _short(before), "", notes.LIGHTNING_DROPPED))
        line = uses.line(original.args[first])
        if "accelerator" in made_code and not any(a.keyword and a.keyword.value == "gpus" for a in original.args):
            self.changes.append(Change(line, "(no gpus=: the CPU)", f"accelerator={made_code['accelerator']}",
                                       notes.LIGHTNING_ACCELERATOR))
        self.changes.append(Change(line, "(horovodrun: one process per slot)",
                                   f"devices={made_code['devices']}, num_nodes={made_code['num_nodes']}",
                                   notes.LIGHTNING_DEVICES))
        return updated.with_changes(args=args)

    def _scales(self, call: cst.Call) -> bool:
        parent = self.uses.parents[call]
        return isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, cst.Multiply)

    def _after_wrap(self, node: cst.CSTNode) -> bool:
        if self.wrap_line is None or self.uses.line(node) == self.wrap_line:
            return False
        if self.function_depth and self.wrap_function not in self.function_depth:
            return True  # a function: called once training runs, after the wrap
        return self.uses.line(node) > self.wrap_line

    def _allreduce(self, original: cst.Call, updated: cst.Call, name: str) -> cst.BaseExpression:
        keywords = _keywords(original)
        tensor = _arg(updated, 0, "tensor")
        op = keywords.get("op")
        op_name = self.uses.hvd_name(op) if op is not None else None
        average = keywords.get("average")
        if op_name == "Adasum" or (op is not None and op_name not in ("Average", *REDUCE_OPS)) or tensor is None:
            return updated  # flagged in pass 1
        code = self.uses.module.code_for_node(tensor)
        if op_name in REDUCE_OPS or m.matches(average, m.Name("False")):
            reduce_op = REDUCE_OPS.get(op_name or "Sum", "SUM")
            helper = self.helper("all_reduce")
            if name == "allreduce_":
                self.note(original, f"dist.all_reduce({code}, op=dist.ReduceOp.{reduce_op})", notes.ALLREDUCE_OP)
                return _expr(f"dist.all_reduce({code}, op=dist.ReduceOp.{reduce_op})")
            self.note(original, f"{helper}({code}, dist.ReduceOp.{reduce_op})", notes.ALLREDUCE_OP)
            return _expr(f"{helper}({code}, dist.ReduceOp.{reduce_op})")
        helper = self.helper("all_reduce_mean_" if name == "allreduce_" else "all_reduce_mean")
        self.note(original, f"{helper}({code})", notes.ALLREDUCE_MEAN)
        return _expr(f"{helper}({code})")

    def _collective(self, original: cst.Call, updated: cst.Call, name: str) -> cst.BaseExpression:
        value = _arg(updated, 0, "obj" if name.endswith("object") else "tensor")
        if value is None:
            return updated
        code = self.uses.module.code_for_node(value)
        root = _arg(updated, 1, "root_rank")
        root_code = self.uses.module.code_for_node(root) if root is not None else "0"
        helper, args, note = {
            "allgather": ("all_gather_cat", code, notes.ALLGATHER),
            "broadcast": ("broadcast_copy", f"{code}, {root_code}", notes.BROADCAST),
            "broadcast_": ("broadcast_inplace", f"{code}, {root_code}", notes.BROADCAST),
            "allgather_object": ("all_gather_objects", code, notes.ALLGATHER_OBJECT),
            "broadcast_object": ("broadcast_object", f"{code}, {root_code}", notes.BROADCAST_OBJECT),
        }[name]
        self.note(original, f"{helper}({args})", note)
        return _expr(f"{self.helper(helper)}({args})")

    def _sampler(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        if self.uses.lightning:
            if any(self.uses.hvd_name(c.func) in ("rank", "size") for c in m.findall(original, m.Call())):
                self.note(original, cst.Module([]).code_for_node(updated), notes.LIGHTNING_SAMPLER)
            return updated
        dropped = {"num_replicas": "size", "rank": "rank"}
        kept = [a for a, o in zip(updated.args, original.args, strict=True)
                if not (a.keyword and dropped.get(a.keyword.value) == self.uses.hvd_name(o.value.func)
                        if isinstance(o.value, cst.Call) else False)]
        if len(kept) == len(updated.args):
            return updated
        kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        new = updated.with_changes(args=kept)
        first, last = self.uses.line(original), self.uses.positions[original].end.line
        self.changes = [c for c in self.changes if not (first <= c.line <= last
                                                         and c.note in (notes.RANK, notes.SIZE))]
        self.note(original, cst.Module([]).code_for_node(new), notes.SAMPLER)
        return new

    # statements
    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine,
                                  ) -> cst.SimpleStatementLine:
        uses = self.uses
        calls = [s.value for s in original.body if isinstance(s, cst.Expr) and isinstance(s.value, cst.Call)]
        call = calls[0] if len(original.body) == 1 and calls else None
        name = uses.hvd_name(call.func) if call is not None else None
        out: list[cst.BaseStatement] | None = None
        if uses.lightning and name in ("init", "shutdown") and (name == "shutdown" or original is uses.init_stmt):
            out = []
            self.note(original, "", notes.LIGHTNING_INIT if name == "init" else notes.LIGHTNING_SHUTDOWN)
        elif uses.lightning and name in ("broadcast_parameters", "broadcast_optimizer_state", "join"):
            pass  # flagged: Lightning's strategy does this
        elif uses.lightning and call is not None and m.matches(call.func, m.Attribute(attr=m.Name("synchronize"))):
            pass
        elif original in uses.broadcast_parameters_stmts:
            if uses.dist_optimizer_stmt is not None and self.model:
                self.note(original, "" if original is not self.wrap_stmt else f"{self.model} = DDP({self.model})",
                          notes.BROADCAST_PARAMETERS)
                out = []
            else:
                params = uses.module.code_for_node(_arg(call, 0, "params"))  # type: ignore[arg-type]
                root = _arg(call, 1, "root_rank")  # type: ignore[arg-type]
                root_code = uses.module.code_for_node(root) if root is not None else "0"
                out = [_stmt(f"for tensor in ({params}).values():\n    dist.broadcast(tensor, src={root_code})\n")]
                self.note(original, f"for tensor in {params}.values(): dist.broadcast(...)",
                          notes.BROADCAST_PARAMETERS_BY_HAND)
        elif name == "broadcast_optimizer_state":
            optimizer = uses.module.code_for_node(_arg(call, 0, "optimizer"))  # type: ignore[arg-type]
            root = _arg(call, 1, "root_rank")  # type: ignore[arg-type]
            root_code = uses.module.code_for_node(root) if root is not None else "0"
            if optimizer in uses.loaded_optimizers:
                out = [_stmt(f"optimizer_state = [{optimizer}.state_dict()]"),
                       _stmt(f"dist.broadcast_object_list(optimizer_state, src={root_code})"),
                       _stmt(f"{optimizer}.load_state_dict(optimizer_state[0])")]
                self.note(original, "dist.broadcast_object_list([optimizer.state_dict()]); load_state_dict",
                          notes.BROADCAST_OPTIMIZER_STATE_RESUMED)
            else:
                out = []
                self.note(original, "", notes.BROADCAST_OPTIMIZER_STATE_FRESH)
        elif original is uses.dist_optimizer_stmt and self.model:
            assign = updated.body[0]
            target = uses.module.code_for_node(assign.targets[0].target)  # type: ignore[attr-defined]
            value = cst.Module([]).code_for_node(assign.value)  # type: ignore[attr-defined]
            out = [] if target == value else [updated]
            self.note(original, "" if target == value else f"{target} = {value}", self._optimizer_note())
        elif name == "join" and id(original) in {id(s) for s in uses.join_loops.values()}:
            out = []
            self.note(original, "", notes.JOIN_REMOVED)
        elif name == "shutdown":
            out = [_stmt("dist.barrier()"), _stmt("dist.destroy_process_group()")]
            self.note(original, "dist.barrier(); dist.destroy_process_group()", notes.SHUTDOWN)
        elif call is not None and m.matches(call.func, m.Attribute(attr=m.Name("synchronize"))) \
                and get_full_name_for_node(call.func.value) in uses.optimizers:  # type: ignore[attr-defined]
            out = []
            self.note(original, "", notes.SYNCHRONIZE)
        elif id(original) in uses.accumulate and self.model:
            condition, note = uses.accumulate[id(original)]
            body = cst.Module([]).code_for_node(updated.with_changes(leading_lines=())).strip()
            out = [_stmt(f"with contextlib.nullcontext() if {condition} else {self.model}.no_sync():\n"
                         f"    {body}\n")]
            self.need("contextlib")
            self.note(original, f"with contextlib.nullcontext() if {condition} else {self.model}.no_sync(): ...",
                      note)
        if original is self.wrap_stmt:
            out = [updated] if out is None else out
            out += self._wrap_statements()
        if out is None:
            return updated
        self.expand[id(updated)] = (updated, out)
        return updated

    def _optimizer_note(self) -> str:
        keywords = _keywords(self.uses.dist_optimizer_call)  # type: ignore[arg-type]
        parts = [notes.DISTRIBUTED_OPTIMIZER]
        if "named_parameters" in keywords:
            parts.append(notes.NAMED_PARAMETERS)
        if "op" in keywords:
            parts.append(notes.OPTIMIZER_OP_DROPPED)
        if "gradient_predivide_factor" in keywords:
            parts.append(notes.PREDIVIDE)
        return " ".join(parts)

    def _wrap_statements(self) -> list[cst.BaseStatement]:
        model = self.model
        self.need("torch.nn.parallel", "DistributedDataParallel", "DDP")
        out = [_stmt(f"{model} = DDP({model})")]
        self.changes.append(Change(self.wrap_line or 0, self.uses.code(self.wrap_stmt), f"{model} = DDP({model})",
                                   notes.DDP_WRAP))
        call = self.uses.dist_optimizer_call
        compression = _keywords(call).get("compression") if call is not None else None
        if compression is not None:
            hook = self.uses.module.code_for_node(compression)
            if self.uses.hvd_name(compression) == "Compression.fp16":
                self.need("torch.distributed.algorithms.ddp_comm_hooks", "default_hooks")
                out.append(_stmt(f"{model}.register_comm_hook(None, default_hooks.fp16_compress_hook)"))
            elif self.uses.hvd_name(compression) != "Compression.none":
                out.append(_stmt(f"if {hook} is not None:\n    {model}.register_comm_hook(None, {hook})\n"))
            self.changes.append(Change(self.uses.line(compression), self.uses.code(compression),
                                       f"{model}.register_comm_hook(None, ...)", notes.COMPRESSION_HOOK))
        return out

    def leave_With(self, original: cst.With, updated: cst.With) -> cst.BaseStatement | cst.FlattenSentinel:
        uses = self.uses
        if not uses.lightning and len(original.items) == 1 and m.matches(original.items[0].item, m.Call(
                func=m.Attribute(attr=m.Name("skip_synchronize")))) and \
                get_full_name_for_node(original.items[0].item.func.value) in uses.optimizers:  # type: ignore[attr-defined]
            body = list(updated.body.body)  # type: ignore[attr-defined]
            body[0] = body[0].with_changes(leading_lines=[*updated.leading_lines, *body[0].leading_lines])
            self.note(original, "(its body, one level out)", notes.SKIP_SYNCHRONIZE)
            return cst.FlattenSentinel(body)
        return updated

    def _join_wrap(self, original: cst.CSTNode, updated: cst.BaseCompoundStatement) -> cst.BaseStatement:
        if id(original) not in self.uses.join_loops or not self.model:
            return updated
        self.need("torch.distributed.algorithms.join", "Join")
        loop = updated.with_changes(leading_lines=())
        wrapped = cst.With(items=[cst.WithItem(_expr(f"Join([{self.model}])"))], body=cst.IndentedBlock(body=[loop]),
                           leading_lines=updated.leading_lines)
        self.note(original, f"with Join([{self.model}]):  # around this loop", notes.JOIN)
        return wrapped

    def leave_If(self, original: cst.If, updated: cst.If) -> cst.If:
        if original in self.uses.rank_guards:
            what = [word for word, found in (("saving", m.findall(original.body, m.Call(func=m.Attribute(
                attr=m.Name("save"))))), ("printing", m.findall(original.body, m.Call(func=m.Name("print")))))
                if found]
            if what:
                test = cst.Module([]).code_for_node(updated.test)
                self.note(original, f"if {test}:  # {' and '.join(what)} on one rank",
                          notes.LIGHTNING_RANK_GUARD if self.uses.lightning else notes.RANK_GUARD)
        return updated

    def leave_For(self, original: cst.For, updated: cst.For) -> cst.BaseStatement:
        plan = self.uses.inner_loops.get(id(original))
        if plan is None or not self.model:
            return self._join_wrap(original, updated)
        iterable = cst.Module([]).code_for_node(updated.iter)
        target = cst.Module([]).code_for_node(updated.target)
        if plan.over_range:
            loop = self._join_wrap(original, updated.with_changes(iter=cst.Name(plan.name)))
            held = _stmt(f"{plan.name} = {iterable}").with_changes(leading_lines=loop.leading_lines)
            loop = loop.with_changes(leading_lines=())
            self.expand[id(loop)] = (loop, [held, loop])
            self.note(original, f"{plan.name} = {iterable}; for {target} in {plan.name}:", notes.INNER_LOOP_RANGE)
            return loop
        item = updated.target
        if isinstance(item, cst.Tuple) and not item.lpar:
            item = item.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        marked = cst.Tuple([cst.Element(cst.Name(plan.name)), cst.Element(item)], lpar=[], rpar=[])
        call = cst.Call(func=cst.Name(self.helper("mark_last")), args=[cst.Arg(updated.iter)])
        self.note(original, f"for {plan.name}, {cst.Module([]).code_for_node(item)} in mark_last({iterable}):",
                  notes.INNER_LOOP_ITERABLE)
        return self._join_wrap(original, updated.with_changes(target=marked, iter=call))

    def leave_While(self, original: cst.While, updated: cst.While) -> cst.BaseStatement:
        return self._join_wrap(original, updated)

    # blocks: apply the statement expansions, keep the comments of removed statements
    def _body(self, body: list[cst.BaseStatement], *, end_of_job: bool) -> list[cst.BaseStatement]:
        result: list[cst.BaseStatement] = []
        carried: list[cst.EmptyLine] = []
        for stmt in body:
            held, replacement = self.expand.get(id(stmt), (stmt, [stmt]))
            if held is not stmt:
                replacement = [stmt]
            if not replacement:
                carried += stmt.leading_lines  # its comments stay, above the next statement
                continue
            first = replacement[0]
            lead = [*stmt.leading_lines] if first is not stmt else []
            replacement = [first.with_changes(leading_lines=[*carried, *lead, *first.leading_lines]),
                           *replacement[1:]]
            carried = []
            result += replacement
        if end_of_job:
            tail = [_stmt("dist.barrier()"), _stmt("dist.destroy_process_group()")]
            returns = bool(result) and m.matches(result[-1], m.SimpleStatementLine(body=[m.Return()]))
            if returns and m.findall(result[-1], m.Attribute(value=m.Name("dist"))):
                return result  # the return value still needs the group: it ends at exit
            index = len(result) - 1 if returns else len(result)
            result[index:index] = tail
            self.changes.append(Change(self.uses.line(self.uses.init_stmt), "(no hvd.shutdown())",
                                       "dist.barrier(); dist.destroy_process_group()  # at the end of the block "
                                       "that calls init_process_group()",
                                       notes.END_OF_JOB))
        if not result:
            result = [cst.SimpleStatementLine([cst.Pass()], leading_lines=carried)]
        return result

    def _is_init_block(self, original: cst.CSTNode) -> bool:
        init = self.uses.init_stmt
        return init is not None and not self.uses.has_shutdown and not self.uses.lightning and \
            init in getattr(original, "body", ())

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        return updated.with_changes(body=self._body(list(updated.body), end_of_job=self._is_init_block(original)))

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        body = self._body(list(updated.body), end_of_job=self._is_init_block(original))
        if self.uses.lightning and not self.helpers and not any(
                m.findall(s, m.Attribute(value=m.Name("dist"))) for s in body):
            # Lightning does the distributed work: torch.distributed is imported only where it is used.
            self.imports.discard(("torch.distributed", None, "dist"))
            index = next((i for i, s in enumerate(body) if isinstance(s, cst.SimpleStatementLine)
                          and s.body[0] is self.dist_import), None)
            if index is not None:
                removed = body.pop(index)
                if index < len(body):  # its blank lines and comments stay, above the next statement
                    body[index] = body[index].with_changes(
                        leading_lines=[*removed.leading_lines, *body[index].leading_lines])
            for change in self.changes:
                if change.note == notes.IMPORT:
                    change.after, change.note = "", notes.LIGHTNING_IMPORT
                elif change.note == notes.IMPORT_KEPT:
                    change.after = "(this import kept)"
        if self.helpers:
            last_import = max((i for i, s in enumerate(body) if m.matches(s, m.SimpleStatementLine(
                body=[m.Import() | m.ImportFrom()]))), default=-1)
            code = "\n".join(HELPERS[name].strip("\n") + "\n\n" for name in self.helpers)
            helpers = list(cst.parse_module(code).body)
            helpers[0] = helpers[0].with_changes(leading_lines=[
                cst.EmptyLine(), cst.EmptyLine(),
                cst.EmptyLine(comment=cst.Comment("# Added by `python -m compare migrate`: each helper stands "
                                                  "for the Horovod call its docstring names."))])
            if last_import + 1 < len(body):  # two blank lines between the helpers and what follows
                following = body[last_import + 1]
                blank = next((i for i, line in enumerate(following.leading_lines) if line.comment), None)
                blank = len(following.leading_lines) if blank is None else blank
                body[last_import + 1] = following.with_changes(
                    leading_lines=[*[cst.EmptyLine()] * max(0, 2 - blank), *following.leading_lines])
            body[last_import + 1:last_import + 1] = helpers
            self.changes.append(Change(0, "", f"helpers {', '.join(self.helpers)} added after the imports",
                                       notes.HELPERS))
        return updated.with_changes(body=body)


def _remaining_hvd(module: cst.Module, aliases: set[str]) -> bool:
    for node in m.findall(module, m.Attribute() | m.Name()):
        name = get_full_name_for_node(node)
        if name and any(name == a or name.startswith(a + ".") for a in aliases) and not isinstance(node, cst.Name):
            return True
    return False


def migrate_source(source: str) -> Migration:
    """Rewrite one script. Raises NotMigratable for input that is not a Horovod PyTorch script."""
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        raise NotMigratable(f"not valid Python (line {exc.raw_line}, column {exc.raw_column}): "
                            f"{str(exc.message).splitlines()[0]}") from None
    wrapper = MetadataWrapper(module)
    uses = HorovodUses(wrapper)
    wrapper.module.visit(uses)
    uses.plan_lightning()
    if not uses.hvd and not uses.horovod and not uses.hvd_imports and not uses.lightning:
        raise NotMigratable("no Horovod use: the script does not import horovod")
    uses.plan_accumulation()
    uses.flag_elastic_commits()
    if uses.dist_optimizer_stmt is not None and not uses.model:
        uses.flag(uses.dist_optimizer_stmt, "unrecognised", "cannot tell which model this optimizer trains (give "
                                                            "named_parameters=model.named_parameters()): wrap it "
                                                            "in DistributedDataParallel by hand")
    transformer = HorovodToDDP(uses, keep_hvd_import=False)
    new = wrapper.module.visit(transformer)
    if _remaining_hvd(new, uses.hvd | uses.horovod):
        # Something stays (flagged, or not recognised at all): keep the import so that its name resolves.
        transformer = HorovodToDDP(uses, keep_hvd_import=True)
        new = wrapper.module.visit(transformer)
        if all(flag.category in ("Adasum", "multi-host") for flag in uses.flags):
            uses.flags.append(Flag(0, "unrecognised", "", "a Horovod use remains that was not recognised"))
    context = CodemodContext()
    for module_name, obj, asname in sorted(transformer.imports, key=lambda i: (i[1] is not None, i)):
        AddImportsVisitor.add_needed_import(context, module_name, obj, asname)
    if transformer.imports:
        new = AddImportsVisitor(context).transform_module(new)
    changes = sorted(transformer.changes, key=lambda c: c.line)
    return Migration(source=source, code=new.code, changes=changes, flags=sorted(uses.flags, key=lambda f: f.line),
                     has_sync_batchnorm=uses.has_sync_batchnorm,
                     lightning=uses.lightning)
