"""The semantic note of each rewrite: why the DDP form is equivalent, or in what it is not.

docs/migration.md's mapping table carries the same notes.
"""

IMPORT = "torch.distributed replaces horovod.torch; DDP and the hooks are imported where they are used."
IMPORT_KEPT = ("horovod.torch stays imported: a Horovod use that needs a person remains (see the list below); "
               "torch.distributed is added.")
IMPORT_HOROVOD = "The horovod package was only used for horovod.run, now torch.multiprocessing.spawn."
INIT = ("init_process_group() reads torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR/PORT). No backend "
        "named: torch serves CPU tensors with Gloo and CUDA tensors with NCCL, as Horovod serves both.")
RANK = "The global rank: the same number under torchrun as under horovodrun for the same process layout."
SIZE = "The number of processes."
LR_SCALING = ("Scaling by the world size (e.g. the learning rate x hvd.size()): the same factor under DDP, "
              "since DDP averages gradients as Horovod does.")
LOCAL_RANK = "torchrun sets LOCAL_RANK, the rank on this node (horovodrun: HOROVOD_LOCAL_RANK)."
LOCAL_SIZE = "torchrun sets LOCAL_WORLD_SIZE, the processes on this node (--nproc-per-node)."
CROSS_RANK = "torchrun's GROUP_RANK is the node's rank (--node-rank), Horovod's cross_rank on uniform nodes."
CROSS_SIZE = "Nodes = world size / processes per node, assuming the same number of processes on every node."
IS_INITIALIZED = "Whether the process group exists."
BARRIER = "The same: every rank waits for all."
NCCL_BUILT = "Whether this torch has NCCL (Horovod: whether it was built with NCCL)."
SET_DEVICE = "One GPU per process, chosen by the local rank as before (torchrun's LOCAL_RANK)."
SAMPLER = ("DistributedSampler defaults to the default process group's world size and rank: the explicit "
           "num_replicas/rank are no longer needed. Same shards, same order for the same seed and epoch.")
BROADCAST_PARAMETERS = ("Dropped: DDP's constructor broadcasts rank 0's parameters and buffers, where "
                        "the model is wrapped (after any rank-0-only loading, like the broadcast it replaces).")
BROADCAST_PARAMETERS_BY_HAND = ("No DistributedOptimizer, so no DDP wrap: each tensor is broadcast from the root "
                                "rank in place, as hvd.broadcast_parameters did.")
BROADCAST_OPTIMIZER_STATE_FRESH = (
    "Dropped: the optimizer is never loaded, so every rank's fresh optimizer is already the same. Not the same "
    "in one way: Horovod's broadcast_optimizer_state runs a zero-gradient step() on a fresh optimizer (horovod "
    "#2805, #3743); with Adam/AdamW (step count) or weight decay the original's updates differ from the first.")
BROADCAST_OPTIMIZER_STATE_RESUMED = (
    "DDP has no broadcast of optimizer state (it broadcasts parameters and buffers only). The optimizer is "
    "loaded from a checkpoint, perhaps on rank 0 only, so rank 0's state_dict is sent to every rank with "
    "broadcast_object_list and loaded there. (Or load the checkpoint on every rank and drop this.)")
DISTRIBUTED_OPTIMIZER = ("Dropped: DDP averages the gradients during backward(), so the optimizer stays the plain "
                         "torch optimizer; load and save its state_dict as before.")
NAMED_PARAMETERS = "named_parameters: DDP takes the parameters from the model it wraps."
OPTIMIZER_OP_DROPPED = ("op: DDP averages (hvd.Average); any other reduction (Sum, Adasum) is flagged below.")
OPTIMIZER_OP = "DistributedOptimizer(op=...) other than hvd.Average: DDP averages; scale the loss or lr by hand."
PREDIVIDE = ("gradient_predivide_factor only splits the division by the world size around the sum; DDP's "
             "average is the same up to rounding.")
DDP_WRAP = ("The model is wrapped in DistributedDataParallel here, where Horovod's state was in place (after "
            "broadcast_parameters and DistributedOptimizer): DDP broadcasts rank 0's parameters and buffers now "
            "and averages gradients in every backward(). Saving and loading use model.module.")
MODULE_STATE = ("The DDP wrapper's own state_dict keys start with 'module.': use the inner module's so "
                "checkpoints keep the plain keys the Horovod script wrote (and read its old ones).")
COMPRESSION = "hvd.Compression.fp16 -> DDP's fp16_compress_hook: gradients travel as float16, averaged, cast back."
COMPRESSION_NONE = "No compression: no communication hook."
COMPRESSION_HOOK = ("compression=: a DDP communication hook. Both cast to float16 for the transfer and average; "
                    "Horovod divides after the float16 sum, the hook before it, so results agree to about 1e-7.")
ACCUMULATION = ("backward_passes_per_step=k: Horovod reduces on every k-th backward(); DDP reduces in every "
                "backward() except inside no_sync(). The condition that guards optimizer.step() decides.")
SYNCHRONIZE = "Dropped: with DDP the gradients are already averaged when backward() returns."
SKIP_SYNCHRONIZE = "Unwrapped: there is no separate synchronize() to skip under DDP."
JOIN = ("hvd.join() after the loop -> Join([model]) around it: a rank out of batches shadows the others' "
        "gradient all-reduces until every rank is done. Collectives of your own inside the loop (metric "
        "all-reduces) are not shadowed: keep them out of uneven loops.")
JOIN_REMOVED = "The hvd.join() call itself: the Join context manager above ends the loop in its place."
SYNC_BATCHNORM = ("nn.SyncBatchNorm takes the same arguments (num_features, eps, momentum, affine, "
                  "track_running_stats). Both need GPU tensors: neither runs on CPU.")
ALLREDUCE_MEAN = ("hvd.allreduce averages by default; dist.all_reduce sums in place, so the helper copies, sums "
                  "and divides by the world size (the division is the step people forget). The name= is "
                  "dropped: torch.distributed matches collectives by call order, so every rank must call in the "
                  "same order.")
ALLREDUCE_OP = "A sum/min/max/product over ranks, on a copy as hvd.allreduce returns (torch reduces in place)."
ALLGATHER = ("hvd.allgather concatenates along dimension 0 and allows a different first dimension per rank; "
             "dist.all_gather needs the same shape on every rank.")
ALLGATHER_OBJECT = "The same: a list of every rank's picklable object."
BROADCAST = "A copy of the root's tensor on every rank (dist.broadcast writes in place)."
BROADCAST_OBJECT = "The same: the root rank's picklable object on every rank."
SHUTDOWN = ("destroy_process_group() ends the job, after a barrier: Gloo's worker thread can let go of the last "
            "collective's tensors after the rank has moved on, and if the interpreter is exiting by then it "
            "aborts: PyTorch's bug, which the barrier makes rare (docs/migration.md).")
END_OF_JOB = ("No hvd.shutdown(): Horovod shuts down at exit. The process group is destroyed explicitly at the "
              "end of the block that initialised it (torch warns otherwise), after a barrier.")
HOROVOD_RUN = ("horovod.run(fn, args, np=N) -> torch.multiprocessing.spawn on this host, each worker given "
               "torchrun's variables; returns each rank's result as horovod.run did. fn must be importable "
               "(spawn pickles it by name; horovod.run used cloudpickle) and the script needs an "
               "`if __name__ == '__main__':` guard.")
HELPERS = "Small functions the rewritten collectives call (each says which Horovod call it stands for)."
RANK_GUARD = "A rank-0-only block (saving, printing): the same condition on dist.get_rank()."

# needs a person
ADASUM = ("Adasum has no DDP equivalent: the migrated script averages gradients, which is a different "
          "algorithm; its loss curve is not expected to match the original.")
ELASTIC = ("Elastic Horovod (hvd.elastic.run, TorchState, state.commit()) has no DDP counterpart: use torchrun "
           "--max-restarts with checkpoints (--nnodes MIN:MAX across hosts) and resume from the last one.")
TIMELINE = "Horovod's timeline: use torch.profiler (its trace per rank) instead."
PROCESS_SETS = "Horovod process sets: dist.new_group(ranks) and pass group= to each collective."
