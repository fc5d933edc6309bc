"""Native PyTorch's side of the comparison: every torch.distributed call the training job makes is here.

Compare with hvd_impl/backend.py: the same methods, written the way each framework's own examples do.
"""

from __future__ import annotations

import contextlib
import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook
from torch.distributed.algorithms.join import Join
from torch.nn.parallel import DistributedDataParallel as DDP

from workload.backend import Backend, ReduceOp
from workload.launchers import NO_LAUNCHER, detect_launcher
from workload.options import Options, refuse_foreign
from workload.processes import free_loopback_port

_OPS = {"mean": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "sum": dist.ReduceOp.SUM}


def _restart_rendezvous(timeout: timedelta) -> dict:
    """init_process_group arguments for a group that torchrun restarted (--max-restarts), else none.

    torchrun keeps one store across restarts, so a restarted group could read the addresses that the
    group before it published and connect to dead ports (seen here: about one restart in four hung or
    failed in Gloo's connectFullMesh). A store prefix per attempt keeps the attempts apart.
    """
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    if attempt == "0" or os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        return {}
    agent_store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
                                timeout=timeout)
    return {"store": dist.PrefixStore(f"restart-{attempt}", agent_store), "rank": int(os.environ["RANK"]),
            "world_size": int(os.environ["WORLD_SIZE"])}


def _rendezvous_for_one() -> None:
    """No launcher: one worker, on a process group of one that listens on loopback only."""
    os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(free_loopback_port()))


class DDPBackend(Backend):
    framework = "ddp"

    def __init__(self, options: Options):
        refuse_foreign(options, self.framework)  # --adasum, --elastic: Horovod's (workload/options.py)
        self.options = options
        self.launcher = detect_launcher(self.framework)
        if self.launcher == NO_LAUNCHER:
            _rendezvous_for_one()
        self.local_rank = int(os.environ.get("LOCAL_RANK", 0))
        if options.device == "cuda":
            torch.cuda.set_device(self.local_rank)
            self.comm_backend = "nccl"
            device_id = torch.device("cuda", self.local_rank)
            group_backend = "cpu:gloo,cuda:nccl"  # gradients on NCCL; the metrics, gathered on the CPU, on gloo
        else:
            self.comm_backend = "gloo"
            device_id = None
            group_backend = "gloo"
        if os.environ.get("MASTER_ADDR") in ("localhost", "127.0.0.1") and "GLOO_SOCKET_IFNAME" not in os.environ:
            # One host: keep gloo's own sockets on loopback too (seen here: without it, a group restarted by
            # torchrun --max-restarts hangs while connecting).
            os.environ["GLOO_SOCKET_IFNAME"] = "lo"
        timeout = timedelta(seconds=options.collective_timeout or 300)
        dist.init_process_group(group_backend, timeout=timeout, device_id=device_id,
                                **_restart_rendezvous(timeout))
        self.rank, self.size = dist.get_rank(), dist.get_world_size()
        # A second, gloo-only group for monitored_barrier, which names the ranks that stop answering: the
        # training group may be stuck in the collective that timed out.
        self._health = (dist.new_group(backend="gloo", timeout=timeout)
                        if options.collective_timeout is not None and self.size > 1 else None)
        self.device_ids = [self.local_rank] if options.device == "cuda" else None

    def data_shards(self) -> tuple[int, list[int]]:
        return dist.get_world_size(), [dist.get_rank()]

    def wrap(self, model: nn.Module, optimizer: torch.optim.Optimizer,
             ) -> tuple[nn.Module, torch.optim.Optimizer]:
        options = self.options
        # DDP's constructor broadcasts rank 0's parameters and buffers (so broadcast_initial_state has nothing
        # to do), and its backward averages the gradients (so synchronize has nothing to do either).
        ddp = DDP(model, device_ids=self.device_ids, bucket_cap_mb=options.bucket_cap_mb,
                  gradient_as_bucket_view=options.gradient_as_bucket_view)
        if self.rank == 0 and (options.gradient_as_bucket_view or options.bucket_cap_mb is not None):
            # Read back from DDP itself: the line shows a tuning flag reached the wrapper, not only the record.
            print(f"DDP: bucket cap {ddp.bucket_bytes_cap / 2**20:g} MiB, gradients as bucket views "
                  f"{ddp.gradient_as_bucket_view}", file=sys.stderr, flush=True)
        if options.compression == "fp16":
            ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
        if options.powersgd_rank is not None:
            state = powerSGD_hook.PowerSGDState(process_group=None, matrix_approximation_rank=options.powersgd_rank,
                                                start_powerSGD_iter=2)
            ddp.register_comm_hook(state, powerSGD_hook.powerSGD_hook)
        if options.zero:
            # Imported only when asked for: torch.distributed.optim loads FSDP and DTensor, about a second of
            # every worker's start-up on this CPU.
            from torch.distributed.optim import ZeroRedundancyOptimizer

            optimizer = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=type(optimizer),
                                                **optimizer.defaults)
            # Each rank's shard, as its local optimizer holds it: the one line that shows the state is sharded.
            held = sum(p.numel() for group in optimizer.optim.param_groups for p in group["params"])
            print(f"ZeroRedundancyOptimizer: rank {self.rank} holds the optimizer state of {held} of "
                  f"{sum(p.numel() for p in model.parameters())} parameter elements", file=sys.stderr, flush=True)
        return ddp, optimizer

    def convert_sync_batchnorm(self, model: nn.Module) -> nn.Module:
        return nn.SyncBatchNorm.convert_sync_batchnorm(model)

    def no_sync(self, model: nn.Module, sync: bool) -> contextlib.AbstractContextManager:
        # Accumulate locally on all but the last micro-batch; DDP reduces in the last backward.
        return contextlib.nullcontext() if sync else model.no_sync()

    def join(self, model: nn.Module, optimizer: torch.optim.Optimizer) -> contextlib.AbstractContextManager:
        joinables = [model, *([optimizer] if self.options.zero else [])]  # ZeroRedundancyOptimizer joins too
        return Join(joinables)  # shadows the others' collectives once this rank is out of batches

    def optimizer_state(self, optimizer: torch.optim.Optimizer) -> dict | None:
        if self.options.zero:  # ZeroRedundancyOptimizer, sharded: gather it on rank 0 first
            optimizer.consolidate_state_dict(to=0)
            return optimizer.state_dict() if self.rank == 0 else None
        return optimizer.state_dict()

    def allreduce(self, tensor: torch.Tensor, op: ReduceOp) -> torch.Tensor:
        result = tensor.clone()
        dist.all_reduce(result, op=_OPS[op])
        return result / dist.get_world_size() if op == "mean" else result

    def allgather(self, tensor: torch.Tensor) -> torch.Tensor:
        result = tensor.new_empty((dist.get_world_size() * tensor.shape[0], *tensor.shape[1:]))
        # all_gather_single is torch 2.13's name; older torch (the GPU machine's 2.11) has only all_gather_into_tensor.
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        gather(result, tensor.contiguous())
        return result

    def explain_failure(self, error: BaseException) -> str | None:
        # Only for a failure of the collectives (a timeout, a lost connection), not of this rank's own code.
        if self._health is None or not (isinstance(error, dist.DistError) or "gloo" in str(error).lower()):
            return None
        wait = timedelta(seconds=min(10.0, self.options.collective_timeout or 10.0))
        try:
            dist.monitored_barrier(group=self._health, timeout=wait, wait_all_ranks=True)
        except RuntimeError as exc:
            if self.rank == 0:  # rank 0 waits for every rank: "Ranks 1 failed to pass monitoredBarrier in 10000 ms"
                return f"monitored_barrier: {str(exc).strip().splitlines()[0]}"
            # The others only hear from rank 0, which answers no one while a rank is missing.
            return "monitored_barrier: rank 0 did not release the barrier (rank 0 names any rank that never arrived)"
        return "monitored_barrier: every rank still answers"

    def shutdown(self) -> None:
        # A barrier first: it makes Gloo's abort at exit rare (docs/fault-tolerance.md, "Gloo's abort at exit").
        dist.barrier()
        dist.destroy_process_group()

    def versions(self) -> dict[str, str | None]:
        nccl = ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else None
        return {"nccl": nccl}
