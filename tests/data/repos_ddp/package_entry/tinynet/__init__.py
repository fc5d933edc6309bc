"""tinynet: a small package trained with `python -m tinynet.train` (under torchrun for distributed training)."""

__version__ = "0.3.0"
