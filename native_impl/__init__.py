"""Native PyTorch DDP implementation of the shared training job. `train()` is its Python API."""

from native_impl.spawn import train

__all__ = ["train"]
