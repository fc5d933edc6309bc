from utils.distributed import init, rank, average
from utils.distributed import hvd
import torch

def all_reduce_mean(x):
    return x

if __name__ == "__main__":
    init()
    print(rank(), hvd.size(), average(torch.ones(1)))
