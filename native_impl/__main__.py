"""Native DDP implementation: `torchrun --standalone --nproc-per-node 4 -m native_impl [options]`."""

import sys

from native_impl.backend import DDPBackend
from native_impl.spawn import train
from workload.cli import main

sys.exit(main(DDPBackend, "python -m native_impl", __doc__, spawn=train))
