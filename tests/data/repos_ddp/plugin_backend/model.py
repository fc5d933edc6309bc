from torch import nn

from data import INPUTS


class Regressor(nn.Module):
    def __init__(self, hidden: int = 64):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(INPUTS, hidden), nn.GELU(), nn.Linear(hidden, hidden), nn.GELU())
        self.head = nn.Linear(hidden, 1)

    def forward(self, inputs):
        return self.head(self.body(inputs))
