"""`compare migrate --verify`'s rank tag: each line that a Python process of the verified job prints starts
with "[verify rank=R size=N]:", R and N as the job itself sees them (its process group, else its launcher's
variables; a process that has neither, such as the launcher itself, prints as it would).
torch.multiprocessing.spawn and horovod.run print with no prefix at all, so this is how rank 0's lines are
told apart in every launch, and how --verify knows the world size a script really ran at. --verify puts this
directory first on PYTHONPATH; nothing else loads it. Complete lines are written one at a time, so that
processes sharing a pipe cannot glue their lines together.

A process whose script ran to its end without an uncaught exception says so last of all, in one tagged
line (FINISHED): a worker that Gloo then aborts in its interpreter's teardown has done its work, and
--verify can tell that race from a failure (docs/fault-tolerance.md, "Gloo's abort at exit").

Where --verify asks for it (STEP_TIMES_VARIABLE names a directory), every optimizer step is timed through
torch's global optimizer step hooks, with no change to the script: Horovod's DistributedOptimizer and a DDP
script's plain optimizer both go through them. Horovod's step() wraps its base class's, and each wrapped
step() fires the hooks, so only the outermost call of a thread counts. At exit each process that stepped
writes the ends of its steps (time.perf_counter) to DIR/rank-R-PID.json (a Ray worker, which Ray kills without
running its exit handlers, after every step too); compare/verify/step_times.py turns them into step times,
the slowest rank's. The hooks are registered when the job itself imports
torch.optim (an import hook), so that no process pays for torch's import that would not have made it.
"""

from __future__ import annotations

import atexit
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
import threading
import time

# (rank, size) variables of torchrun, horovodrun --gloo / horovod.run, Open MPI, PMI and Slurm
LAUNCHER_VARIABLES = (("RANK", "WORLD_SIZE"), ("HOROVOD_RANK", "HOROVOD_SIZE"),
                      ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"), ("PMI_RANK", "PMI_SIZE"),
                      ("SLURM_PROCID", "SLURM_NTASKS"))


# A launcher is not a rank: under Slurm, `srun torchrun` gives torchrun itself SLURM_PROCID (its node) and
# SLURM_NTASKS (the nodes), which would tag its lines, and its last, as a rank's of a job of another size.
LAUNCHERS = ("torchrun", "horovodrun")
_launcher = os.path.basename(sys.argv[0]) in LAUNCHERS if getattr(sys, "argv", None) else False


def rank_and_size() -> tuple[str, str]:
    if _launcher:
        return "?", "?"
    found = _asked()
    if found[0] != "?":
        _last_known[:] = found
    return found


def _asked() -> tuple[str, str]:
    dist = sys.modules.get("torch.distributed")
    hvd = sys.modules.get("horovod.torch")
    try:  # only frameworks the job imported itself are asked
        if dist is not None and dist.is_available() and dist.is_initialized():
            return str(dist.get_rank()), str(dist.get_world_size())
        if hvd is not None and hvd.is_initialized():
            return str(hvd.rank()), str(hvd.size())
    except Exception:  # a group being torn down: fall back to the launcher's word
        pass
    for rank, size in LAUNCHER_VARIABLES:
        if rank in os.environ and size in os.environ:
            return os.environ[rank], os.environ[size]
    return "?", "?"


_last_known = ["?", "?"]
FINISHED = "verify: this process ran its script to the end"
_raised: list[BaseException] = []


def _note_uncaught(previous):
    def hook(kind, value, traceback):
        _raised.append(value)
        previous(kind, value, traceback)
    return hook


def _say_finished() -> None:
    # SystemExit does not pass through the excepthook; a non-zero one leaves its own exit status. A script
    # that destroyed its process group keeps the rank it last printed under.
    rank_and_size()
    if not _raised and _last_known[0] != "?":
        stream = getattr(sys.stderr, "_stream", sys.stderr)  # tagged here, with the rank it last had
        stream.write(f"[verify rank={_last_known[0]} size={_last_known[1]}]:{FINISHED}\n")
        stream.flush()


class TaggedLines:
    def __init__(self, stream, copy=None):
        self._stream = stream
        self._copy = copy  # a file that gets each tagged line too (a Ray worker's, see _tag_ray_workers)
        self._pending = ""

    def write(self, text: str) -> int:
        self._pending += text
        *lines, self._pending = self._pending.split("\n")
        if lines:
            rank, size = rank_and_size()
            tag = f"[verify rank={rank} size={size}]:" if rank != "?" else ""  # a launcher's own line: as it is
            for line in lines:
                self._stream.write(f"{tag}{line}\n")
                if tag and self._copy is not None:
                    self._copy.write(f"{tag}{line}\n")
            self._stream.flush()
            if self._copy is not None:
                self._copy.flush()
        return len(text)

    def close_line(self) -> None:
        if self._pending:
            self.write("\n")

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


STEP_TIMES_VARIABLE = "COMPARE_VERIFY_STEP_TIMES"  # the directory for each process's step times
LINES_VARIABLE = "COMPARE_VERIFY_LINES"  # the directory for a copy of each Ray worker's tagged lines
RAY_UTILS = "ray._private.utils"


def _tag_ray_workers(utils) -> None:
    """Ray's worker process replaces sys.stdout and sys.stderr after this file ran, with
    ray._private.utils.open_log(fd), and streams what they print to the driver only while the driver lives (the
    last lines of a short job are often lost). So the streams open_log makes of fd 1 and 2 are tagged as well,
    and each tagged line is copied to DIR/lines-PID.txt, which --verify reads after the launch."""
    opened = utils.open_log
    copy = _LinesFile(os.path.join(os.environ[LINES_VARIABLE], f"lines-{os.getpid()}.txt"))

    def open_log(path, *args, **kwargs):
        stream = opened(path, *args, **kwargs)
        return TaggedLines(stream, copy) if path in (1, 2) else stream

    utils.open_log = open_log


class _LinesFile:
    """Opened at its first line, so that Ray's own processes, which tag nothing, leave no file."""

    def __init__(self, path: str):
        self.path, self._file = path, None

    def write(self, text: str) -> None:
        if self._file is None:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115  (open for the process's life)
        self._file.write(text)

    def flush(self) -> None:
        if self._file is not None:
            self._file.flush()
OPTIMIZER_MODULE = "torch.optim.optimizer"


class StepTimer:
    """The start and end (time.perf_counter) of each outermost optimizer step() of this process. A step()
    that calls another hooked step() (Horovod's DistributedOptimizer calls its base class's) fires the pre
    hooks on the way in and the post hooks on the way out of each: a depth per thread counts the outermost
    call only. A step() that raised never fires its post hooks: the next pre hook finds the outermost call's
    frame gone from the stack and starts afresh, so a failed step is dropped and the steps after it count."""

    def __init__(self, clock=time.perf_counter):
        self.clock = clock
        self.steps: list[tuple[float, float]] = []  # (start, end) of each outermost step, in the order they ended
        self.rank: tuple[str, str] = ("?", "?")
        self.on_step = None  # called after each outermost step (a Ray worker's eager writer)
        self._local = threading.local()
        self._lock = threading.Lock()

    def pre(self, optimizer, args, kwargs) -> None:
        local = self._local
        caller = sys._getframe(1)  # torch's wrapper of this step()
        depth = getattr(local, "depth", 0)
        if depth and not _on_stack(local.outer, caller):
            depth = 0  # the open step raised and never came out
        if depth == 0:
            local.outer, local.start = caller, self.clock()
        local.depth = depth + 1

    def post(self, optimizer, args, kwargs) -> None:
        local = self._local
        depth = getattr(local, "depth", 0)
        if depth <= 0:
            return  # a post hook without its pre hook (the hooks registered midway): nothing to time
        local.depth = depth - 1
        if depth == 1:
            end = self.clock()
            local.outer = None
            with self._lock:
                self.steps.append((local.start, end))
            if self.rank[0] == "?":
                self.rank = rank_and_size()
            if self.on_step is not None:
                self.on_step()

    def install(self, optimizer_module) -> tuple:
        """Register the two hooks on torch.optim.optimizer; returns their handles (remove() each to undo)."""
        return (optimizer_module.register_optimizer_step_pre_hook(self.pre),
                optimizer_module.register_optimizer_step_post_hook(self.post))

    def record(self) -> dict:
        with self._lock:
            steps = list(self.steps)
        return {"rank": self.rank[0], "size": self.rank[1], "pid": os.getpid(), "clock": "time.perf_counter",
                "starts": [start for start, _ in steps], "ends": [end for _, end in steps]}

    def write(self, directory: str) -> None:
        """DIR/rank-R-PID.json, where this process stepped at all (a launcher never does)."""
        if not self.steps:
            return
        now = rank_and_size()  # as the job sees itself at its end, else as it did at its first step
        if now[0] != "?" or _last_known[0] != "?":
            self.rank = now if now[0] != "?" else (_last_known[0], _last_known[1])
        record = self.record()
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, f"rank-{record['rank']}-{record['pid']}.json")
        with open(path + ".tmp", "w") as out:
            json.dump(record, out)
        os.replace(path + ".tmp", path)


def _on_stack(frame, current) -> bool:
    while current is not None:
        if current is frame:
            return True
        current = current.f_back
    return False


class _AfterImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Runs `then(module)` once the module named `name` has been executed, wherever the job imports it."""

    def __init__(self, name: str, then):
        self.name, self.then, self._loader = name, then, None

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name or self._loader is not None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is None or not hasattr(spec.loader, "exec_module"):
                    return None
                self._loader, spec.loader = spec.loader, self
                return spec
        return None

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        module.__loader__ = self._loader
        self._loader.exec_module(module)
        sys.meta_path[:] = [finder for finder in sys.meta_path if finder is not self]
        self.then(module)


class WriteUnderRay:
    """Ray ends its workers with ray.kill, which runs no exit handler: a process that steps with Ray imported (a
    Ray worker) writes its step times after every step as well, from a thread of its own, so that no step waits
    for the file. Elsewhere nothing changes."""

    def __init__(self, timer: StepTimer, directory: str):
        self.timer, self.directory = timer, directory
        self.due = threading.Event()
        self.under_ray: bool | None = None  # decided at the first step

    def __call__(self) -> None:
        if self.under_ray is None:
            self.under_ray = "ray" in sys.modules
            if self.under_ray:
                threading.Thread(target=self._write, name="verify-step-times", daemon=True).start()
        if self.under_ray:
            self.due.set()

    def _write(self) -> None:
        while True:
            self.due.wait()
            self.due.clear()
            self.timer.write(self.directory)


TIMER = StepTimer()


def _time_steps(directory: str) -> None:
    if OPTIMIZER_MODULE in sys.modules:
        TIMER.install(sys.modules[OPTIMIZER_MODULE])
    else:
        sys.meta_path.insert(0, _AfterImport(OPTIMIZER_MODULE, TIMER.install))
    TIMER.on_step = WriteUnderRay(TIMER, directory)
    atexit.register(TIMER.write, directory)


def _install() -> None:
    sys.excepthook = _note_uncaught(sys.excepthook)
    atexit.register(_say_finished)  # registered first, so it runs after every other exit handler
    if os.environ.get(STEP_TIMES_VARIABLE):
        _time_steps(os.environ[STEP_TIMES_VARIABLE])
    if os.environ.get(LINES_VARIABLE):
        sys.meta_path.insert(0, _AfterImport(RAY_UTILS, _tag_ray_workers))
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, TaggedLines):
            tagged = TaggedLines(stream)
            setattr(sys, name, tagged)
            atexit.register(tagged.close_line)


def _chain() -> None:
    """Run the sitecustomize this one hides, if the interpreter has one."""
    here = os.path.dirname(os.path.abspath(__file__))
    path = [entry for entry in sys.path if os.path.abspath(entry or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


if __name__ == "sitecustomize":  # as the interpreter loads it; --verify also reads FINISHED from this file
    _install()
    _chain()
