"""Horovod implementation of the shared training job. `train()` is its Python API."""

from hvd_impl.spawn import train

__all__ = ["train"]
