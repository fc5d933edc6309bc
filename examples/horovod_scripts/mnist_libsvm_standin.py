"""A small local stand-in for the MNIST file that Horovod's pytorch_spark_mnist.py downloads (nothing may be
downloaded here): `write_mnist_libsvm(path)` writes what `wget .../libsvmtools/datasets/multiclass/mnist.bz2 -O
path` would, a bzip2-compressed LIBSVM text file (`label index:value ...`, indices 1 to 784, pixel values 0-255,
zeros left out) that `spark.read.format('libsvm').option('numFeatures', '784')` reads. The digits are
scikit-learn's 8x8 handwritten digits scaled up to 28x28, as examples/horovod_styles/mnist_standin.py makes them.
"""

from __future__ import annotations

import bz2
import os

import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits


def write_mnist_libsvm(path: str) -> None:
    digits = load_digits()
    images = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0
    pixels = (F.interpolate(images, size=(28, 28), mode="bilinear", align_corners=False) * 255).round()
    lines = []
    for label, image in zip(digits.target, pixels.reshape(len(pixels), -1).to(torch.int64).tolist(), strict=True):
        features = " ".join(f"{index + 1}:{value}" for index, value in enumerate(image) if value)
        lines.append(f"{label} {features}\n")
    with bz2.open(path + ".tmp", "wt") as out:
        out.writelines(lines)
    os.replace(path + ".tmp", path)
