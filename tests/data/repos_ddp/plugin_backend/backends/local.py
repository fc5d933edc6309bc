import torch

from backends.base import Backend


class LocalBackend(Backend):
    """One process, no communication: for debugging on a laptop."""

    name = "local"

    def setup(self) -> None:
        pass

    @property
    def rank(self) -> int:
        return 0

    @property
    def world_size(self) -> int:
        return 1

    def all_reduce(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor
