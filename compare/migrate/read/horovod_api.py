"""The Horovod names the rewrite knows: what each becomes, and which need a person."""

from __future__ import annotations

from compare.migrate.read import notes
from compare.migrate.read.flag_category import Category


def is_horovod_module(name: str | None) -> bool:
    """`horovod` or one of its modules: not the repository's own `horovod_backend` (nor `.horovod_backend`)."""
    return name == "horovod" or (name or "").startswith("horovod.")


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
# hvd.init() as a statement of its own: a second init_process_group() raises, a second hvd.init() did not
INIT_GUARD = "if not dist.is_initialized():"
NEEDS_OS = {"local_rank", "local_size", "cross_rank", "cross_size"}
REDUCE_OPS = {"Sum": "SUM", "Min": "MIN", "Max": "MAX", "Product": "PRODUCT"}
# hvd.Sum ... named outside an allreduce: the values all_reduce_average_or_op reads (AVG stands for Average)
REDUCTIONS = {"Average": "dist.ReduceOp.AVG", **{name: f"dist.ReduceOp.{op}" for name, op in REDUCE_OPS.items()}}
# Horovod names that need a person, by category
NEEDS_A_PERSON = {
    "Adasum": (Category.ADASUM, notes.ADASUM),
    "elastic": (Category.ELASTIC, notes.ELASTIC),
    "start_timeline": (Category.TIMELINE, notes.TIMELINE),
    "stop_timeline": (Category.TIMELINE, notes.TIMELINE),
    "ProcessSet": (Category.PROCESS_SETS, notes.PROCESS_SETS),
    "add_process_set": (Category.PROCESS_SETS, notes.PROCESS_SETS),
    "remove_process_set": (Category.PROCESS_SETS, notes.PROCESS_SETS),
    "global_process_set": (Category.PROCESS_SETS, notes.PROCESS_SETS),
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
           "allgather_object", "broadcast_object", "broadcast_parameters", *REDUCTIONS, "broadcast_optimizer_state",
           "DistributedOptimizer", "join", "SyncBatchNorm", "Compression.fp16", "Compression.none"}
# Ray: a Horovod job that Ray starts (horovod.ray's executors, Ray Train's HorovodTrainer) -> Ray Train's TorchTrainer
RAY_FRONT_ENDS = {"horovod.ray", "ray.train.horovod"}
RAY_EXECUTOR_ARGS = ("settings", "num_workers", "num_hosts", "num_workers_per_host", "cpus_per_worker", "use_gpu",
                     "gpus_per_worker", "use_current_placement_group", "min_workers", "max_workers", "reset_limit",
                     "cooldown_range", "elastic_timeout", "override_discovery")  # RayExecutor's, in its order
RAY_EXECUTOR_ELASTIC = {"min_workers", "max_workers", "reset_limit", "cooldown_range", "elastic_timeout",
                        "override_discovery"}
RAY_EXECUTOR_DROPPED = {"settings", "use_current_placement_group"}  # no TorchTrainer counterpart, none needed
RAY_TRAINER_KEYWORDS = {"train_loop_per_worker", "train_loop_config", "horovod_config", "scaling_config",
                        "run_config", "datasets", "dataset_config", "metadata", "resume_from_checkpoint"}
# In a Ray Train worker: the train context (Ray Train sets torchrun's variables too, but only on Train V2)
RAY_CALLS = {
    "rank": "ray.train.get_context().get_world_rank()",
    "size": "ray.train.get_context().get_world_size()",
    "local_rank": "ray.train.get_context().get_local_rank()",
    "local_size": "ray.train.get_context().get_local_world_size()",
    "cross_rank": "ray.train.get_context().get_node_rank()",
    "cross_size": "ray.train.get_context().get_world_size() // ray.train.get_context().get_local_world_size()",
}
HOROVOD_ENVIRONMENT = {"HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE",
                       "HOROVOD_CROSS_RANK", "HOROVOD_CROSS_SIZE"}
# Spark: a Horovod job that Spark starts (horovod.spark.run, Databricks' sparkdl.HorovodRunner) -> TorchDistributor
SPARK_RUN = "horovod.spark.run"
SPARK_RUNNER = "sparkdl.HorovodRunner"
SPARK_DISTRIBUTOR = ("pyspark.ml.torch.distributor", "TorchDistributor")
SPARK_RUN_ARGS = ("fn", "args", "kwargs", "num_proc", "start_timeout", "use_mpi", "use_gloo", "extra_mpi_args",
                  "env", "stdout", "stderr", "verbose", "nics", "prefix_output_with_timestamp", "executable")
SPARK_RUN_DROPPED = {"use_mpi", "use_gloo", "verbose"}  # Horovod's controller and log level: torchrun needs neither
# horovod.spark.run options with no TorchDistributor counterpart, and what to do instead
SPARK_RUN_NO_EQUIVALENT = {
    "start_timeout": "TorchDistributor has no start timeout (its barrier stage waits for the task slots): remove it",
    "extra_mpi_args": "there is no MPI under TorchDistributor (torchrun): remove them",
    "env": "set the variables in os.environ at the top of the training function",
    "stdout": "TorchDistributor streams the processes' output to the driver's stdout/stderr: capture it there",
    "stderr": "TorchDistributor streams the processes' output to the driver's stdout/stderr: capture it there",
    "nics": "set GLOO_SOCKET_IFNAME (or NCCL_SOCKET_IFNAME) in os.environ at the top of the training function",
    "prefix_output_with_timestamp": "print timestamps from the training function",
    "executable": "TorchDistributor runs the driver's / workers' own Python (spark.pyspark.python): remove it",
}
# horovod.spark's estimator API (TorchEstimator, KerasEstimator, Store, SparkBackend ...): no counterpart
SPARK_ESTIMATOR_MODULES = ("horovod.spark.torch", "horovod.spark.keras", "horovod.spark.lightning",
                           "horovod.spark.common", "horovod.spark.tensorflow")
