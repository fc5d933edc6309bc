"""tqdm's bar with a loss postfix, as its raw bytes: each repaint starts with "\r", the counter restarts each
epoch, and a counter is repainted several times (update, then set_postfix) before it moves on.

Captured with (from the repository root; tqdm writes to stderr):
    python examples/logs/corpus/tqdm_bar.py 2> examples/logs/corpus/tqdm_bar.log
Import: python -m compare import text examples/logs/corpus/tqdm_bar.log --out runs/x
"""

from tiny import dump, job, printed, train_step
from tqdm import tqdm

x, y, model, opt = job(samples=640)
steps = {}
for epoch in range(1, 3):
    with tqdm(total=20, desc=f"Epoch {epoch}", mininterval=0, ascii=False) as bar:
        for b in range(20):
            loss = train_step(model, opt, x[b * 32:(b + 1) * 32], y[b * 32:(b + 1) * 32])
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.4f}")  # a repaint of the same counter, now with this batch's loss
            steps[(epoch - 1) * 20 + b + 1] = printed(loss, ".4f")
dump("tqdm_bar", steps, flags=[])
