"""The Horovod names the rewrite knows: what each becomes, and which need a person."""

from __future__ import annotations

from compare.migrate import notes

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
