"""The tiny job every corpus script trains: 4-class logistic regression on fixed random data, so that each
script's printed losses are reproducible and each script can also dump its true values (expected.json)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent


def job(seed: int = 0, samples: int = 640, lr: float = 0.5) -> tuple[torch.Tensor, torch.Tensor, torch.nn.Module,
                                                                        torch.optim.Optimizer]:
    torch.manual_seed(seed)
    x = torch.randn(samples, 10)
    y = (x @ torch.randn(10, 4)).argmax(1)
    model = torch.nn.Linear(10, 4)
    return x, y, model, torch.optim.SGD(model.parameters(), lr=lr)


def train_step(model: torch.nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor) -> float:
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.item()


def evaluate(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    with torch.no_grad():
        out = model(x)
        return torch.nn.functional.cross_entropy(out, y).item(), (out.argmax(1) == y).float().mean().item()


def printed(value: float, spec: str) -> float:
    """The value as the log shows it (what a reader can get back), kept non-finite as such."""
    return float(format(value, spec))


def dump(name: str, steps: dict, evals: dict | None = None, **extra: object) -> None:
    """name.expected.json: the steps and values the reader must give, from what the script printed."""
    def clean(v: float) -> float | str:
        return v if math.isfinite(v) else repr(v)  # "nan", "inf", "-inf": read back with float()
    body = {"steps": {str(k): clean(v) for k, v in steps.items()},
            "evals": {str(k): {m: clean(x) for m, x in v.items()} for k, v in (evals or {}).items()}, **extra}
    (HERE / f"{name}.expected.json").write_text(json.dumps(body, indent=1) + "\n")


def declare_torchvision_ops() -> None:
    """For the capture scripts whose tool imports torchvision (timm, mmengine): the torchvision on PyPI is a
    CUDA build whose operators cannot load beside a CPU torch, and its import then registers fake kernels for
    two operators that do not exist; declaring their schemas first lets it import. Nothing here uses them."""
    for op in ("nms", "qnms"):
        torch.library.define(f"torchvision::{op}", "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
