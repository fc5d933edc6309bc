"""Native DDP implementation: `torchrun --standalone --nproc-per-node 4 -m native_impl [options]`."""

import os
import sys

from native_impl.backend import DDPBackend
from native_impl.spawn import train
from workload.cli import main

# --spawn-controller picks Horovod's controller; DDP's spawned group is always Gloo's.
status = main(DDPBackend, "python -m native_impl", __doc__, spawn=lambda options, nprocs, _: train(options, nprocs))
# Everything is written and the process group destroyed: leave before the interpreter finalizes, where
# Gloo's worker thread can abort the process (docs/fault-tolerance.md, "Gloo's abort at exit").
sys.stdout.flush()
sys.stderr.flush()
os._exit(status)
