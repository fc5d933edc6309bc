"""How a Horovod script is launched by its users: under horovodrun ("cli") or by itself through horovod.run
("api"). Horovod's own examples call horovod.run only when an argument asks for it (`if args.num_proc:
horovod.run(main, np=args.num_proc) else: main(args)`), so a script that contains horovod.run is a horovodrun
script unless the arguments given select horovod.run. Decided from what the migration read of the script
(compare/migrate/plan/launch_facts.py) and the arguments.
A job that Ray starts (horovod.ray's RayExecutor, Ray Train's HorovodTrainer) is "api" too: its driver starts
a local Ray and the workers.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from compare.migrate.plan.launch_facts import LaunchFacts
from compare.names import LaunchedBy
from compare.verify.spark_launch import SparkMissing, spark_launch


@dataclass(frozen=True)
class LaunchMode:
    mode: LaunchedBy
    why: str        # for the screen: how it was decided
    option: str | None = None  # the option that selects horovod.run (or sets Ray's workers), when there is one
    sides: tuple[str, str] | None = None  # what starts each side's workers, when it is not horovod.run / spawn
    original_prefix: tuple[str, ...] = ()  # put before the original script in its command (a front-end's stand-in)


class Undecided(Exception):
    """The arguments cannot tell the mode: ask for --launch-mode (one line)."""


RAY_SIDES = {
    "RayExecutor": ("python (Horovod's RayExecutor on a local Ray)",
                    "python (Ray Train's TorchTrainer on a local Ray)"),
    "HorovodTrainer": ("python (Ray Train's HorovodTrainer, Train V1: RAY_TRAIN_V2_ENABLED=0, on a local Ray)",
                       "python (Ray Train's TorchTrainer on a local Ray)"),
}


# HorovodTrainer exists only on Ray Train V1: the original runs as `python -c TRAIN_V1 SCRIPT ARGS...`, with V1
# chosen before Ray is imported (its workers inherit the driver's environment).
TRAIN_V1 = ("import os, runpy, sys; os.environ['RAY_TRAIN_V2_ENABLED'] = '0'; sys.argv = sys.argv[1:]; "
            "runpy.run_path(sys.argv[0], run_name='__main__')")


def _ray_mode(facts: LaunchFacts) -> LaunchMode | None:
    """A job that Ray starts (horovod.ray's RayExecutor, Ray Train's HorovodTrainer) runs as plain python on both
    sides: the driver starts a local Ray and its workers. The option behind num_workers=args.X, if any, is named."""
    front = facts.ray_front_end
    if front is None:
        return None
    if importlib.util.find_spec("ray") is None:
        raise Undecided("--verify of a job that Ray starts needs Ray Train here: pip install 'ray[train]' "
                        "(the project's ray extra)")
    flags = [flag for dest in facts.ray_workers for flag in facts.options.get(dest, ())]
    return LaunchMode(LaunchedBy.API, f"the script starts its workers through Ray ({front}): plain python on both "
                                      "sides, each starting a local Ray", flags[0] if flags else None,
                      RAY_SIDES[front], ("-c", TRAIN_V1) if front == "HorovodTrainer" else ())


def decide(facts: LaunchFacts, script_args: list[str], requested: str = "auto") -> LaunchMode:
    """The launch mode for these arguments, from what the migration read of the script (launch_facts.py).
    Raises Undecided where only --launch-mode can tell."""
    try:  # a job that Spark starts runs as `python SCRIPT` on both sides (compare/verify/spark_launch.py)
        spark = spark_launch(facts)
    except SparkMissing as exc:
        raise Undecided(str(exc)) from None
    if spark is not None:
        if requested == LaunchedBy.CLI:
            raise Undecided(f"the script starts its job through {spark.front_end}, not under horovodrun: leave "
                            "--launch-mode at auto")
        return LaunchMode(LaunchedBy.API, spark.why, sides=spark.sides, original_prefix=spark.original_prefix)
    if requested != "auto":
        chosen = LaunchedBy(requested)
        try:
            found = decide(facts, script_args)
        except Undecided:
            found = LaunchMode(chosen, "")
        return LaunchMode(chosen, f"--launch-mode {chosen}", found.option,
                          found.sides if chosen is found.mode else None)
    ray = _ray_mode(facts)
    if ray is not None:
        return ray
    if not facts.horovod_runs:
        return LaunchMode(LaunchedBy.CLI, "the script does not call horovod.run: horovodrun starts its workers")
    site = facts.horovod_runs[0]
    if not site.line:
        return LaunchMode(LaunchedBy.API, "the script always starts its workers with horovod.run")
    if site.condition is None or site.condition[0] not in facts.options:
        raise Undecided(f"the script calls horovod.run under a condition that names no argument (line "
                        f"{site.line}): give --launch-mode cli (horovodrun) or api (horovod.run)")
    dest, positive = site.condition
    flags = facts.options[dest]
    given = any(word == flag or word.startswith(flag + "=") for word in script_args for flag in flags)
    shown = flags[0]
    if given == (positive == site.in_body):
        return LaunchMode(LaunchedBy.API, f"the script starts its workers with horovod.run when {shown} is given, "
                                 "and it is", shown)
    return LaunchMode(LaunchedBy.CLI, f"the script calls horovod.run only with {shown}, which is not given: it is a "
                             "horovodrun script", shown)
