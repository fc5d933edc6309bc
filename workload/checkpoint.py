"""Checkpoints that either implementation writes and either reads: the migration path.

The format is framework-neutral: the bare model's state_dict (no DDP "module." prefix), the inner
optimizer's state_dict (Horovod's DistributedOptimizer and DDP's plain optimizer agree), the scheduler,
the random generators and the position in the data. Rank 0 writes it atomically; every load uses
torch.load(weights_only=True), so a checkpoint cannot run code.
"""

from __future__ import annotations

import io
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from workload.errors import UsageError
from workload.files import write_atomic

FORMAT = "hvd-compare-checkpoint/1"


@dataclass(frozen=True)
class Position:
    step: int  # optimizer steps completed
    epoch: int
    step_in_epoch: int  # steps of `epoch` already taken


def rng_state() -> dict:
    numpy_state = np.random.get_state()
    return {
        "torch": torch.get_rng_state(),
        "numpy": [numpy_state[0], torch.from_numpy(numpy_state[1].astype(np.int64)), *numpy_state[2:]],
        "python": random.getstate(),
    }


def restore_rng(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    kind, keys, *rest = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), *rest))
    random.setstate(tuple(v if not isinstance(v, list) else tuple(v) for v in state["python"]))


def save(path: Path, *, framework: str, position: Position, model: torch.nn.Module, optimizer_state: dict,
         scheduler: dict | None, data_world_size: int, seed: int) -> None:
    payload = {
        "format": FORMAT,
        "written_by": framework,
        "step": position.step,
        "epoch": position.epoch,
        "step_in_epoch": position.step_in_epoch,
        "data_world_size": data_world_size,
        "seed": seed,
        "model": model.state_dict(),
        "optimizer": optimizer_state,
        "scheduler": scheduler,  # its state_dict; None for a constant rate
        "rng": rng_state(),
    }
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    write_atomic(path, buffer.getvalue())


def load(path: Path) -> dict:
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise UsageError(f"--resume {path}: not a readable checkpoint ({type(exc).__name__})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise UsageError(f"--resume {path}: not a checkpoint of this project (format {FORMAT})")
    return payload
