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
INNER_ACCUMULATION = (
    "backward_passes_per_step=k, backward() in an inner loop and optimizer.step() after that loop: DDP "
    "all-reduces in every backward() unless it runs under model.no_sync(), Horovod once per k backward passes "
    "(or in step() when fewer ran). So every pass but the inner loop's last runs under no_sync() and the "
    "gradients summed over the passes are averaged once, in the last backward(), as Horovod averages them once. "
    "The loss scaling by the number of sub-batches stays as it was, on both sides. Exact when the loop runs at "
    "most k passes: k equal to the number of passes (the usual set-up), or fewer (a short last batch: Horovod "
    "reduces in step() then). With more than k passes the two differ: Horovod stops with an AssertionError "
    "('Gradients were computed more than backward_passes_per_step times'), DDP still syncs once, on the last "
    "pass. Equivalence needs k == the number of passes (or more).")
INNER_LOOP_RANGE = (
    "The inner loop's range is held in a variable before the loop (evaluated once, as the loop evaluated it), "
    "so the last pass is told exactly: `i == passes[-1]` for any start, stop and step (negative too), since a "
    "range's values are distinct and indexing it takes constant time.")
INNER_LOOP_ITERABLE = (
    "The inner loop iterates over mark_last(...): the same items in the same order, each with whether it is the "
    "last, so the last pass is known before its backward() without knowing the length. It reads one item ahead "
    "(each is fetched one pass earlier than before), and never turns the iterable into a list.")
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
SHUTDOWN = ("destroy_process_group() ends the job, after a barrier: it makes Gloo's abort at exit, PyTorch's "
            "bug, rare (docs/fault-tolerance.md).")
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

# Lightning: a Trainer that Horovod drove (accelerator/strategy/plugins "horovod", HorovodStrategy)
LIGHTNING_STRATEGY = (
    "Lightning 2 has no Horovod accelerator, strategy or plugin (removed in 2.0); its DDP strategy is the "
    "counterpart: DistributedDataParallel averages the gradients in backward(), as Horovod's DistributedOptimizer "
    "did under Lightning 1.x. Under torchrun Lightning reads RANK, WORLD_SIZE, LOCAL_RANK and GROUP_RANK from the "
    "environment (TorchElasticEnvironment) and starts no processes of its own, as under horovodrun; the process "
    "group's backend follows the device (Gloo on CPU, NCCL on GPUs).")
LIGHTNING_ACCELERATOR = (
    "gpus= is gone in Lightning 2. Under Horovod it meant one GPU per process (the local rank's), and no gpus= "
    "(or 0) the CPU: accelerator='gpu' or 'cpu' keeps that device kind. Lightning 2's default, 'auto', would "
    "take a GPU where the original trained on the CPU.")
LIGHTNING_DEVICES = (
    "Under torchrun Lightning takes the world from the environment and requires devices x num_nodes == "
    "WORLD_SIZE (a ValueError otherwise; devices='auto' would count this machine's GPUs, or 1 CPU): devices is "
    "the processes per node, torchrun's LOCAL_WORLD_SIZE (--nproc-per-node), and num_nodes the nodes, "
    "GROUP_WORLD_SIZE. Each process takes device LOCAL_RANK, as Horovod pinned hvd.local_rank(). Started "
    "without torchrun, both are 1: one process.")
LIGHTNING_DROPPED = ("Removed: under torchrun the devices and nodes are torchrun's (devices= and num_nodes= "
                     "above); gpus= and num_processes= no longer exist in Lightning 2.")
LIGHTNING_INIT = (
    "Removed, not dist.init_process_group(): Lightning's strategy makes the process group itself when "
    "trainer.fit() starts (from torchrun's environment, with the backend for its device) and owns it, so "
    "nothing destroys it at the end of the script either.")
LIGHTNING_SHUTDOWN = "Removed: Lightning owns the process group (see hvd.init() above)."
LIGHTNING_RANK = (
    "There is no process group before trainer.fit() (Lightning makes it), so dist.get_rank() would raise "
    "there: torchrun's variable is read instead, the same number as trainer.global_rank / trainer.world_size "
    "/ trainer.local_rank, valid before and after the Trainer exists (0, or 1 for a size, in one plain process).")
LIGHTNING_RANK_GUARD = "A rank-0-only block (saving, printing): the same condition on torchrun's RANK."
LIGHTNING_SAMPLER = (
    "The explicit num_replicas/rank stay (now torchrun's WORLD_SIZE and RANK): DistributedSampler's defaults "
    "would ask a process group that does not exist yet. Lightning keeps a DistributedSampler it is given.")
LIGHTNING_IMPORT = ("horovod.torch is gone: Lightning's strategy does the distributed work; os is imported for "
                    "torchrun's variables.")
LIGHTNING_IMPORT_CLASS = ("Lightning 2 has no HorovodStrategy/HorovodPlugin (the import would fail): removed with "
                          "its use.")
# needs a person (Lightning)
LIGHTNING_UNTRANSLATABLE = (
    "Horovod in a Lightning Trainer that is not translated (HorovodStrategy(...) with arguments, a plugin or "
    "strategy of the script's own, or another Horovod argument): Lightning 2 has no Horovod strategy. Use "
    "strategy='ddp' (or DDPStrategy(...)), accelerator='cpu'/'gpu', devices=int(os.environ['LOCAL_WORLD_SIZE']), "
    "num_nodes=int(os.environ['GROUP_WORLD_SIZE']) under torchrun (docs/migration.md).")
LIGHTNING_HOROVOD_CLASS = ("Lightning's HorovodStrategy/HorovodPlugin used other than as a Trainer's strategy= or "
                           "plugins=: Lightning 2 has none; port it to DDPStrategy by hand.")
LIGHTNING_SUBCLASS = ("A subclass of Lightning's Horovod strategy: Lightning 2 has no Horovod strategy; port it to "
                      "DDPStrategy by hand and give it as the Trainer's strategy=.")
LIGHTNING_HOROVOD_STRING = (
    "The string 'horovod' outside a Trainer argument that was rewritten: if it selects Lightning's Horovod "
    "accelerator or strategy (e.g. through a dict of Trainer arguments), use 'ddp' as in the Trainer above.")
LIGHTNING_WRAPS = ("In a Lightning script the strategy wraps the model in DDP and averages the gradients: "
                   "remove this Horovod wrapping/broadcast by hand (Lightning broadcasts rank 0's weights itself).")
