"""Native DDP implementation: `torchrun --standalone --nproc-per-node 4 -m native_impl [options]`."""

import os
import sys

from native_impl.backend import DDPBackend
from native_impl.spawn import train
from workload.cli import main

status = main(DDPBackend, "python -m native_impl", __doc__, spawn=train)
# Everything is written and the process group destroyed: leave without interpreter teardown, where Gloo's
# worker threads can still abort the process ("terminate called without an active exception", seen here
# about once in ten runs; pytorch PR #179291 describes the mechanism).
sys.stdout.flush()
sys.stderr.flush()
os._exit(status)
