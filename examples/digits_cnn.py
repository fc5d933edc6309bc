"""A user's own workload for hvd-compare: a small CNN on scikit-learn's handwritten digits.

Written as a team would write the model, data and loss of their own job, then handed to the comparison:

    python -m compare run --workload examples/digits_cnn.py:make_workload --np 2 --seeds 0,1 --epochs 2

The same spec works for `python -m hvd_impl`, `python -m native_impl`, `python -m workload.reference` and
under every launcher. The protocol (what `make_workload` returns) is in docs/own-job.md.
"""

from __future__ import annotations

import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import nn
from torch.utils.data import TensorDataset

from workload.workloads import Datasets, DataSettings, Workload


class DigitsCNN(nn.Module):
    def __init__(self, classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, kernel_size=3, padding=1), nn.ReLU(),
            nn.Conv2d(8, 16, kernel_size=3, padding=1), nn.ReLU(),
            nn.MaxPool2d(2),  # 8x8 -> 4x4
        )
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(16 * 4 * 4, 32), nn.ReLU(), nn.Linear(32, classes))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(images))


def digits_data(settings: DataSettings) -> Datasets:
    """1797 8x8 images in [0, 1]; a fixed split, so every seed and every rank trains on the same task."""
    digits = load_digits()
    images = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0
    labels = torch.tensor(digits.target, dtype=torch.long)
    train_x, test_x, train_y, test_y = train_test_split(images, labels, test_size=0.2, random_state=7,
                                                        stratify=labels)
    if settings.size is not None:  # --dataset-size: a smaller training set for quick runs
        train_x, train_y = train_x[: settings.size], train_y[: settings.size]
    return Datasets(TensorDataset(train_x, train_y), TensorDataset(test_x, test_y), num_classes=10)


def smoothed_cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return nn.functional.cross_entropy(logits, labels, label_smoothing=0.05)


def make_workload() -> Workload:
    return Workload(
        data=digits_data,
        model=lambda data: DigitsCNN(data.num_classes),
        loss=smoothed_cross_entropy,
        lr=0.2,
        summary="a user's small CNN on scikit-learn's digits (examples/digits_cnn.py)",
    )
