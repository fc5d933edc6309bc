"""Elastic Horovod: training goes on when workers leave or join (hvd.elastic.run, TorchState).

Every --checkpoint-every steps the state is committed in memory. When a worker dies, the others roll back
to the last commit, re-form the group at the new size (horovodrun --min-np/--max-np and a host discovery
script), re-shard the data and rescale the learning rate, as Horovod's elastic examples do.
"""

from __future__ import annotations

from pathlib import Path

import horovod.torch as hvd
import torch

from workload.checkpoint import Position
from workload.options import Options
from workload.trainer import Trainer, effective_lr, train


def train_any(options: Options, backend) -> list[Path]:
    """Elastic when asked for (--elastic), the plain loop otherwise."""
    return train_elastic(options, backend) if options.elastic else train(options, backend)


def train_elastic(options: Options, backend) -> list[Path]:
    torch.set_num_threads(options.threads)
    return [_train_seed(options, backend, seed) for seed in options.seeds]


def _train_seed(options: Options, backend, seed: int) -> Path:
    trainer = Trainer(options, backend, seed)
    trainer.setup()
    trainer.recorder.start(trainer.record_meta())
    state = hvd.elastic.TorchState(model=trainer.raw_model, optimizer=trainer.optimizer, step=0, epoch=0,
                                   step_in_epoch=0, scheduler=trainer.scheduler.state_dict())
    sizes = [hvd.size()]  # the world sizes this run went through, for the record

    def commit(position: Position) -> None:
        state.step, state.epoch, state.step_in_epoch = position.step, position.epoch, position.step_in_epoch
        state.scheduler = trainer.scheduler.state_dict()
        state.commit()

    def on_reset() -> None:
        trainer.shard()  # DistributedSampler over the new size and rank
        lr = effective_lr(options, hvd.size())
        trainer.scheduler.base_lrs = [lr for _ in trainer.scheduler.base_lrs]
        sizes.append(hvd.size())

    trainer.on_checkpoint = commit
    state.register_reset_callbacks([on_reset])

    @hvd.elastic.run
    def run(state: hvd.elastic.TorchState) -> int:
        trainer.start = Position(state.step, state.epoch, state.step_in_epoch)
        trainer.scheduler.load_state_dict(state.scheduler)
        trainer.recorder.rewind(state.step)  # steps after the last commit are trained again
        return trainer.run_epochs()

    with trainer.recorder.failure_recorded():
        step = run(state)
    trainer.recorder.finish("ok", steps=step, elastic_world_sizes=sizes)
    return trainer.out
