#!/bin/sh
# Writes start.pt, the checkpoint the fixture's runs resume from, with the Horovod original (from this directory).
set -e
horovodrun -np 2 -H localhost:2 --gloo --network-interfaces lo python train.py --epochs 1 --save start.pt
