"""A small local stand-in for torchvision's MNIST, with the same interface (nothing may be downloaded here).

`datasets.MNIST(root, train=True, download=False, transform=None)` yields (image, label) pairs of 28x28
grey-scale digits; `transforms.Compose / ToTensor / Normalize` act as torchvision's do on them. The digits
are scikit-learn's 8x8 handwritten digits (shipped inside the package), scaled up to 28x28: 1,536 for
training and 261 for testing.
"""

from __future__ import annotations

import types

import torch
import torch.nn.functional as F

from workload.digits import load_digits

TRAIN_SIZE = 1536


class MNIST(torch.utils.data.Dataset):
    def __init__(self, root: str, train: bool = True, download: bool = False, transform=None):
        digits = load_digits()
        images = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0
        images = F.interpolate(images, size=(28, 28), mode="bilinear", align_corners=False)
        pixels = (images.squeeze(1) * 255).round().to(torch.uint8)  # stored as MNIST stores them
        labels = torch.tensor(digits.target)
        part = slice(0, TRAIN_SIZE) if train else slice(TRAIN_SIZE, None)
        self.data, self.targets, self.transform = pixels[part], labels[part], transform

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, index: int):
        image = self.data[index]
        return (self.transform(image) if self.transform else image), int(self.targets[index])


class ToTensor:
    def __call__(self, image: torch.Tensor) -> torch.Tensor:
        return image.unsqueeze(0).to(torch.float32) / 255.0


class Normalize:
    def __init__(self, mean: tuple[float, ...], std: tuple[float, ...]):
        self.mean, self.std = mean[0], std[0]

    def __call__(self, tensor: torch.Tensor) -> torch.Tensor:
        return (tensor - self.mean) / self.std


class Compose:
    def __init__(self, steps: list):
        self.steps = steps

    def __call__(self, value):
        for step in self.steps:
            value = step(value)
        return value


datasets = types.SimpleNamespace(MNIST=MNIST)
transforms = types.SimpleNamespace(Compose=Compose, ToTensor=ToTensor, Normalize=Normalize)
