"""Elastic Horovod: training goes on when workers leave or join (hvd.elastic.run, TorchState).

Every --checkpoint-every steps the state is committed in memory. When a worker dies, the others roll back
to the last commit, re-form the group at the new size (horovodrun --min-np/--max-np and a host discovery
script), re-shard the data and rescale the learning rate, as Horovod's elastic examples do.
"""

from __future__ import annotations

from pathlib import Path

import horovod.torch as hvd

from workload.backend import Backend
from workload.checkpoint import Position
from workload.options import Options
from workload.trainer import Trainer, effective_lr, train


def train_any(options: Options, backend: Backend) -> list[Path]:
    """Elastic when asked for (--elastic), the plain loop otherwise."""
    return train(options, backend, ElasticTrainer if options.elastic else Trainer)


class ElasticTrainer(Trainer):
    """The shared loop inside hvd.elastic.run: commits instead of checkpoint files, reset on a new world."""

    def setup(self) -> None:
        super().setup()
        self.state = hvd.elastic.TorchState(model=self.raw_model, optimizer=self.optimizer, step=0, epoch=0,
                                            step_in_epoch=0, scheduler=self.scheduler_state())
        self.state.register_reset_callbacks([self.on_reset])
        self.sizes = [hvd.size()]  # the world sizes this run went through, for the record

    def checkpoint(self, position: Position) -> None:
        state = self.state
        state.step, state.epoch, state.step_in_epoch = position.step, position.epoch, position.step_in_epoch
        state.scheduler = self.scheduler_state()
        state.commit()

    def on_reset(self) -> None:
        self.shard()  # DistributedSampler over the new size and rank
        lr = effective_lr(self.options, hvd.size())
        if self.scheduler is not None:  # none: a constant rate (workload/trainer.py)
            self.scheduler.base_lrs = [lr for _ in self.scheduler.base_lrs]
        self.sizes.append(hvd.size())

    def run(self) -> tuple[int, dict]:
        @hvd.elastic.run
        def attempt(state: hvd.elastic.TorchState) -> int:
            self.start = Position(state.step, state.epoch, state.step_in_epoch)
            if self.scheduler is not None:
                self.scheduler.load_state_dict(state.scheduler)
            self.recorder.rewind(state.step)  # steps after the last commit are trained again
            return self.run_epochs()

        return attempt(self.state), {"elastic_world_sizes": self.sizes}
