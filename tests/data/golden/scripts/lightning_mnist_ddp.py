"""PyTorch Lightning with Horovod, in the style of Horovod's examples/pytorch/pytorch_lightning_mnist.py
(Lightning 1.x: `Trainer(accelerator='horovod', gpus=...)`, hvd.init() in the script, rank-0 printing).

Lightning 2 has no Horovod accelerator or strategy, so this script runs only migrated, under torchrun:

python -m compare migrate examples/horovod_scripts/lightning_mnist.py -o results/lightning_mnist_ddp.py
torchrun --standalone --nproc-per-node 2 results/lightning_mnist_ddp.py --epochs 3
(with Lightning 1.x: horovodrun -np 2 -H localhost:2 --gloo python examples/horovod_scripts/lightning_mnist.py)
"""

import argparse
import tempfile

import torch
import torch.nn.functional as F
from pytorch_lightning import Callback, LightningModule, Trainer
from torch import nn

from workload.digits import load_digits
import os

# Training settings
parser = argparse.ArgumentParser(description="PyTorch Lightning digits example")
parser.add_argument("--batch-size", type=int, default=32, help="samples in one step on each rank")
parser.add_argument("--epochs", type=int, default=3, help="passes over the training set")
parser.add_argument("--lr", type=float, default=0.05, help="learning rate (scaled by the number of workers)")
parser.add_argument("--momentum", type=float, default=0.9, help="momentum of the SGD optimizer")
parser.add_argument("--seed", type=int, default=42, help="random seed")
parser.add_argument("--no-cuda", action="store_true", default=False, help="stay on the CPU even where a GPU is found")


class Net(LightningModule):
    def __init__(self, lr, momentum):
        super().__init__()
        self.lr = lr
        self.momentum = momentum
        self.conv = nn.Conv2d(1, 8, kernel_size=3)  # 8x8 digits -> 8 maps of 6x6
        self.fc1 = nn.Linear(8 * 3 * 3, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv(x), 2))
        x = x.view(-1, 8 * 3 * 3)
        x = F.relu(self.fc1(x))
        return F.log_softmax(self.fc2(x), dim=1)

    def configure_optimizers(self):
        # Horovod: scale learning rate by the number of workers.
        return torch.optim.SGD(self.parameters(), lr=self.lr * int(os.environ.get("WORLD_SIZE", 1)), momentum=self.momentum)

    def training_step(self, batch, batch_idx):
        data, target = batch
        loss = F.nll_loss(self(data), target)
        self.log("train_loss", loss, on_step=False, on_epoch=True, sync_dist=True)
        return loss


class LossHistory(Callback):
    """The epoch's mean training loss over all ranks, after each epoch."""

    def __init__(self):
        self.losses = []

    def on_train_epoch_end(self, trainer, pl_module):
        self.losses.append(float(trainer.callback_metrics["train_loss"]))


if __name__ == "__main__":
    args = parser.parse_args()
    args.cuda = not args.no_cuda and torch.cuda.is_available()

    # Horovod: initialize library.
    torch.manual_seed(args.seed)
    # Horovod: limit # of CPU threads to be used per worker.
    torch.set_num_threads(1)

    digits = load_digits()
    images = torch.tensor(digits.images / 16.0, dtype=torch.float32).unsqueeze(1)
    train_dataset = torch.utils.data.TensorDataset(images[:1400], torch.tensor(digits.target)[:1400])
    # Horovod: use DistributedSampler to partition the training data.
    train_sampler = torch.utils.data.distributed.DistributedSampler(
        train_dataset, num_replicas=int(os.environ.get("WORLD_SIZE", 1)), rank=int(os.environ.get("RANK", 0)), seed=args.seed)
    train_loader = torch.utils.data.DataLoader(train_dataset, batch_size=args.batch_size, sampler=train_sampler)

    model = Net(args.lr, args.momentum)
    history = LossHistory()
    with tempfile.TemporaryDirectory() as run_output_dir:
        trainer = Trainer(strategy='ddp',
                          accelerator='gpu' if (1 if args.cuda else 0) else 'cpu',
                          devices=int(os.environ.get('LOCAL_WORLD_SIZE', 1)),
                          num_nodes=int(os.environ.get('GROUP_WORLD_SIZE', 1)),
                          callbacks=[history],
                          max_epochs=args.epochs,
                          logger=False,
                          enable_checkpointing=False,
                          enable_progress_bar=False,
                          enable_model_summary=False,
                          num_sanity_val_steps=0,
                          default_root_dir=run_output_dir)
        trainer.fit(model, train_dataloaders=train_loader)

    # Horovod: print output only on first rank.
    if int(os.environ.get("RANK", 0)) == 0:
        print(f"world size {trainer.world_size}")
        for epoch, loss in enumerate(history.losses):
            print(f"epoch {epoch} train_loss {loss:.6f}")
