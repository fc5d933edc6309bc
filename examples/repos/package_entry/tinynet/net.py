from torch import nn


class TinyNet(nn.Module):
    def __init__(self, inputs: int = 24, classes: int = 6, width: int = 40):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(inputs, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                                    nn.Linear(width, classes))

    def forward(self, inputs):
        return self.layers(inputs)
