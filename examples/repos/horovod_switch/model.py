from torch import nn


class ConvNet(nn.Module):
    """A small convolutional net for 1x12x12 images."""

    def __init__(self, classes: int = 3):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 6, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(6, 12, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.fc = nn.Linear(12 * 3 * 3, classes)

    def forward(self, images):
        return self.fc(self.features(images).flatten(1))
