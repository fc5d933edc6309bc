"""Keras 3 on the torch backend, `model.fit(..., validation_data=..., verbose=V)`: "Epoch 1/3" on its own
line, then the progress line with the epoch's running mean loss (`loss: 0.5123`) and the validation metrics.
verbose=2 prints one line per epoch; verbose=1 (its default) writes a bar that, without a terminal, is
printed at the epoch's end only. A callback dumps the epoch logs Keras itself computed.

Captured with (from the repository root; keras installed only for the capture):
    KERAS_BACKEND=torch python examples/logs/corpus/keras_fit.py 2 > examples/logs/corpus/keras_fit_v2.log 2>&1
    KERAS_BACKEND=torch python examples/logs/corpus/keras_fit.py 1 > examples/logs/corpus/keras_fit_v1.log 2>&1
Import: python -m compare import text examples/logs/corpus/keras_fit_v2.log --out runs/x
"""

import sys

import keras
import numpy as np
from tiny import dump, job, printed

verbose = int(sys.argv[1])
x, y, _, _ = job(samples=640)
x, y = x.numpy(), y.numpy()
keras.utils.set_random_seed(0)
model = keras.Sequential([keras.Input((10,)), keras.layers.Dense(4)])
model.compile(optimizer=keras.optimizers.SGD(0.5), metrics=["accuracy"],
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
steps, evals = {}, {}


class Truth(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if verbose == 1:  # the bar prints the running mean after some batches (not all: it throttles)
            steps[self.epoch * 20 + batch + 1] = printed(logs["loss"], ".4f")

    def on_epoch_end(self, epoch, logs=None):
        step = (epoch + 1) * 20  # the optimizer steps so far: 20 batches an epoch
        steps[step] = printed(logs["loss"], ".4f")
        evals[step] = {"eval_loss": printed(logs["val_loss"], ".4f"),
                       "eval_accuracy": printed(logs["val_accuracy"], ".4f")}


model.fit(x, y, batch_size=32, epochs=3, shuffle=False, validation_data=(x[:128], np.asarray(y[:128])),
          verbose=verbose, callbacks=[Truth()])
dump(f"keras_fit_v{verbose}", steps, evals, flags=[], subset=verbose == 1,
     note="Keras prints the running mean loss of the epoch so far; verbose=1 prints some batches of each epoch")
