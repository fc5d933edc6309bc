"""What a flag of the migration says needs a person, one name each (a module of its own: the table of Horovod
names, horovod_api.py, files its categories too, and what imports it imports no other migration module)."""

from __future__ import annotations

import enum


class Category(enum.StrEnum):
    """What a flag says needs a person: the rewrite's (what has no counterpart) and the check's of the result."""

    ADASUM = "Adasum"
    ELASTIC = "elastic"
    TIMELINE = "timeline"
    PROCESS_SETS = "process sets"
    UNRECOGNISED = "unrecognised"
    MULTI_HOST = "multi-host"
    RAY = "Ray"
    LIGHTNING = "Lightning"
    SPARK = "Spark"
    SPARK_ESTIMATOR = "Spark estimator"
    # the check of the whole result (output_check.py)
    UNBOUND_NAME = "unbound name"
    SHADOWED_NAME = "shadowed name"
    HOROVOD_LEFT = "horovod left"
    MODEL_NOT_WRAPPED = "model not wrapped"
    BYPASSES_DDP = "bypasses DDP"
    DDP_BEFORE_AMP = "DDP before amp"
    MODULE_OFF_THE_WRAP = "module off the wrap"
    RANK_ONLY_COLLECTIVE = "rank-only collective"
    CPU_TENSOR_ON_NCCL = "CPU tensor on NCCL"
    UNUSED_PARAMETERS = "unused parameters"
    WRAPPER_ATTRIBUTE = "wrapper attribute"
    NOT_PYTHON = "not Python"
    CHECK_FAILED = "check failed"
    # the driver's (migrate_tree.py)
    HELPERS_UNREACHED = "helpers unreached"
    # the model and its wrapper (wrap_plan.py)
    TRAINING_FORWARD_NOT_FOUND = "training forward not found"
    WRAPPER_HANDED_ON = "wrapper handed on"
    MODEL_RE_BOUND = "model re-bound"
