"""The training loop: one optimizer step per `accumulate` micro-batches."""

import contextlib

import torch
from torch import nn


def train_epoch(model, optimizer, scheduler, loader, accumulate: int, step: int, is_main: bool) -> int:
    model.train()
    micro_loss = 0.0
    optimizer.zero_grad()
    for index, (inputs, targets) in enumerate(loader):
        last = (index + 1) % accumulate == 0
        with contextlib.nullcontext() if last else model.no_sync():  # average once, on the step's last pass
            loss = nn.functional.smooth_l1_loss(model(inputs), targets) / accumulate
            loss.backward()
        micro_loss += loss.item()
        if last:
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=5.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            step += 1
            if is_main:
                print(f"step {step} loss {micro_loss:.6f}", flush=True)
            micro_loss = 0.0
    return step
