"""Horovod implementation: `horovodrun -np 4 python -m hvd_impl [options]` (or mpirun, or no launcher)."""

import sys

from hvd_impl.backend import HorovodBackend
from hvd_impl.elastic import train_any
from hvd_impl.spawn import train
from workload.cli import main

sys.exit(main(HorovodBackend, "python -m hvd_impl", __doc__, spawn=train, train_fn=train_any))
