"""One epoch of training, whichever distributed path was chosen."""

from torch import nn

from dist_utils import reduce_mean


def train_one_epoch(model, optimizer, loader, args, rank: int, step: int) -> int:
    model.train()
    for images, labels in loader:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
        step += 1
        reported = reduce_mean(loss.detach(), args)
        if rank == 0:
            print(f"step {step} loss {reported.item():.6f}", flush=True)
    return step
