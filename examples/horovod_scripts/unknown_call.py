"""A Horovod call the migration does not know (grouped_allreduce), and Horovod's timeline: both stay in
place, flagged with their lines.

horovodrun -np 2 -H localhost:2 --gloo python examples/horovod_scripts/unknown_call.py
"""

import horovod.torch as hvd
import torch
from torch import nn

hvd.init()
hvd.start_timeline("/tmp/timeline.json")
model = nn.Linear(4, 2)
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                     named_parameters=model.named_parameters())
means = hvd.grouped_allreduce([torch.ones(2), torch.zeros(3)])
hvd.stop_timeline()
print(hvd.rank(), [t.tolist() for t in means])
