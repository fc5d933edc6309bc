"""Checkpoints: the model's own keys (a DataParallel wrapper is unwrapped), the optimizer, the EMA, the step.
Written atomically; read back strictly, so a checkpoint of another shape fails loudly."""

import os

import torch
from torch import nn


def unwrap(model: nn.Module) -> nn.Module:
    return model.module if isinstance(model, nn.DataParallel) else model


def save_checkpoint(path: str, model: nn.Module, optimizer, ema, step: int) -> None:
    state = {"model": unwrap(model).state_dict(), "optimizer": optimizer.state_dict(), "ema": ema.state_dict(),
             "step": step}
    partial = f"{path}.partial"
    torch.save(state, partial)
    os.replace(partial, path)


def load_checkpoint(path: str, model: nn.Module, optimizer, ema) -> int:
    state = torch.load(path, map_location="cpu", weights_only=True)
    unwrap(model).load_state_dict(state["model"], strict=True)
    optimizer.load_state_dict(state["optimizer"])
    ema.load_state_dict(state["ema"])
    return int(state["step"])
