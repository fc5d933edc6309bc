"""What the training code asks of a distributed backend."""

import torch


class Backend:
    name = "base"

    def setup(self) -> None:
        raise NotImplementedError

    @property
    def rank(self) -> int:
        raise NotImplementedError

    @property
    def world_size(self) -> int:
        raise NotImplementedError

    @property
    def is_root(self) -> bool:
        return self.rank == 0

    def wrap_model(self, model: torch.nn.Module) -> torch.nn.Module:
        return model

    def wrap_optimizer(self, optimizer: torch.optim.Optimizer, model: torch.nn.Module) -> torch.optim.Optimizer:
        return optimizer

    def sync_initial_state(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
        pass

    def teardown(self) -> None:
        pass

    def all_reduce(self, tensor: torch.Tensor) -> torch.Tensor:
        """The mean of the tensor over workers."""
        raise NotImplementedError

    def barrier(self) -> None:
        """Wait until every worker is here (one process: nothing to wait for)."""
