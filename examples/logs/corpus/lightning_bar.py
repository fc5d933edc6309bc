"""pytorch-lightning's own progress bar (TQDMProgressBar, raw bytes with "\r" repaints) and its CSVLogger's
metrics.csv, from a LightningModule that logs train_loss on the bar every step and val_loss, val_acc each
epoch. The bar shows `train_loss=0.520` (3 significant digits, tqdm's format_num).

Captured with (from the repository root):
    python examples/logs/corpus/lightning_bar.py > examples/logs/corpus/lightning_bar.log 2>&1
(it also writes lightning_csv/metrics.csv, copied to lightning_metrics.csv)
Import: python -m compare import text examples/logs/corpus/lightning_bar.log --out runs/x
        python -m compare import csv examples/logs/corpus/lightning_metrics.csv --out runs/y
            --loss-field train_loss --eval-loss-field val_loss --eval-accuracy-field val_acc
"""

import shutil
import warnings

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import TQDMProgressBar
from pytorch_lightning.loggers import CSVLogger
from tiny import HERE, dump, job
from tqdm import tqdm

warnings.filterwarnings("ignore", ".*does not have many workers.*")
x, y, model, _ = job(samples=640)
truth: dict[int, float] = {}
csv_truth: dict[int, float] = {}
evals: dict[int, dict] = {}


class Module(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = model

    def training_step(self, batch, batch_idx):
        xb, yb = batch
        loss = torch.nn.functional.cross_entropy(self.net(xb), yb)
        self.log("train_loss", loss, prog_bar=True, on_step=True, on_epoch=False)
        step = self.global_step + 1  # the optimizer step this batch makes, from 1
        truth[step] = float(tqdm.format_num(round(loss.item(), 10)))  # what the bar prints
        csv_truth[step] = loss.item()
        return loss

    def validation_step(self, batch, batch_idx):
        xb, yb = batch
        out = self.net(xb)
        self.log("val_loss", torch.nn.functional.cross_entropy(out, yb), prog_bar=True)
        self.log("val_acc", (out.argmax(1) == yb).float().mean(), prog_bar=True)

    def on_validation_epoch_end(self) -> None:
        if not self.trainer.sanity_checking:
            metrics = self.trainer.callback_metrics
            evals[self.global_step] = {"eval_loss": metrics["val_loss"].item(),
                                       "eval_accuracy": metrics["val_acc"].item()}

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.5)


data = torch.utils.data.TensorDataset(x, y)
train = torch.utils.data.DataLoader(data, batch_size=32)
val = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x[:128], y[:128]), batch_size=64)
trainer = pl.Trainer(max_epochs=2, accelerator="cpu", devices=1, logger=CSVLogger(HERE / "lightning_csv"),
                     log_every_n_steps=5, enable_checkpointing=False, enable_model_summary=False,
                     callbacks=[TQDMProgressBar(refresh_rate=1)])  # the tqdm bar (rich, when installed, is the default)
trainer.fit(Module(), train, val)
shutil.copy(trainer.logger.log_dir + "/metrics.csv", HERE / "lightning_metrics.csv")
shutil.rmtree(HERE / "lightning_csv")
dump("lightning_bar", truth, {s: {k: float(tqdm.format_num(round(v, 10))) for k, v in e.items()}
                             for s, e in evals.items()}, flags=[])
# CSVLogger's step is the global step when logged: the optimizer step of the batch minus 1
dump("lightning_metrics", {s - 1: v for s, v in csv_truth.items() if s % 5 == 0},
     {s - 1: e for s, e in evals.items()},
     flags=["--loss-field", "train_loss", "--eval-loss-field", "val_loss", "--eval-accuracy-field", "val_acc"])
