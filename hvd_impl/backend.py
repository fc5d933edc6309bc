"""Horovod's side of the comparison: every Horovod call the training job makes is in this file.

Compare with native_impl/backend.py: the same methods, written the way each framework's own examples do.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Callable, Iterator

import horovod
import horovod.torch as hvd
import torch
from horovod.common.exceptions import HorovodInternalError
from torch import nn

from workload.backend import Backend, ReduceOp
from workload.errors import UsageError
from workload.launchers import detect_launcher
from workload.options import Options, refuse_foreign
from workload.processes import describe_peers
from workload.record_format import mpi_library_version

_OPS = {"mean": hvd.Average, "max": hvd.Max, "sum": hvd.Sum}


class HorovodBackend(Backend):
    framework = "horovod"

    def __init__(self, options: Options):
        refuse_foreign(options, self.framework)  # --zero, --powersgd-rank: DDP's (workload/options.py)
        self.options = options
        # Horovod reads its tuning from the environment when it starts.
        if options.fusion_threshold_mb is not None:
            os.environ["HOROVOD_FUSION_THRESHOLD"] = str(int(options.fusion_threshold_mb * 2**20))
        if options.cycle_time_ms is not None:
            os.environ["HOROVOD_CYCLE_TIME"] = str(options.cycle_time_ms)
        if options.collective_timeout is not None:
            # Gloo operations time out, and the stall inspector may shut a stalled job down. Seen here: on MPI
            # a stopped rank blocks the negotiation itself and nothing fires; the launcher's timeout is the last line.
            seconds = max(1, int(options.collective_timeout))
            os.environ["HOROVOD_GLOO_TIMEOUT_SECONDS"] = str(seconds)
            os.environ["HOROVOD_STALL_CHECK_TIME_SECONDS"] = str(max(1, seconds // 2))
            os.environ["HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"] = str(seconds)
        if options.profile:
            options.out.mkdir(parents=True, exist_ok=True)
            os.environ["HOROVOD_TIMELINE"] = str(options.out / "horovod-timeline.json")
        hvd.init()
        if options.device == "cuda":
            torch.cuda.set_device(hvd.local_rank())
            self.comm_backend = "nccl" if hvd.nccl_built() else ("mpi" if hvd.mpi_enabled() else "gloo")
        else:
            self.comm_backend = "mpi" if hvd.mpi_enabled() else "gloo"
        if options.adasum and not hvd.mpi_enabled():
            raise UsageError("--adasum needs Horovod's MPI operations: launch with horovodrun --mpi (or mpirun)")
        self.launcher = detect_launcher(self.framework)
        # Horovod has no tool that names a rank which stopped answering (its stall inspector runs in the
        # negotiation that the stopped rank blocks), so the ranks note each other's host and pid to look.
        self._peers = (hvd.allgather_object((socket.gethostname(), os.getpid()))
                       if options.collective_timeout is not None and hvd.size() > 1 and not options.elastic
                       else None)

    # Asked each time: an elastic job changes size and ranks as workers leave and join.
    @property
    def rank(self) -> int:
        return hvd.rank()

    @property
    def size(self) -> int:
        return hvd.size()

    @property
    def local_rank(self) -> int:
        return hvd.local_rank()

    def data_shards(self) -> tuple[int, list[int]]:
        return hvd.size(), [hvd.rank()]

    def broadcast_initial_state(self, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        # On a fresh optimizer, broadcast_optimizer_state first runs a zero-gradient step() to create
        # the state (horovod issues #2805, #3743): AdamW then starts at step 1, and momentum with weight
        # decay moves the parameters. Only a resumed optimizer has state worth broadcasting.
        if optimizer.state:
            hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    def wrap(self, model: nn.Module, optimizer: torch.optim.Optimizer,
             ) -> tuple[nn.Module, torch.optim.Optimizer]:
        options = self.options
        compression = hvd.Compression.fp16 if options.compression == "fp16" else hvd.Compression.none
        # backward_passes_per_step: Horovod counts the micro-batches itself and reduces on the last one, so
        # accumulation needs no no_sync() here.
        optimizer = hvd.DistributedOptimizer(
            optimizer, named_parameters=model.named_parameters(), compression=compression,
            backward_passes_per_step=options.accum_steps, op=hvd.Adasum if options.adasum else hvd.Average)
        return model, optimizer

    def convert_sync_batchnorm(self, model: nn.Module) -> nn.Module:
        for name, child in model.named_children():
            if isinstance(child, nn.BatchNorm2d):
                sync = hvd.SyncBatchNorm(child.num_features, eps=child.eps, momentum=child.momentum)
                setattr(model, name, sync)
            else:
                self.convert_sync_batchnorm(child)
        return model

    def synchronize(self, optimizer: torch.optim.Optimizer) -> None:
        optimizer.synchronize()  # wait for the averaged gradients, e.g. before clipping or unscaling

    def optimizer_step(self, optimizer: torch.optim.Optimizer, step: Callable[[], object],
                       synchronized: bool) -> None:
        if synchronized:
            with optimizer.skip_synchronize():  # already done: step() must not wait a second time
                step()
        else:
            step()  # DistributedOptimizer.step() synchronizes first

    @contextlib.contextmanager
    def join(self, model: nn.Module, optimizer: torch.optim.Optimizer) -> Iterator[None]:
        yield
        last = hvd.join()  # a rank out of batches keeps answering the others' allreduces until all are out
        # hvd.join() leaves a joined rank with the parameters it had when it ran out of batches; DDP's Join
        # broadcasts the last joiner's model. Do the same, so that every replica ends the epoch alike
        # (docs/features.md, "Uneven inputs").
        hvd.broadcast_parameters(model.state_dict(), root_rank=last)

    def allreduce(self, tensor: torch.Tensor, op: ReduceOp) -> torch.Tensor:
        return hvd.allreduce(tensor, op=_OPS[op], name=f"metrics.{op}")

    def allgather(self, tensor: torch.Tensor) -> torch.Tensor:
        return hvd.allgather(tensor, name="metrics.gather")

    def explain_failure(self, error: BaseException) -> str | None:
        # Only for a failure of Horovod itself. Not gathered under --elastic: its ranks change on each reset.
        if self._peers is None or not isinstance(error, HorovodInternalError):
            return None
        return describe_peers(self._peers)

    def shutdown(self) -> None:
        hvd.shutdown()

    def versions(self) -> dict[str, str | None]:
        return {"horovod": horovod.__version__, "mpi": mpi_library_version(),
                "horovod_controller": "mpi" if hvd.mpi_enabled() else "gloo"}
