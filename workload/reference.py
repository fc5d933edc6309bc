"""One process, no framework, trained on the global batches that N workers would see together.

This is the baseline PyTorch's own DDP tests use: a distributed run that averages gradients over N ranks
must follow the same trajectory as one process on the concatenated batches. Run it as
`python -m workload.reference --emulate-world-size N [options]`.
"""

from __future__ import annotations

import sys

from workload.backend import Backend
from workload.cli import run_training, say_error
from workload.errors import EXIT_USAGE, UsageError
from workload.options import Options, build_parser, parse_options

PROG = "python -m workload.reference"


class ReferenceBackend(Backend):
    """One process standing for N ranks: every collective is the identity; the data are every rank's."""

    framework, launcher, comm_backend = "reference", "none", "none"

    def __init__(self, emulate_world_size: int, ranks: list[int] | None = None):
        self.emulate_world_size = emulate_world_size
        self.ranks = ranks if ranks is not None else list(range(emulate_world_size))

    def data_shards(self) -> tuple[int, list[int]]:
        return self.emulate_world_size, self.ranks


def main(argv: list[str] | None = None) -> int:
    parser = build_parser(PROG, __doc__.splitlines()[0])
    parser.add_argument("--emulate-world-size", type=int, default=1,
                        help="train on the global batches of this many workers")
    parser.add_argument("--emulate-ranks", type=lambda text: [int(r) for r in text.split(",")], default=None,
                        help="whose shards make the global batch (default: every rank's once); "
                             "e.g. 0,0 shows what a sampler that ignores the rank does")
    try:
        options, ns = parse_options(argv, PROG, "", parser=parser)
        if ns.emulate_world_size <= 0:
            raise UsageError(f"--emulate-world-size must be a positive integer, got {ns.emulate_world_size}")
        ranks = ns.emulate_ranks
        if ranks is not None and (len(ranks) != ns.emulate_world_size
                                  or not all(0 <= r < ns.emulate_world_size for r in ranks)):
            raise UsageError(f"--emulate-ranks needs {ns.emulate_world_size} ranks below {ns.emulate_world_size}")
    except UsageError as exc:
        say_error(PROG, str(exc))
        return EXIT_USAGE

    def start(options: Options) -> ReferenceBackend:
        if options.uneven_inputs:
            raise UsageError("--uneven-inputs needs real ranks: the reference has one process")
        return ReferenceBackend(ns.emulate_world_size, ns.emulate_ranks)

    return run_training(options, start, PROG)


if __name__ == "__main__":
    sys.exit(main())
