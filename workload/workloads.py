"""The training tasks both implementations run: data and model for each workload name.

Everything here is deterministic: the data comes from fixed generators, a dataset that ships inside
scikit-learn, or text already on the machine, never from a download. The data does not depend on the
run's seed (a seed changes the model's initialisation and the sampler's order, not the task), so runs
with different seeds train on the same problem and their spread measures training noise alone.
"""

from __future__ import annotations

import hashlib
import sysconfig
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import TensorDataset

DATA_SEED = 1234  # fixed: the task is the same for every run seed


@dataclass(frozen=True)
class Datasets:
    train: TensorDataset
    test: TensorDataset
    num_classes: int
    input_shape: tuple[int, ...]

    def fingerprint(self) -> str:
        """A short hash of the training data, so two run records can show they trained on the same bytes."""
        digest = hashlib.sha256()
        for tensor in self.train.tensors:
            digest.update(tensor.numpy().tobytes())
        return digest.hexdigest()[:16]


@dataclass(frozen=True)
class WorkloadSpec:
    summary: str
    default_lr: float
    make_data: Callable[[int | None, Path | None], Datasets]
    make_model: Callable[[Datasets], nn.Module]


def _split(x: torch.Tensor, y: torch.Tensor, test_fraction: float, generator: torch.Generator):
    order = torch.randperm(len(x), generator=generator)
    n_test = int(len(x) * test_fraction)
    test, train = order[:n_test], order[n_test:]
    return TensorDataset(x[train], y[train]), TensorDataset(x[test], y[test])


# --- mlp: a small MLP on a synthetic classification set -------------------------------------------

def synthetic_classification(size: int | None, _text_dir: Path | None) -> Datasets:
    """Gaussian inputs labelled by a random linear teacher plus noise: learnable, not trivially."""
    n_train = size or 4096
    n = int(n_train / 0.8)
    gen = torch.Generator().manual_seed(DATA_SEED)
    features, classes = 64, 10
    x = torch.randn(n, features, generator=gen)
    teacher = torch.randn(features, classes, generator=gen)
    y = (x @ teacher + 0.5 * torch.randn(n, classes, generator=gen)).argmax(dim=1)
    train, test = _split(x, y, 0.2, gen)
    return Datasets(train, test, classes, (features,))


def mlp_model(data: Datasets) -> nn.Module:
    (features,) = data.input_shape
    return nn.Sequential(
        nn.Linear(features, 256), nn.ReLU(),
        nn.Linear(256, 256), nn.ReLU(),
        nn.Linear(256, data.num_classes),
    )


# --- digits: scikit-learn's handwritten digits (ships inside the package) ---------------------------

def digits(size: int | None, _text_dir: Path | None) -> Datasets:
    from sklearn.datasets import load_digits

    bunch = load_digits()
    x = torch.tensor(bunch.images, dtype=torch.float32).unsqueeze(1) / 16.0  # 1797 x 1 x 8 x 8
    y = torch.tensor(bunch.target, dtype=torch.long)
    gen = torch.Generator().manual_seed(DATA_SEED)
    train, test = _split(x, y, 0.2, gen)
    if size is not None:
        train = TensorDataset(*(t[:size] for t in train.tensors))
    return Datasets(train, test, 10, (1, 8, 8))


def digits_model(data: Datasets) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
        nn.MaxPool2d(2),  # 4 x 4
        nn.Flatten(),
        nn.Linear(32 * 4 * 4, 64), nn.ReLU(),
        nn.Linear(64, data.num_classes),
    )


# --- resnet: residual conv net on synthetic images, for timing ---------------------------------------

def synthetic_images(size: int | None, _text_dir: Path | None) -> Datasets:
    """32x32 RGB images: a per-class template under noise, so the loss does fall."""
    n_train = size or 2048
    n = int(n_train / 0.8)
    gen = torch.Generator().manual_seed(DATA_SEED)
    classes = 10
    templates = torch.randn(classes, 3, 32, 32, generator=gen)
    y = torch.randint(0, classes, (n,), generator=gen)
    x = 0.5 * templates[y] + torch.randn(n, 3, 32, 32, generator=gen)
    train, test = _split(x, y, 0.2, gen)
    return Datasets(train, test, classes, (3, 32, 32))


class ResidualBlock(nn.Module):
    # GroupNorm, not BatchNorm: batch statistics depend on the per-worker batch, which would make a
    # 2-worker run differ from one process on the global batch by design, not by the framework.
    def __init__(self, channels_in: int, channels_out: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(channels_in, channels_out, 3, stride, 1, bias=False)
        self.norm1 = nn.GroupNorm(8, channels_out)
        self.conv2 = nn.Conv2d(channels_out, channels_out, 3, 1, 1, bias=False)
        self.norm2 = nn.GroupNorm(8, channels_out)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or channels_in != channels_out:
            self.shortcut = nn.Sequential(
                nn.Conv2d(channels_in, channels_out, 1, stride, bias=False), nn.GroupNorm(8, channels_out)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.norm1(self.conv1(x)))
        out = self.norm2(self.conv2(out))
        return torch.relu(out + self.shortcut(x))


def with_batch_norm(model: nn.Module) -> nn.Module:
    """The resnet with BatchNorm2d in place of GroupNorm, for SyncBatchNorm (--sync-bn)."""
    for name, child in model.named_children():
        if isinstance(child, nn.GroupNorm):
            setattr(model, name, nn.BatchNorm2d(child.num_channels))
        else:
            with_batch_norm(child)
    return model


def resnet_model(data: Datasets) -> nn.Module:
    channels = data.input_shape[0]
    return nn.Sequential(
        nn.Conv2d(channels, 32, 3, 1, 1, bias=False), nn.GroupNorm(8, 32), nn.ReLU(),
        ResidualBlock(32, 32, 1), ResidualBlock(32, 32, 1),
        ResidualBlock(32, 64, 2), ResidualBlock(64, 64, 1),
        ResidualBlock(64, 128, 2), ResidualBlock(128, 128, 1),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(128, data.num_classes),
    )


# --- lm: a small causal transformer on real text present on every machine -------------------------

CONTEXT = 64


def _read_text(text_dir: Path | None, limit: int) -> bytes:
    """The Python standard library's own sources by default: real text that every machine has."""
    root = text_dir or Path(sysconfig.get_paths()["stdlib"])
    chunks, total = [], 0
    for path in sorted(p for pattern in ("*.py", "*.txt") for p in root.glob(pattern)):
        data = path.read_bytes()
        chunks.append(data)
        total += len(data)
        if total >= limit:
            break
    return b"".join(chunks)[:limit]


def text_sequences(size: int | None, text_dir: Path | None) -> Datasets:
    n_train = size or 4096
    n = int(n_train / 0.9)
    text = _read_text(text_dir, n * (CONTEXT + 1))
    if len(text) < 4 * (CONTEXT + 1):
        raise ValueError(f"too little text under {text_dir}: {len(text)} bytes")
    usable = len(text) // (CONTEXT + 1) * (CONTEXT + 1)
    tokens = torch.frombuffer(bytearray(text[:usable]), dtype=torch.uint8).long().view(-1, CONTEXT + 1)
    gen = torch.Generator().manual_seed(DATA_SEED)
    train, test = _split(tokens[:, :-1], tokens[:, 1:], 0.1, gen)
    return Datasets(train, test, 256, (CONTEXT,))


class CausalLM(nn.Module):
    """Byte-level: no tokenizer to download. Dropout 0 so that every worker computes the same function."""

    def __init__(self, vocab: int, width: int = 128, layers: int = 2, heads: int = 4):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.position = nn.Parameter(torch.zeros(1, CONTEXT, width))
        layer = nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.0, batch_first=True,
                                           norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(width, vocab)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(CONTEXT), persistent=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        length = tokens.shape[1]
        h = self.embed(tokens) + self.position[:, :length]
        h = self.blocks(h, mask=self.mask[:length, :length], is_causal=True)
        return self.head(h)


def lm_model(data: Datasets) -> nn.Module:
    return CausalLM(data.num_classes)


WORKLOADS: dict[str, WorkloadSpec] = {
    "mlp": WorkloadSpec("MLP on synthetic classification, fast, the default", 0.05,
                        synthetic_classification, mlp_model),
    "digits": WorkloadSpec("small CNN on scikit-learn's 8x8 handwritten digits, test accuracy per epoch",
                           0.05, digits, digits_model),
    "resnet": WorkloadSpec("residual conv net on synthetic 32x32 images, for timing", 0.02,
                           synthetic_images, resnet_model),
    "lm": WorkloadSpec("byte-level causal transformer on the Python standard library's sources", 0.05,
                       text_sequences, lm_model),
}


def training_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy (per token for the language model)."""
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def loss_and_correct(logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean cross-entropy and the number of correct predictions, for evaluation."""
    correct = (logits.reshape(-1, logits.shape[-1]).argmax(dim=1) == targets.reshape(-1)).sum()
    return training_loss(logits, targets), correct
