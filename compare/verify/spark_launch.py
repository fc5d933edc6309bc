"""How --verify launches a Horovod script that Spark starts (horovod.spark.run, Databricks' sparkdl.HorovodRunner):
decided from what the migration read of the script (compare/migrate/plan/launch_facts.py), as
compare/verify/launch_mode.py decides horovod.run.

Both sides run as `python SCRIPT` (the script makes its SparkSession and starts the job): the original through its
own front-end where that works here, the migration through TorchDistributor. horovod.spark.run works here
(Horovod 0.28.1 under pyspark); sparkdl does not install outside Databricks, so a HorovodRunner script's original
runs through a stand-in HorovodRunner (compare/verify/sparkdl_standin/) that does what HorovodRunner does with
the training function: pickle it and run it in |np| Horovod processes, here under horovodrun.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

from compare.migrate.plan.launch_facts import LaunchFacts
from compare.migrate.read.horovod_api import SPARK_RUN

STANDIN_RUNNER = Path(__file__).resolve().parent / "sparkdl_standin" / "run_original.py"


@dataclass(frozen=True)
class SparkLaunch:
    front_end: str                     # SPARK_RUN or SPARK_RUNNER
    sides: tuple[str, str]             # what each side runs under, for the screen
    why: str
    original_prefix: tuple[str, ...]   # put before the original script in its command (the stand-in's runner)


class SparkMissing(Exception):
    """--verify of a Spark script needs pyspark here (one line)."""


def spark_launch(facts: LaunchFacts) -> SparkLaunch | None:
    """How each side of a Spark script runs, or None for a script that Spark does not start.
    Raises SparkMissing where pyspark is not installed: neither side could run."""
    found = facts.spark_front_end
    if found is None:
        return None
    if importlib.util.find_spec("pyspark") is None:
        raise SparkMissing(f"the script starts its job through {found}, and pyspark is not installed here: --verify "
                           "runs both sides on a local Spark (pip install -e '.[spark]'; pyspark 4 needs Java 17)")
    migrated = "python (TorchDistributor)"
    if found == SPARK_RUN:
        return SparkLaunch(found, ("python (horovod.spark.run)", migrated),
                           "the script starts its job through horovod.spark.run (Horovod's Spark runner, which runs "
                           "here): both sides run as `python SCRIPT`, the migration through TorchDistributor", ())
    if importlib.util.find_spec("sparkdl") is not None:
        return SparkLaunch(found, ("python (sparkdl.HorovodRunner)", migrated),
                           "the script starts its job through sparkdl.HorovodRunner: both sides run as `python "
                           "SCRIPT`, the migration through TorchDistributor", ())
    return SparkLaunch(found, ("horovodrun (the training function HorovodRunner runs)", migrated),
                       "sparkdl (Databricks' HorovodRunner) is not installed here, so the original's training function "
                       f"runs under horovodrun -np {facts.spark_processes} --gloo, as HorovodRunner(np=...).run(main, "
                       "**kwargs) would run "
                       "it (a stand-in HorovodRunner pickles it and starts horovodrun; the rest of the script runs as "
                       "`python SCRIPT`); the migration runs through TorchDistributor",
                       (str(STANDIN_RUNNER),))
