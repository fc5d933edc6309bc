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
"""

from __future__ import annotations

import atexit
import importlib.machinery
import importlib.util
import os
import sys

# (rank, size) variables of torchrun, horovodrun --gloo / horovod.run, Open MPI, PMI and Slurm
LAUNCHER_VARIABLES = (("RANK", "WORLD_SIZE"), ("HOROVOD_RANK", "HOROVOD_SIZE"),
                      ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"), ("PMI_RANK", "PMI_SIZE"),
                      ("SLURM_PROCID", "SLURM_NTASKS"))


def rank_and_size() -> tuple[str, str]:
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
    def __init__(self, stream):
        self._stream = stream
        self._pending = ""

    def write(self, text: str) -> int:
        self._pending += text
        *lines, self._pending = self._pending.split("\n")
        if lines:
            rank, size = rank_and_size()
            tag = f"[verify rank={rank} size={size}]:" if rank != "?" else ""  # a launcher's own line: as it is
            for line in lines:
                self._stream.write(f"{tag}{line}\n")
            self._stream.flush()
        return len(text)

    def close_line(self) -> None:
        if self._pending:
            self.write("\n")

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def _install() -> None:
    sys.excepthook = _note_uncaught(sys.excepthook)
    atexit.register(_say_finished)  # registered first, so it runs after every other exit handler
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
