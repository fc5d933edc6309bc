"""Model zoo: the entry asks for a model by name."""

from torch import nn


class MLPClassifier(nn.Module):
    def __init__(self, inputs: int, classes: int, hidden: int = 48, dropout: float = 0.0):
        super().__init__()
        self.num_classes = classes
        self.encoder = nn.Sequential(nn.Linear(inputs, hidden), nn.ReLU(), nn.Dropout(dropout),
                                     nn.Linear(hidden, hidden), nn.ReLU())
        self.classifier = nn.Linear(hidden, classes)

    def forward(self, inputs):
        return self.classifier(self.encoder(inputs))


class LinearClassifier(nn.Module):
    def __init__(self, inputs: int, classes: int):
        super().__init__()
        self.num_classes = classes
        self.classifier = nn.Linear(inputs, classes)

    def forward(self, inputs):
        return self.classifier(inputs)


MODELS = {"mlp": MLPClassifier, "linear": LinearClassifier}


def build_model(name: str, inputs: int, classes: int) -> nn.Module:
    return MODELS[name](inputs, classes)
