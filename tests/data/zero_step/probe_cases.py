"""The cases probe_horovod.py runs under Horovod and tests/test_migrate_zero_step.py runs through the migration's
helper: one parameter row, five optimizers (with and without weight decay), and how a state is written down."""

import torch

LR, WEIGHT_DECAY = 0.1, 0.5
START = [[1.0, -2.0, 0.5]]
OPTIMIZERS = {
    "sgd": lambda p: torch.optim.SGD(p, lr=LR),
    "sgd_momentum_wd": lambda p: torch.optim.SGD(p, lr=LR, momentum=0.9, weight_decay=WEIGHT_DECAY),
    "adam": lambda p: torch.optim.Adam(p, lr=LR),
    "adam_wd": lambda p: torch.optim.Adam(p, lr=LR, weight_decay=WEIGHT_DECAY),
    "adamw_wd": lambda p: torch.optim.AdamW(p, lr=LR, weight_decay=WEIGHT_DECAY),
}


def state_of(optimizer, parameter) -> dict:
    return {key: value.tolist() if torch.is_tensor(value) else value
            for key, value in optimizer.state.get(parameter, {}).items()}
