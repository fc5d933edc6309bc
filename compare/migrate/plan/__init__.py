"""Stage 2, plan: pass 1 over each file (its Horovod uses, where the model is trained and wrapped, how it is
launched), and the repository's own DDP path behind switches. Reads the stage before it only."""
