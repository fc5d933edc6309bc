"""What of hvd.broadcast_optimizer_state's zero-gradient step stays, per optimizer and per order of
DistributedOptimizer (built before the broadcast, or after it as in Horovod's MNIST example): rank 0 prints one
JSON line per case, the parameters after the broadcast and the state the optimizer that trains holds.
tests/test_migrate_zero_step.py launches it under horovodrun and holds the migration's helper to it.

    horovodrun -np 2 --gloo python tests/data/zero_step/probe_horovod.py
"""

import json

import horovod.torch as hvd
import torch
from probe_cases import OPTIMIZERS, START, state_of

hvd.init()
for name, make in OPTIMIZERS.items():
    for order in ("before", "after"):
        model = torch.nn.Linear(3, 1, bias=False)
        with torch.no_grad():
            model.weight.copy_(torch.tensor(START))
        optimizer = make(model.parameters())
        if order == "before":
            optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
        hvd.broadcast_optimizer_state(optimizer, root_rank=0)
        if order == "after":
            optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
        if hvd.rank() == 0:
            print(json.dumps({"optimizer": name, "order": order, "weight": model.weight.tolist(),
                              "state": state_of(optimizer, model.weight)}), flush=True)
