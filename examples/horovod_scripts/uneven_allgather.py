"""Evaluation over the whole test set by gathering per-sample results with hvd.allgather, as in evaluation
code that needs every prediction at once (AUC, confusion matrices, retrieval): each rank scores its own
strided shard of a test set that the ranks do not divide evenly, so the shards differ in length.

horovodrun -np 2 -H localhost:2 --gloo python examples/horovod_scripts/uneven_allgather.py
"""

import argparse
import os

import horovod.torch as hvd
import torch
import torch.nn.functional as F
from torch import nn

import recorder
from workload.digits import load_digits

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--test-size", type=int, default=301)
args = parser.parse_args()

hvd.init()
torch.manual_seed(args.seed)
torch.set_num_threads(1)

digits = load_digits()
features = torch.tensor(digits.data / 16.0, dtype=torch.float32)
labels = torch.tensor(digits.target)
train_dataset = torch.utils.data.TensorDataset(features[:1280], labels[:1280])
train_sampler = torch.utils.data.distributed.DistributedSampler(train_dataset, num_replicas=hvd.size(),
                                                                rank=hvd.rank())
train_loader = torch.utils.data.DataLoader(train_dataset, batch_size=args.batch_size, sampler=train_sampler)
# No DistributedSampler for the test set: it would pad the shards with repeated samples and skew the metric.
test_indices = torch.arange(1280, 1280 + args.test_size)[hvd.rank()::hvd.size()]
test_features, test_labels = features[test_indices], labels[test_indices]

model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(), momentum=0.5)
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())


def evaluate():
    model.eval()
    with torch.no_grad():
        output = model(test_features)
        losses = F.cross_entropy(output, test_labels, reduction="none")
        predictions = output.argmax(1)
    # Every rank's per-sample results, in rank order: the metrics are over the whole test set.
    all_losses = hvd.allgather(losses)
    all_correct = hvd.allgather((predictions == test_labels).float())
    return all_losses.mean().item(), all_correct.mean().item(), len(all_losses)


rec = recorder.Recorder(os.environ.get("RUN_DIR", "runs/uneven_allgather"), options=vars(args), seed=args.seed)
for epoch in range(args.epochs):
    model.train()
    train_sampler.set_epoch(epoch)
    for data, target in train_loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(data), target)
        loss.backward()
        optimizer.step()
        rec.step(loss, lr=args.lr * hvd.size(), samples=len(data))
    eval_loss, eval_accuracy, count = evaluate()
    if hvd.rank() == 0:
        print(f"epoch {epoch}: test loss {eval_loss:.4f}, accuracy {eval_accuracy:.4f} over {count} samples")
    rec.eval(eval_loss=eval_loss, eval_accuracy=eval_accuracy)
rec.close()
