"""A Horovod call the migration does not know (grouped_allreduce), and Horovod's timeline: both stay in
place, flagged with their lines.

horovodrun -np 2 -H localhost:2 --gloo python examples/horovod_scripts/unknown_call.py
"""

import horovod.torch as hvd
import torch
from torch import nn
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

if not dist.is_initialized():
    dist.init_process_group()
hvd.start_timeline("/tmp/timeline.json")
model = nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
model = DDP(model)
means = hvd.grouped_allreduce([torch.ones(2), torch.zeros(3)])
hvd.stop_timeline()
print(dist.get_rank(), [t.tolist() for t in means])
dist.barrier()
dist.destroy_process_group()
