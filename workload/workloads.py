"""The training tasks both implementations run: the `Workload` protocol, the four built-ins, and plug-ins.

A workload is data, a model and a loss (docs/own-job.md). The built-ins below are `Workload` values like
any plug-in; `--workload my_package.my_module:make_workload` or `--workload path/to/file.py:make_workload`
names a function that returns one.

Everything built in is deterministic: the data comes from fixed generators, a dataset that ships inside
scikit-learn, or text already on the machine, never from a download. The data does not depend on the
run's seed (a seed changes the model's initialisation and the sampler's order, not the task), so runs
with different seeds train on the same problem and their spread measures training noise alone.
"""

from __future__ import annotations

import codecs
import functools
import hashlib
import importlib
import importlib.util
import sys
import sysconfig
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import Dataset, TensorDataset

from workload.builtin import PLUGIN_FORMS, SUMMARIES
from workload.digits import load_digits
from workload.errors import UsageError

DATA_SEED = 1234  # fixed: the task is the same for every run seed


@dataclass(frozen=True)
class DataSettings:
    """The data options of a run, passed to a workload's `data` function (which may ignore them)."""

    size: int | None = None  # --dataset-size: training samples wanted (None: the workload's own)
    text_dir: Path | None = None  # --text-dir


@dataclass(frozen=True)
class Datasets:
    train: TensorDataset
    test: TensorDataset
    num_classes: int | None = None
    input_shape: tuple[int, ...] | None = None

    def fingerprint(self) -> str:
        """A short hash of the training data, so two run records can show they trained on the same bytes."""
        digest = hashlib.sha256()
        for tensor in self.train.tensors:
            digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
        return digest.hexdigest()[:16]


def cross_entropy(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over every prediction (per token for a sequence model)."""
    # A classifier's (batch, classes) goes in as it is: a reshape would add a view and its backward node to
    # every step (measured: 15-20 µs of a 0.8 ms mlp step); flatten() returns a 1-D target itself.
    if output.dim() != 2:
        output = output.reshape(-1, output.shape[-1])
    return nn.functional.cross_entropy(output, target.flatten())


def argmax_correct(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """How many predictions (argmax over the last dimension) equal their target."""
    return (output.reshape(-1, output.shape[-1]).argmax(dim=1) == target.reshape(-1)).sum()


@dataclass(frozen=True)
class Workload:
    """What the shared loop trains: the protocol built-in and plug-in workloads alike follow.

    data(settings) -> Datasets, or a (train, test) pair of datasets of (input, target) samples. Called
        once per run, after the run's seed is set; it should not depend on that seed (same task, every seed).
    model(datasets) -> nn.Module: a fresh model, called after the run's seed is set (so the seed decides
        its initialisation, the same on every rank and in both frameworks).
    loss(output, target) -> scalar tensor: the mean loss of a batch (default: cross-entropy).
    correct(output, target) -> tensor: how many predictions were right, for eval_accuracy (default: argmax).
    lr: the learning rate when --lr is not given. summary: one line for --help and the record.
    """

    data: Callable[[DataSettings], Datasets | tuple[Dataset, Dataset]]
    model: Callable[[Datasets], nn.Module]
    loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = cross_entropy
    correct: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = argmax_correct
    lr: float = 0.05
    summary: str = ""
    name: str = ""  # set when loaded: the built-in name or the --workload spec

    def make_data(self, size: int | None = None, text_dir: Path | None = None) -> Datasets:
        """The workload's data, checked: a bad plug-in fails here with one line, not deep in the loop."""
        return _as_datasets(self.data(DataSettings(size, text_dir)), self.name)

    def make_model(self, data: Datasets) -> nn.Module:
        model = self.model(data)
        if not isinstance(model, nn.Module):
            raise UsageError(f"workload {self.name!r}: model() returned {type(model).__name__}, "
                               "not a torch.nn.Module")
        if not any(p.requires_grad for p in model.parameters()):
            raise UsageError(f"workload {self.name!r}: the model has no trainable parameters")
        return model

    def loss_and_correct(self, output: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The mean loss and the number of correct predictions, for evaluation."""
        return self.loss(output, target), self.correct(output, target)


def _as_tensor_dataset(dataset: object, what: str, name: str) -> TensorDataset:
    """Any map-style dataset of (input, target) pairs as one TensorDataset: the loop shards by index and
    the record fingerprints the bytes, so the samples are stacked once, up front."""
    if isinstance(dataset, TensorDataset):
        if len(dataset.tensors) != 2:
            raise UsageError(f"workload {name!r}: the {what} TensorDataset holds {len(dataset.tensors)} "
                               "tensors; it needs two (inputs, targets)")
        return dataset
    if not hasattr(dataset, "__getitem__") or not hasattr(dataset, "__len__"):
        raise UsageError(f"workload {name!r}: the {what} data is {type(dataset).__name__}, not a dataset "
                           "(a TensorDataset or any map-style Dataset of (input, target) pairs)")
    if len(dataset) == 0:  # type: ignore[arg-type]
        raise UsageError(f"workload {name!r}: the {what} dataset is empty")
    try:
        pairs = [dataset[i] for i in range(len(dataset))]  # type: ignore[arg-type, index]
        inputs = torch.stack([torch.as_tensor(x) for x, _ in pairs])
        targets = torch.stack([torch.as_tensor(y) for _, y in pairs])
    except (TypeError, ValueError, RuntimeError) as exc:
        raise UsageError(f"workload {name!r}: the {what} samples are not (input, target) pairs of tensors "
                           f"of one shape each ({type(exc).__name__}: {str(exc).splitlines()[0]})") from None
    return TensorDataset(inputs, targets)


def _as_datasets(value: object, name: str) -> Datasets:
    if isinstance(value, Datasets):
        train, test, classes, shape = value.train, value.test, value.num_classes, value.input_shape
    elif isinstance(value, tuple) and len(value) == 2:
        (train, test), classes, shape = value, None, None
    else:
        raise UsageError(f"workload {name!r}: data() returned {type(value).__name__}; "
                           "return workload.workloads.Datasets or a (train, test) pair")
    train = _as_tensor_dataset(train, "training", name)
    test = _as_tensor_dataset(test, "test", name)
    for what, dataset in (("training", train), ("test", test)):
        if len(dataset) == 0:
            raise UsageError(f"workload {name!r}: the {what} dataset is empty")
    if shape is None:
        shape = tuple(train.tensors[0].shape[1:])
    return Datasets(train, test, classes, shape)


def _split(x: torch.Tensor, y: torch.Tensor, test_fraction: float, generator: torch.Generator):
    order = torch.randperm(len(x), generator=generator)
    n_test = int(len(x) * test_fraction)
    test, train = order[:n_test], order[n_test:]
    return TensorDataset(x[train], y[train]), TensorDataset(x[test], y[test])


# --- mlp: a small MLP on a synthetic classification set -------------------------------------------

def synthetic_classification(settings: DataSettings) -> Datasets:
    """Gaussian inputs labelled by a random linear teacher plus noise: learnable, not trivially."""
    n_train = settings.size or 4096
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

def digits(settings: DataSettings) -> Datasets:
    bunch = load_digits()
    x = torch.tensor(bunch.images, dtype=torch.float32).unsqueeze(1) / 16.0  # 1797 x 1 x 8 x 8
    y = torch.tensor(bunch.target, dtype=torch.long)
    gen = torch.Generator().manual_seed(DATA_SEED)
    train, test = _split(x, y, 0.2, gen)
    if settings.size is not None:
        train = TensorDataset(*(t[: settings.size] for t in train.tensors))
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

def synthetic_images(settings: DataSettings) -> Datasets:
    """32x32 RGB images: a per-class template under noise, so the loss does fall."""
    n_train = settings.size or 2048
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


def _text_files(root: Path) -> list[Path]:
    """The text files directly in `root` (not its sub-folders), by name: any file that is UTF-8 without
    NUL bytes, whatever its suffix (Markdown, reStructuredText, source code...)."""
    files = []
    for path in sorted(p for p in root.iterdir() if p.is_file()):
        try:
            with path.open("rb") as handle:
                head = handle.read(4096)
            codecs.getincrementaldecoder("utf-8")().decode(head, final=False)  # a cut character is fine
        except (OSError, UnicodeDecodeError):
            continue
        if b"\0" not in head:
            files.append(path)
    return files


def _read_text(text_dir: Path | None, limit: int) -> bytes:
    """The Python standard library's own sources by default: real text that every machine has."""
    root = text_dir or Path(sysconfig.get_paths()["stdlib"])
    chunks, total = [], 0
    for path in _text_files(root):
        data = path.read_bytes()
        chunks.append(data)
        total += len(data)
        if total >= limit:
            break
    return b"".join(chunks)[:limit]


def text_sequences(settings: DataSettings) -> Datasets:
    n_train = settings.size or 4096
    n = int(n_train / 0.9)
    text = _read_text(settings.text_dir, n * (CONTEXT + 1))
    if len(text) < 4 * (CONTEXT + 1):
        raise UsageError(f"--text-dir {settings.text_dir}: {len(text)} bytes of text in the files directly in "
                           f"it (UTF-8 files of any name; sub-folders are not read); the lm workload needs at "
                           f"least {4 * (CONTEXT + 1)}")
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


BUILTIN_WORKLOADS: dict[str, Workload] = {
    "mlp": Workload(synthetic_classification, mlp_model, lr=0.05, name="mlp",
                    summary=SUMMARIES["mlp"]),
    "digits": Workload(digits, digits_model, lr=0.05, name="digits",
                       summary=SUMMARIES["digits"]),
    "resnet": Workload(synthetic_images, resnet_model, lr=0.02, name="resnet",
                       summary=SUMMARIES["resnet"]),
    "lm": Workload(text_sequences, lm_model, lr=0.05, name="lm",
                   summary=SUMMARIES["lm"]),
}


class _Workloads(dict):
    """The built-in workloads by name; looking up a plug-in spec (MODULE:FUNCTION or FILE.py:FUNCTION)
    loads it, so code that indexes WORKLOADS[options.workload] takes plug-ins too. Iteration and `in`
    see the built-ins only."""

    def __missing__(self, spec: str) -> Workload:
        return load_workload(spec)


WORKLOADS: dict[str, Workload] = _Workloads(BUILTIN_WORKLOADS)


def is_plugin(spec: str) -> bool:
    return spec not in BUILTIN_WORKLOADS


def load_workload(spec: str) -> Workload:
    """The workload named by --workload: a built-in name, MODULE:FUNCTION or FILE.py:FUNCTION.

    Raises UsageError (one line) for anything wrong with the plug-in itself."""
    if spec in BUILTIN_WORKLOADS:
        return BUILTIN_WORKLOADS[spec]
    return _load_plugin(spec, str(Path.cwd()))


@functools.cache
def _load_plugin(spec: str, _cwd: str) -> Workload:  # cached per working directory: a path is relative to it
    source, colon, attribute = spec.rpartition(":")
    if not colon or not source or not attribute:
        raise UsageError(f"unknown workload {spec!r}: choose one of {', '.join(BUILTIN_WORKLOADS)}, "
                           f"or name your own as {PLUGIN_FORMS}")
    module = _import_file(source, spec) if _is_file_form(source) else _import_module(source, spec)
    factory = getattr(module, attribute, None)
    if factory is None:
        raise UsageError(f"--workload {spec}: {source} has no attribute {attribute!r}")
    if not callable(factory):
        raise UsageError(f"--workload {spec}: {attribute} is not a function (its type is {type(factory).__name__})")
    try:
        workload = factory()
    except Exception as exc:
        raise UsageError(f"--workload {spec}: {attribute}() raised {_one_line(exc)}") from None
    if not isinstance(workload, Workload):
        raise UsageError(f"--workload {spec}: {attribute}() returned {type(workload).__name__}, "
                           "not a workload.workloads.Workload")
    if not (isinstance(workload.lr, (int, float)) and workload.lr > 0):
        raise UsageError(f"--workload {spec}: the workload's lr must be a positive number, got {workload.lr!r}")
    return replace(workload, name=spec, summary=workload.summary or f"plug-in {spec}")


def _is_file_form(source: str) -> bool:
    return source.endswith(".py") or "/" in source or "\\" in source


def _import_module(name: str, spec: str):
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name and (name == exc.name or name.startswith(exc.name + ".")):
            raise UsageError(f"--workload {spec}: no module named {exc.name!r} (run from the folder that holds "
                               "it, or add that folder to PYTHONPATH)") from None
        raise UsageError(f"--workload {spec}: importing {name} failed: {_one_line(exc)}") from None
    except Exception as exc:
        raise UsageError(f"--workload {spec}: importing {name} failed: {_one_line(exc)}") from None


def _import_file(source: str, spec: str):
    path = Path(source).expanduser().resolve()
    if not path.is_file():
        raise UsageError(f"--workload {spec}: no such file {source}")
    # A name of its own per file, registered before it runs (dataclasses and pickling look modules up there).
    module_name = f"_workload_plugin_{path.stem}_{hashlib.sha256(str(path).encode()).hexdigest()[:8]}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    import_spec = importlib.util.spec_from_file_location(module_name, path)
    if import_spec is None or import_spec.loader is None:
        raise UsageError(f"--workload {spec}: {source} cannot be imported as Python")
    module = importlib.util.module_from_spec(import_spec)
    sys.modules[module_name] = module
    if str(path.parent) not in sys.path:
        sys.path.append(str(path.parent))  # so the file can import its neighbours, as a script would
    try:
        import_spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[module_name]
        raise UsageError(f"--workload {spec}: importing {source} failed: {_one_line(exc)}") from None
    return module


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}".rstrip(": ")


def workload_record(spec: str) -> dict:
    """What run.json says about the workload: for a plug-in, where its code came from and a hash of it
    (also run.json's "workload_source", which `compare check` requires to match), so two records can show
    they ran the same code."""
    if not is_plugin(spec):
        return {"name": spec, "kind": "built-in"}
    source = spec.rpartition(":")[0]
    record: dict = {"name": spec, "kind": "plug-in"}
    try:
        if _is_file_form(source):
            path = Path(source).expanduser().resolve()
        else:
            found = importlib.util.find_spec(source)
            path = Path(found.origin) if found is not None and found.origin else None
        if path is not None and path.is_file():
            record.update(file=str(path), sha256=hashlib.sha256(path.read_bytes()).hexdigest()[:16])
    except (ImportError, OSError, ValueError):
        pass
    return record

