"""Horovod's Spark estimator API: a DataFrame of scikit-learn's digits, a `Store` for the intermediate files, a
`SparkBackend` that runs the training in Spark tasks, and a `horovod.spark.torch.TorchEstimator` whose `fit`
returns a Spark ML model; that model's `transform` then predicts on held-out rows.

    python examples/horovod_scripts/spark_estimator_digits.py --num-proc 2 --work-dir /tmp/estimator

The estimator API has no TorchDistributor counterpart: `compare migrate` flags the Store, the backend and the
estimator, each with what to write instead, and changes nothing else (tests/test_migrate_spark.py).
"""

import argparse
import sys

import numpy as np
import torch
from horovod.spark.common.backend import SparkBackend
from horovod.spark.common.store import Store
from horovod.spark.torch import TorchEstimator
from pyspark.ml.linalg import Vectors
from pyspark.sql import SparkSession
from pyspark.sql import functions as sql
from pyspark.sql.types import DoubleType
from torch import nn

from workload.digits import load_digits


class DigitNet(nn.Module):
    """8x8 grey-scale digits as one channel: two small convolutions, then a linear layer."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 16, 3), nn.ReLU(),
                                      nn.AdaptiveAvgPool2d(2), nn.Flatten())
        self.classify = nn.Linear(64, 10)

    def forward(self, features):
        return self.classify(self.features(features.float()))


def digits_frame(spark):
    """One row per digit: its 64 pixels as a dense vector, and its class as a double (Spark ML's label type)."""
    digits = load_digits()
    rows = [(Vectors.dense(pixels / 16.0), float(label))
            for pixels, label in zip(digits.data, digits.target, strict=True)]
    return spark.createDataFrame(rows, ["features", "label"])


def main():
    parser = argparse.ArgumentParser(description="Horovod's TorchEstimator on a DataFrame of digits")
    parser.add_argument("--master", default=None, help="the Spark master (default: local[NUM_PROC])")
    parser.add_argument("--num-proc", type=int, default=2, help="training processes (Spark tasks)")
    parser.add_argument("--work-dir", default="/tmp/spark_estimator_digits",
                        help="where the Store keeps the intermediate data and checkpoints (hdfs:// for HDFS)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    opts = parser.parse_args()

    spark = (SparkSession.builder.master(opts.master or f"local[{opts.num_proc}]").appName("estimator_digits")
             .config("spark.ui.enabled", "false").getOrCreate())
    train_rows, test_rows = digits_frame(spark).randomSplit([0.85, 0.15], seed=11)

    intermediate = Store.create(opts.work_dir)
    runner = SparkBackend(num_proc=opts.num_proc, stdout=sys.stdout, stderr=sys.stderr)
    net = DigitNet()
    cross_entropy = nn.CrossEntropyLoss()
    estimator = TorchEstimator(backend=runner, store=intermediate, model=net,
                               optimizer=torch.optim.Adam(net.parameters(), lr=3e-3),
                               loss=lambda logits, label: cross_entropy(logits, label.long()),
                               input_shapes=[[-1, 1, 8, 8]], feature_cols=["features"], label_cols=["label"],
                               batch_size=opts.batch_size, epochs=opts.epochs, validation=0.1, verbose=1)
    fitted = estimator.fit(train_rows).setOutputCols(["scores"])

    best = sql.udf(lambda scores: float(np.argmax(scores)), DoubleType())
    predicted = fitted.transform(test_rows).withColumn("guess", best("scores"))
    right = predicted.filter(predicted.guess == predicted.label).count()
    print(f"held-out accuracy: {right / predicted.count():.3f}")
    spark.stop()


if __name__ == "__main__":
    main()
