"""tinynet: a small package trained with `python -m tinynet.train`. Horovod is optional: it is imported only
when distributed training asks for it."""

__version__ = "0.3.0"


def distributed():
    """Horovod's PyTorch API, imported on first use (the package imports without Horovod installed)."""
    import torch.distributed as dist

    return dist
