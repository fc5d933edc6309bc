"""The semantic note of each rewrite: why the DDP form is equivalent, or in what it is not.

docs/migration.md's mapping table carries the same notes.
"""

IMPORT = "torch.distributed replaces horovod.torch; DDP and the hooks are imported where they are used."
IMPORT_KEPT = ("horovod.torch stays imported: a Horovod use that needs a person remains (see the list below); "
               "torch.distributed is added.")
MODULE_PASSED_ON = ("The Horovod module itself was handed on here (returned, passed to a function of this file, or "
                    "received by one): torch.distributed is handed on in its place, and the code that receives it "
                    "is migrated with the rest. A caller outside the repository that expects Horovod's API gets "
                    "torch.distributed's.")
IMPORT_UNUSED = ("Removed: nothing left in this file uses Horovod's module or torch.distributed (its uses became DDP, "
                 "a helper or nothing); DDP and the hooks are imported where they are used.")
IMPORT_HOROVOD = "The horovod package was only used for horovod.run, now torch.multiprocessing.spawn."
INIT = ("init_process_group() reads torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR/PORT). No backend "
        "named: torch takes the machine's accelerator's, NCCL on GPUs (CUDA tensors alone) and Gloo on CPU. Horovod "
        "served CPU tensors on GPU jobs too: the collective helpers added here move those to the GPU and back. "
        "Under `if not dist.is_initialized():`: hvd.init() may run twice (a wrapper's init() and a trainer's), "
        "init_process_group() raises the second time.")
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
# Horovod's zero-gradient step (compare/migrate/plan/zero_step.py says when it matters; tests/test_migrate_zero_step.py
# shows each case under horovodrun and torchrun)
BROADCAST_OPTIMIZER_STATE_FRESH = (
    "Dropped: the optimizer is never loaded, so every rank's fresh optimizer is already the same. Horovod's "
    "broadcast_optimizer_state ran one step() with zero gradients on it (to create the state it broadcast); here "
    "that changes nothing: {why}.")
ZERO_GRADIENT_STEP = (
    "The optimizer is never loaded, so every rank's is already the same, but Horovod's broadcast_optimizer_state "
    "ran one step() with zero gradients on it (to create the state it broadcast), and here that changes "
    "training: {why}. horovod_zero_gradient_step runs the same step (keep_state={keep}: {kept}), so the result "
    "trains as the original did; delete the line to start from the untouched parameters and a fresh optimizer "
    "(DDP's usual start), and the first updates then differ from Horovod's.")
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
            "and averages gradients in every backward() of what its forward computed. It is bound to a name of its "
            "own: the model keeps its name, class and state-dict keys, so saving, loading, an EMA, its attributes "
            "and evaluation use the model as before (no .module), and only the training step's forward goes "
            "through the wrapper.")
TRAIN_THROUGH_WRAPPER = ("The training step's forward (its result is back-propagated) goes through the DDP wrapper: "
                         "DDP's reducer is armed by its own forward, so the backward() of this result averages the "
                         "gradients over the ranks, as Horovod's DistributedOptimizer did.")
COMPRESSION_CARRIED = ("compression= is read where the DistributedOptimizer was made, and kept on the object: the DDP "
                       "wrapper is made in another method, where that argument is not bound, and registers it as its "
                       "communication hook there.")
WRAPPER_UNWRAPPED_PATH = ("The model is wrapped in DDP under this condition only: on the other path the name of the "
                          "wrapper is the model itself, so the training step trains it as before.")
WRAPPER_HANDED = ("This function trains the model it receives (a forward whose result is back-propagated): it gets "
                  "the DDP wrapper, so its backward() averages the gradients over the ranks.")
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
# Where each collective helper runs: part of every collective's note.
_DEVICE = ("Device: Horovod reduced CPU and GPU tensors alike. The process group this migration makes names no "
           "backend, and torch then serves only the machine's accelerator: NCCL, CUDA tensors alone, on GPUs "
           "(torch 2.11 on an H200: 'No backend type associated with device type cpu'), Gloo on CPU. So the "
           "helper does not assume the device: under a group with no CPU backend (dist.get_backend_config() "
           "without 'cpu:') it moves a CPU tensor to this rank's GPU and back.")
ALLREDUCE_MEAN = ("hvd.allreduce averages by default; dist.all_reduce sums in place, so the helper copies, sums "
                  "and divides by the world size (the division is the step people forget). The name= is "
                  "dropped: torch.distributed matches collectives by call order, so every rank must call in the "
                  "same order. " + _DEVICE)
ALLREDUCE_OP = ("A sum/min/max/product over ranks (average=False: a sum, as Horovod reads it), on a copy as "
                "hvd.allreduce returns (torch reduces in place). " + _DEVICE)
ALLGATHER = (
    "hvd.allgather concatenates along dimension 0 and allows a different first dimension per rank; dist.all_gather "
    "needs the same shape on every rank. That precondition is removed, not assumed: the helper gathers the "
    "lengths, pads each tensor to the longest, gathers and trims, so uneven last batches, per-sample results and "
    "pickled buffers give Horovod's result. Gradients: Horovod's allgather passes them back, averaged over the "
    "ranks (HorovodAllgather.backward); the helper's autograd function does the same (torch.distributed.nn's "
    "all_gather would sum them: world-size times larger). It is used for every allgather: where no gradient is "
    "wanted (no_grad, a tensor without requires_grad) autograd records nothing, so nothing needs proving about "
    "requires_grad. As under Horovod, every rank must run the backward that passes through it. " + _DEVICE)
ALLGATHER_OBJECT = "The same: a list of every rank's picklable object."
BROADCAST = "A copy of the root's tensor on every rank (dist.broadcast writes in place). " + _DEVICE
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

# Ray: horovod.ray's RayExecutor, Ray Train's HorovodTrainer -> Ray Train's TorchTrainer
RAY_RUN = (
    "RayExecutor.run(fn, args, kwargs) -> TorchTrainer(...).fit(): Ray Train starts the workers, makes the torch "
    "process group (TorchConfig's backend: gloo on CPU, nccl with use_gpu) and runs the loop on each. Its loop "
    "takes one config argument, so the added train_loop_calling(fn) calls fn(*config['args'], **config['kwargs']) "
    "and reports what it returns with ray.train.report. run() returned a list, every worker's value; fit() "
    "returns one ray.train.Result, whose .metrics are rank 0's last report (fn's value under 'return').")
RAY_RESULT = ("run()'s list held each worker's value, rank 0's first; fit()'s Result holds rank 0's report: "
              "results.metrics['return'] is what rank 0's fn returned.")
RAY_EXECUTOR = ("Removed: the executor's workers and resources are TorchTrainer's ScalingConfig (num_workers, "
                "use_gpu, resources_per_worker={'CPU': cpus_per_worker, 'GPU': gpus_per_worker}), given where run() "
                "was.")
RAY_EXECUTOR_DROPPED = ("settings (Horovod's rendezvous and ssh settings) and use_current_placement_group have no "
                        "TorchTrainer counterpart: Ray Train places its workers in a placement group of its own.")
RAY_SETTINGS = "Removed: Horovod's rendezvous settings; TorchTrainer needs none (TorchConfig has the group's timeout)."
RAY_START = "Removed: TorchTrainer.fit() starts its workers itself."
RAY_SHUTDOWN = "Removed: TorchTrainer.fit() stops its workers when the loop returns."
RAY_INIT = ("Removed, not dist.init_process_group(): Ray Train makes the process group on every worker before the "
            "training function runs (a second one would raise), and destroys it after.")
RAY_HVD_SHUTDOWN = "Removed: Ray Train owns the process group (see hvd.init() above)."
RAY_RANK = ("From Ray Train's context (ray.train.get_context()): the same numbers as Horovod's on Ray's workers; "
            "the process group is Ray Train's, so dist.get_rank() would give them too.")
RAY_WRAP = ("ray.train.torch.prepare_model moves the model to the worker's device and wraps it in "
            "DistributedDataParallel (when there is more than one worker), where Horovod's state was in place: DDP "
            "broadcasts rank 0's parameters and buffers and averages the gradients in every backward().")
RAY_TRAINER = ("Ray Train's HorovodTrainer (deprecated, and raising as soon as it is built on Train V2) -> "
               "TorchTrainer: the same arguments but horovod_config, which becomes torch_config. The training "
               "function gets the same config, context and reporting; on Train V2 the Result's metrics are those "
               "of the last report made with a checkpoint (None without one).")
RAY_TORCH_CONFIG = ("horovod_config -> torch_config=TorchConfig(): the backend follows the ScalingConfig (gloo on "
                    "CPU, nccl with use_gpu). HorovodConfig's own settings (nics, ssh, key, the rendezvous "
                    "timeout_s) have no torch counterpart and are dropped; TorchConfig(timeout_s=...) is the "
                    "collectives' timeout (1800 s).")
RAY_IMPORT = "The front-end's import: TorchTrainer, TorchConfig and ScalingConfig are imported where they are used."
# needs a person (Ray)
RAY_ELASTIC = (
    "Elastic Horovod on Ray (ElasticRayExecutor, min_workers/max_workers, hvd.elastic.run, TorchState, "
    "state.commit()) has no TorchTrainer counterpart that resizes a running job: save a checkpoint with "
    "ray.train.report(metrics, checkpoint=ray.train.Checkpoint.from_directory(...)), resume from "
    "ray.train.get_checkpoint() at the start of the training function, and give TorchTrainer "
    "run_config=ray.train.RunConfig(failure_config=ray.train.FailureConfig(max_failures=N)) with a fixed "
    "ScalingConfig(num_workers=...); Ray restarts the failed group from the last checkpoint.")
RAY_NUM_HOSTS = ("RayExecutor(num_hosts=, num_workers_per_host=): TorchTrainer has no per-host layout; give "
                 "ScalingConfig(num_workers=hosts x workers per host) (placement_strategy='PACK', the default, "
                 "keeps them together) by hand.")
RAY_EXECUTOR_SHAPE = ("RayExecutor(...) other than as `executor = RayExecutor(settings, num_workers=..., ...)`: "
                      "rewrite it as TorchTrainer(..., scaling_config=ScalingConfig(...)).fit() by hand.")
RAY_EXECUTOR_SCOPE = ("The executor is used in another function than the one that makes it (or before it): "
                      "rewrite it as TorchTrainer(...).fit() where run() is, by hand.")
RAY_EXECUTOR_METHOD = ("An executor method with no TorchTrainer counterpart (execute, run_remote, execute_single, "
                       "run(callbacks=...), start(...) with arguments): rewrite it by hand; per-worker environment "
                       "goes in ray.init(runtime_env={'env_vars': ...}), values for the driver in ray.train.report.")
RAY_HOROVOD_CONFIG_VALUE = ("horovod_config= other than HorovodConfig(...): give torch_config=TorchConfig() (and "
                            "drop the HorovodConfig) by hand.")
RAY_TRAINER_UNKNOWN = "HorovodTrainer with arguments TorchTrainer does not take: rewrite it by hand."
RAY_HOROVOD_ENVIRONMENT = ("Horovod's environment variable: Ray Train sets none of HOROVOD_*; use "
                           "ray.train.get_context() (get_world_rank(), get_world_size(), get_local_rank()...).")

# Spark: horovod.spark.run, Databricks' sparkdl.HorovodRunner -> pyspark.ml.torch.distributor.TorchDistributor
SPARK_RUN = (
    "horovod.spark.run(fn, args, kwargs, num_proc=N) -> TorchDistributor(num_processes=N, local_mode=False, "
    "use_gpu=...).run(fn, *args, **kwargs): N processes in Spark barrier tasks on the executors, as horovod.spark.run "
    "ran its N Horovod workers in N Spark tasks. Each task starts torchrun, which sets RANK, WORLD_SIZE and "
    "MASTER_ADDR/PORT for the function's init_process_group(); fn is pickled with cloudpickle, as Horovod pickled it. "
    "The output of every process is streamed to the driver.")
SPARK_RUN_RESULT = ("horovod.spark.run returned a list, every rank's return value (rank 0's first); "
                    "TorchDistributor.run returns rank 0's alone: the [0] goes.")
SPARK_RUN_RESULT_NAME = ("The result is now rank 0's return value, not the list of every rank's "
                         "(TorchDistributor.run returns rank 0's alone): its uses other than [0] see rank 0's value.")
SPARK_NUM_PROC_DEFAULT = ("No num_proc: horovod.spark.run took spark.sparkContext.defaultParallelism (the task slots); "
                          "TorchDistributor's default is 1, so that number is given.")
SPARK_DROPPED = ("use_gloo / use_mpi / verbose chose Horovod's controller and its log level: TorchDistributor's "
                 "torchrun needs neither (the function's init_process_group() chooses the backend).")
SPARK_GPU_OFF = ("use_gpu=False: the training function never uses CUDA. (TorchDistributor's default, use_gpu=True, "
                 "needs GPUs configured in Spark; with False each process sees no GPU: CUDA_VISIBLE_DEVICES is "
                 "emptied.)")
SPARK_GPU_ON = ("use_gpu=True: the training function uses CUDA. TorchDistributor gives each process its own GPU "
                "(CUDA_VISIBLE_DEVICES); it needs spark.task.resource.gpu.amount (on the workers) or "
                "spark.driver.resource.gpu.amount (local_mode) set, as GPU clusters set them.")
HOROVOD_RUNNER = (
    "HorovodRunner(np=N) -> TorchDistributor(num_processes=|N|, local_mode=N < 0, use_gpu=...): np < 0 ran -np "
    "processes on the driver (local_mode=True), np > 0 ran np Spark tasks on the workers (local_mode=False). "
    ".run(main, **kwargs) is called the same way; inside main, torchrun's variables serve init_process_group().")
SPARK_LOCAL_RESULT = (
    "What run() returns: HorovodRunner gave rank 0's return value; TorchDistributor with local_mode=True (and with "
    "more than one process per Spark task) has every process write its value to the same file, so the driver gets "
    "the value of whichever finished last (pyspark 4.3). Where the driver uses it, return the same value on every "
    "rank: weights (the same on every rank after DDP's averaging), or rank 0's value sent to all with "
    "dist.broadcast_object_list before the function destroys its process group.")
HOROVOD_RUNNER_EXPRESSION = (
    "np is an expression: num_processes=abs(np), local_mode=np < 0 read it as HorovodRunner did. np == 0 (every "
    "task slot of the cluster) has no counterpart: TorchDistributor raises (num_processes must be positive).")
RUNNER_NP_BOUND = (
    "np is an expression: it is read once, into {name} (a new name) just before the statement, so that "
    "num_processes=abs({name}) and local_mode={name} < 0 see one value, as HorovodRunner read np once. np == 0 has no "
    "counterpart: TorchDistributor raises (num_processes must be positive).")
RUNNER_VERBOSITY = ("driver_log_verbosity dropped: TorchDistributor streams every process's output to the driver "
                    "(local_mode: its stdout; on the workers: the driver's stderr).")
SPARK_IMPORT = ("TorchDistributor (pyspark.ml.torch.distributor, Spark 3.4+) replaces Horovod's Spark runner "
                "(horovod.spark.run) and Databricks' HorovodRunner (sparkdl, not in Databricks Runtime ML since 16.0).")
SPARK_IMPORT_REMOVED = "The front-end's import: TorchDistributor is imported where the first one was."
# needs a person (Spark)
SPARK_ESTIMATOR = (
    "horovod.spark's estimator API (TorchEstimator, KerasEstimator, LightningEstimator, their Store and backend) has "
    "no TorchDistributor counterpart. Write the estimator's training out as a function: dist.init_process_group(); "
    "this rank's shard of the data (write the DataFrame to Parquet on shared storage, df.write.parquet(path), and "
    "read it in the function with a DistributedSampler over it); the model wrapped in DDP, the optimizer, loss, "
    "epochs, batch size and validation split the estimator was given; checkpoints to a shared path instead of the "
    "Store; rank 0's state_dict returned. Run it with TorchDistributor(num_processes=N, local_mode=False, "
    "use_gpu=...).run(fn, ...), load the returned state_dict into the model on the driver, and predict with a "
    "pandas UDF (mapInPandas) instead of the estimator model's transform().")
SPARK_ELASTIC = ("horovod.spark.run_elastic: TorchDistributor has no elastic mode (its barrier stage runs all its "
                 "tasks or none): checkpoint in the training function, resume from the last checkpoint when the job "
                 "is rerun, and run it with TorchDistributor(num_processes=N, local_mode=False).run(fn).")
SPARK_OPTION = "horovod.spark.run({option}=...) has no TorchDistributor counterpart: {what}."
SPARK_RESULT_LIST = ("TorchDistributor.run returns rank 0's value alone, where horovod.spark.run returned every "
                     "rank's: gather what the other ranks computed on rank 0 (dist.all_gather_object inside the "
                     "function) and return it from there.")
RUNNER_NP_ZERO = ("HorovodRunner(np=0) took every task slot of the cluster; TorchDistributor needs the number: "
                  "TorchDistributor(num_processes=<the slots>, local_mode=False, use_gpu=...).")
RUNNER_SHAPE = ("HorovodRunner used other than as HorovodRunner(np=...) and its .run(main, **kwargs), or np is an "
                "expression that cannot be read once before its statement (inside a lambda, a comprehension, a "
                "condition, a compound statement's header, after another statement on its line, or beside "
                "another HorovodRunner whose np is bound): write "
                "TorchDistributor(num_processes=..., local_mode=..., use_gpu=...).run(main, **kwargs) by hand.")
SPARK_RUN_SHAPE = ("horovod.spark.run used other than as a call (or without the training function): write "
                   "TorchDistributor(num_processes=N, local_mode=False, use_gpu=...).run(fn, *args, **kwargs) by hand.")
SPARK_UNRECOGNISED = ("Not migrated (only horovod.spark.run and sparkdl.HorovodRunner are): use TorchDistributor "
                      "(docs/migration.md, \"Spark and Databricks\").")
RAY_HOROVOD_IMPORT = ("horovod.torch is gone: Ray Train makes the process group and prepare_model wraps the model; "
                      "torch.distributed is imported only where a collective needs it.")

STEP_HOOK_OPTIMIZER = (
    "No DistributedDataParallel can be made here that the caller trains through (the model is a function's "
    "argument, or not named), so the optimizer keeps Horovod's meaning another way: before each step() it sums "
    "every gradient over the ranks and divides by their number (op=hvd.Sum: no division), as hvd.Distributed"
    "Optimizer did. It trains the same; it is slower than DDP, which overlaps the communication with backward(): "
    "for speed, wrap the model in DistributedDataParallel where it is built and drop this line.")
STEP_HOOK_COMPRESSION = ("compression= goes with it: where it is fp16_compress_hook (hvd.Compression.fp16), each "
                         "gradient travels as float16, summed and divided there as Horovod's, and is cast back.")
SPENT_CONSTANT = ("This constant only named the Horovod module a loader imported; the loader is migrated, and "
                  "nothing else reads it.")
HOROVOD_NAME_KEPT = ("The name \"horovod\" is kept where a user chooses it (a backend's or a registry's key, a "
                     "command-line choice): it now selects the migrated, torch.distributed code. Rename it when "
                     "your users are told.")
# Collectives that keep their meaning (issue 42, classes 1, 2, 3, 7): each note says the precondition and how it holds
ALLREDUCE_AT_RUN_TIME = (
    "The reduction is a variable (a wrapper's `average=average` or `op=op`): all_reduce_average_or_op resolves it "
    "at run time as Horovod did (op if given, else average=False a sum, else the mean; both given: ValueError). "
    "Precondition: op is a reduction named in this script (hvd.Sum ... are dist.ReduceOp values now, "
    "hvd.Average is dist.ReduceOp.AVG): holds, every hvd reduction name was rewritten; hvd.Adasum is flagged.")
REDUCTION_NAME = ("A Horovod reduction named outside an allreduce call (a default or an argument that reaches one): "
                  "the dist.ReduceOp value that all_reduce_average_or_op reads as Horovod's op (AVG: the mean).")
# Issue 42: the rewrites whose preconditions the migration proves or states (docs/migration.md, "Models and
# barriers: what each rewrite needs").
DDP_AFTER_AMP = ("Wrapped after apex's amp.initialize, not where Horovod's state was in place: amp.initialize "
                 "raises on a model already in DistributedDataParallel (apex's documented order).")
FIND_UNUSED = ("find_unused_parameters=True, because {why}: some parameters may get no gradient in a step, which "
               "DDP otherwise waits for (an error at the next step). Not the same in one way: Horovod's optimizer "
               "gave a parameter no rank used a zero gradient (so momentum and weight decay still moved it), where "
               "DDP leaves its .grad None and the optimizer skips it.")
BROADCAST_OTHER_MODEL = ("Kept as a broadcast: `{name}` is not the model wrapped in DDP (an EMA copy, a teacher), "
                         "so nothing else makes its parameters equal on every rank.")
PROBE = ("The Horovod probe asked whether this could run as a Horovod job; now the question is whether torchrun "
         "started it (WORLD_SIZE set, torch.distributed available): its names are bound to torch.distributed "
         "there, and the fallback (the single-process path, `python train.py ...`) runs otherwise, as it did "
         "where Horovod was absent. Under Horovod a plain `python train.py` ran as a job of one; here it runs "
         "the fallback, which trains the same single process.")
OWN_PATH_DIFFERS = ("Kept as it was, and not the route of the Horovod option: {why}. The Horovod branch beside it is "
                    "migrated in place instead, so the switch's Horovod value (and a default of horovod) runs that "
                    "branch under torchrun and trains as Horovod did.")
SWITCH_ROUTED = ("The Horovod option (or a default of horovod) now takes the repository's own torch.distributed path, "
                 "right after the arguments are parsed: the README's command and the default still start a "
                 "distributed run, launched with torchrun.")
