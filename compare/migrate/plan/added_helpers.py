"""The small functions the rewrite adds to a migrated script, each standing for the Horovod call its
docstring names.
"""

from __future__ import annotations

import re

HELPERS = {
    "all_reduce": '''
def all_reduce(tensor, op=dist.ReduceOp.SUM):
    """hvd.allreduce(op=Sum/Min/Max/Product), or average=False (a sum): a reduced copy (torch.distributed
    reduces in place). A CPU tensor is reduced on this rank's GPU where the process group serves CUDA
    tensors alone (NCCL; on GPUs also a group made with no backend named); Horovod took either. Gradients
    flow back through it as through Horovod's (HorovodAllreduce.backward): reduced over the ranks alike."""
    device = "cuda" if tensor.device.type == "cpu" and "cpu:" not in dist.get_backend_config() else tensor.device
    result = tensor.detach().to(device, copy=True)
    dist.all_reduce(result, op=op)
    result = result.to(tensor.device)
    if tensor.requires_grad and torch.is_grad_enabled():  # Horovod's backward: the gradient reduced alike
        result = tensor + (result - tensor).detach()
        result.register_hook(lambda grad: all_reduce(grad, op))
    return result
''',
    "all_reduce_": '''
def all_reduce_(tensor, op=dist.ReduceOp.SUM):
    """hvd.allreduce_(op=Sum/Min/Max/Product), or average=False: reduce in place, and return the tensor. A
    CPU tensor is reduced on this rank's GPU where the process group serves CUDA tensors alone (NCCL)."""
    if tensor.device.type == "cpu" and "cpu:" not in dist.get_backend_config():
        result = tensor.to("cuda")
        dist.all_reduce(result, op=op)
        return tensor.copy_(result)
    dist.all_reduce(tensor, op=op)
    return tensor
''',
    "all_reduce_mean": '''
def all_reduce_mean(tensor):
    """hvd.allreduce's default op=Average: dist.all_reduce sums, so divide by the world size. A CPU tensor
    is reduced on this rank's GPU where the process group serves CUDA tensors alone (NCCL). Gradients flow
    back as through Horovod's: averaged over the ranks."""
    device = "cuda" if tensor.device.type == "cpu" and "cpu:" not in dist.get_backend_config() else tensor.device
    result = tensor.detach().to(device, copy=True)
    dist.all_reduce(result)
    result = (result / dist.get_world_size()).to(tensor.device)
    if tensor.requires_grad and torch.is_grad_enabled():  # Horovod's backward: the gradient reduced alike
        result = tensor + (result - tensor).detach()
        result.register_hook(all_reduce_mean)
    return result
''',
    "all_reduce_mean_": '''
def all_reduce_mean_(tensor):
    """hvd.allreduce_ (in place, op=Average): sum in place, then divide in place. A CPU tensor is reduced
    on this rank's GPU where the process group serves CUDA tensors alone (NCCL)."""
    if tensor.device.type == "cpu" and "cpu:" not in dist.get_backend_config():
        result = tensor.to("cuda")
        dist.all_reduce(result)
        tensor.copy_(result)
    else:
        dist.all_reduce(tensor)
    return tensor.div_(dist.get_world_size())
''',
    "all_reduce_average_or_op": '''
def all_reduce_average_or_op(tensor, average=None, op=None, in_place=False):
    """hvd.allreduce(tensor, average=..., op=...) (in_place: hvd.allreduce_) where the reduction is known
    only at run time, resolved as Horovod resolves it: op if given (with average too: ValueError, as
    Horovod), else a sum for average=False, else the mean. Horovod's Average is dist.ReduceOp.AVG here,
    its Sum/Min/Max/Product dist.ReduceOp's. A CPU tensor is reduced on this rank's GPU where the process
    group serves CUDA tensors alone (NCCL). Not in place, gradients flow back as through Horovod's: the
    gradient reduced the same way."""
    if op is not None and average is not None:
        raise ValueError("The op parameter supersedes average. Please provide only one of them.")
    if op is None:
        op = dist.ReduceOp.AVG if average is None or average else dist.ReduceOp.SUM
    device = "cuda" if tensor.device.type == "cpu" and "cpu:" not in dist.get_backend_config() else tensor.device
    result = tensor.to(device) if in_place else tensor.detach().to(device, copy=True)
    dist.all_reduce(result, op=dist.ReduceOp.SUM if op == dist.ReduceOp.AVG else op)
    if op == dist.ReduceOp.AVG:
        result = result.div_(dist.get_world_size()) if in_place else result / dist.get_world_size()
    if in_place:
        return tensor.copy_(result) if result is not tensor else result
    result = result.to(tensor.device)
    if tensor.requires_grad and torch.is_grad_enabled():  # Horovod's backward: the gradient reduced alike
        result = tensor + (result - tensor).detach()
        result.register_hook(lambda grad: all_reduce_average_or_op(grad, average, op))
    return result
''',
    "all_gather_cat": '''
class _AllGatherCat(torch.autograd.Function):
    """hvd.allgather's autograd function. Forward: every rank's tensor concatenated along dimension 0,
    whose length may differ per rank (the lengths are gathered first, each tensor padded to the longest,
    gathered, and trimmed back). Backward, as Horovod's: the incoming gradient averaged over the ranks
    (torch.distributed.nn's all_gather sums it instead), then this rank's rows."""

    @staticmethod
    def forward(ctx, tensor):
        device = "cuda" if tensor.device.type == "cpu" and "cpu:" not in dist.get_backend_config() else tensor.device
        local = tensor.to(device).contiguous()
        length = torch.tensor([local.shape[0]], device=device)
        lengths = [torch.zeros_like(length) for _ in range(dist.get_world_size())]
        dist.all_gather(lengths, length)
        lengths = [int(n.item()) for n in lengths]
        padded = local.new_zeros((max(lengths), *local.shape[1:]))
        padded[: local.shape[0]] = local
        parts = [torch.empty_like(padded) for _ in lengths]
        dist.all_gather(parts, padded)
        ctx.rows = sum(lengths[: dist.get_rank()]), local.shape[0]
        return torch.cat([part[:n] for part, n in zip(parts, lengths)]).to(tensor.device)

    @staticmethod
    def backward(ctx, grad):
        device = "cuda" if grad.device.type == "cpu" and "cpu:" not in dist.get_backend_config() else grad.device
        summed = grad.to(device, copy=True).contiguous()
        dist.all_reduce(summed)
        start, rows = ctx.rows
        return (summed.narrow(0, start, rows) / dist.get_world_size()).to(grad.device)


def all_gather_cat(tensor):
    """hvd.allgather: every rank's tensor concatenated along dimension 0 (each rank's length may differ),
    with gradients passed back to each rank's rows, averaged over the ranks, as Horovod does. Where no
    gradient is wanted (torch.no_grad(), a tensor that does not require one) autograd records nothing."""
    return _AllGatherCat.apply(tensor)
''',
    "broadcast_copy": '''
def broadcast_copy(tensor, src):
    """hvd.broadcast: a copy of rank src's tensor (dist.broadcast overwrites its argument in place). A CPU
    tensor travels through this rank's GPU where the process group serves CUDA tensors alone (NCCL)."""
    device = "cuda" if tensor.device.type == "cpu" and "cpu:" not in dist.get_backend_config() else tensor.device
    result = tensor.to(device, copy=True)
    dist.broadcast(result, src=src)
    return result.to(tensor.device)
''',
    "broadcast_inplace": '''
def broadcast_inplace(tensor, src):
    """hvd.broadcast_: overwrite tensor with rank src's, and return it. A CPU tensor travels through this
    rank's GPU where the process group serves CUDA tensors alone (NCCL)."""
    if tensor.device.type == "cpu" and "cpu:" not in dist.get_backend_config():
        result = tensor.to("cuda")
        dist.broadcast(result, src=src)
        return tensor.copy_(result)
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
    "average_gradients_at_step": '''
def average_gradients_at_step(optimizer, op=dist.ReduceOp.SUM, average=True, compression=None):
    """hvd.DistributedOptimizer where no DistributedDataParallel can be made that the caller trains through (the
    model is another module's, or a function's argument): before each step(), every gradient the optimizer
    updates is summed over the ranks and divided by their number, as Horovod's allreduce does (without DDP's
    overlap of communication with backward). As Horovod's synchronize(): every parameter that requires a
    gradient, in the optimizer's order on every rank, a zero where this rank's backward() gave it none, so that
    ranks that used other parameters still make the same collectives. compression: None, or DDP's
    fp16_compress_hook where Horovod had Compression.fp16: as Horovod's, each gradient travels as float16, is
    summed and divided there, and is cast back."""
    if compression is not None and getattr(compression, "__name__", None) != "fp16_compress_hook":
        raise TypeError(f"average_gradients_at_step: compression is fp16_compress_hook or None, not {compression!r}")

    def average_gradients(optimizer, args, kwargs):
        for group in optimizer.param_groups:
            for parameter in group["params"]:
                if not parameter.requires_grad:
                    continue
                if parameter.grad is None:
                    parameter.grad = torch.zeros_like(parameter)
                wire = parameter.grad if compression is None else parameter.grad.to(torch.float16)
                dist.all_reduce(wire, op=op)
                if average:
                    wire.div_(dist.get_world_size())
                if wire is not parameter.grad:
                    parameter.grad.copy_(wire)
    optimizer.register_step_pre_hook(average_gradients)
    return optimizer
''',
    "horovod_zero_gradient_step": '''
def horovod_zero_gradient_step(optimizer, keep_state):
    """hvd.broadcast_optimizer_state on a fresh optimizer: Horovod gave every parameter a zero gradient and ran
    step() once (to create the state it broadcast), which applies weight decay to the parameters. keep_state=False:
    hvd.DistributedOptimizer, built after the broadcast, was a new optimizer without that step's state."""
    if optimizer.state_dict()["state"]:
        return  # Horovod steps only an optimizer without state
    for group in optimizer.param_groups:
        for parameter in group["params"]:
            if parameter.requires_grad:
                parameter.grad = torch.zeros_like(parameter)
    optimizer.step()
    if not keep_state:
        optimizer.state.clear()
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
    "train_loop_calling": '''
def train_loop_calling(fn):
    """RayExecutor.run(fn, args, kwargs): TorchTrainer's loop takes one config dict, so this loop calls fn with
    config["args"] and config["kwargs"] on every worker and reports what it returns (rank 0's report is the
    Result's metrics, under "return")."""
    def train_loop_per_worker(config):
        value = fn(*config["args"], **config["kwargs"])
        # The Result's metrics are those reported with a checkpoint: rank 0 reports an empty one.
        with tempfile.TemporaryDirectory() as empty:
            rank_0 = ray.train.get_context().get_world_rank() == 0
            ray.train.report({"return": value}, checkpoint=ray.train.Checkpoint.from_directory(empty) if rank_0
                             else None)
    return train_loop_per_worker
''',
}
HELPER_IMPORTS = {"run_spawned": ("os", "socket"), "train_loop_calling": ("ray.train", "tempfile")}


def helper_code(name: str, renamed: dict[str, str]) -> str:
    """A helper's definition, under the name it is given where its own would clash with the repository's."""
    code = HELPERS[name].strip("\n")
    # the definition and the helper's calls of itself (its backward hook), not `dist.name(`
    return re.sub(rf"(?<![\w.]){name}\b", renamed[name], code) if name in renamed else code


def helpers_module_code(names: list[str], renamed: dict[str, str]) -> str:
    """The one module a repository's migrated files import their helpers from."""
    imports = sorted({"torch", *(module for name in names for module in HELPER_IMPORTS.get(name, ()))})
    code = "".join("\n\n" + helper_code(name, renamed) + "\n" for name in names)
    uses_dist = re.search(r"(?<![\w.])dist\.", code) is not None  # (horovod_zero_gradient_step alone does not)
    lines = ['"""Added by `python -m compare migrate`: each function stands for the Horovod call its docstring '
             'names."""', "", *(f"import {module}" for module in imports),
             *(["import torch.distributed as dist"] if uses_dist else []), ""]
    return "\n".join(lines) + code
