"""Elastic Horovod: hvd.elastic.run with a TorchState that is committed every few batches. DDP has no elastic
state: the migration flags it (torchrun --max-restarts with checkpoints is the replacement).

horovodrun -np 2 --min-np 1 --max-np 2 --host-discovery-script ./hosts.sh python examples/horovod_scripts/elastic.py
"""

import horovod.torch as hvd
import torch
import torch.nn.functional as F
from torch import nn
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

if not dist.is_initialized():
    dist.init_process_group()
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01 * dist.get_world_size())
ddp_model = DDP(model)


@hvd.elastic.run
def train(state):
    for state.batch in range(state.batch, 40):  # noqa: B020 (Horovod's elastic idiom)
        data, target = torch.randn(16, 16), torch.randint(0, 2, (16,))
        optimizer.zero_grad()
        loss = F.cross_entropy(ddp_model(data), target)
        loss.backward()
        optimizer.step()
        if state.batch % 10 == 0:
            state.commit()


state = hvd.elastic.TorchState(model=model, optimizer=optimizer, batch=0)
train(state)
dist.barrier()
dist.destroy_process_group()
