"""What `compare bench` measures and how much of it: its parts and settings, full and --quick (light: the option
table, compare/commands/options.py, shows these defaults in --help without importing the bench)."""

from __future__ import annotations

from dataclasses import dataclass

PARTS = ("allreduce", "sweep", "overhead", "costs", "e2e")


@dataclass(frozen=True)
class Settings:
    workload: str = "mlp"
    batch_size: int = 32
    threads: int = 1
    world_sizes: tuple[int, ...] = (1, 2)
    steps: int = 200  # optimizer steps per overhead launch
    warmup: int = 10  # steps dropped from the front of each overhead launch
    rounds: int = 2  # interleaved rounds of the overhead launches
    block_rounds: int = 6  # in a bare overhead launch: bare and project blocks, interleaved
    sweep_steps: int = 40  # timed steps per block in the in-process sweeps
    sweep_rounds: int = 4
    horovod_rounds: int = 2  # interleaved rounds of Horovod's sweep launches (one per configuration)
    sizes: tuple[int, ...] = tuple(4096 * 4**i for i in range(8))  # 4 KiB ... 64 MiB
    allreduce_min_time: float = 0.25
    cost_steps: int = 50
    cost_rounds: int = 16
    full_sweep: bool = True  # False: the defaults and the probes only
    confirm_tuned: bool = True  # run the tuned configurations through the real implementations
    timeout: float | None = None  # --timeout's, always (settings_from)
    parts: tuple[str, ...] = PARTS


QUICK = Settings(world_sizes=(2,), steps=30, warmup=5, rounds=1, block_rounds=2, sweep_steps=8, sweep_rounds=2,
                 horovod_rounds=1, sizes=(4096, 262144), allreduce_min_time=0.05, cost_steps=10, cost_rounds=2,
                 full_sweep=False, confirm_tuned=False, parts=("allreduce", "sweep", "overhead", "costs"))
