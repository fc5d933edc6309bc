"""Running averages kept per worker and combined over workers at the end of an epoch."""

from utils.dist import sum_counts


class AverageMeter:
    def __init__(self, name: str):
        self.name = name
        self.total = 0.0
        self.count = 0

    def update(self, value: float, n: int = 1) -> None:
        self.total += value * n
        self.count += n

    def global_average(self) -> float:
        """The average over every worker's samples (not the average of the workers' averages)."""
        total, count = sum_counts([self.total, self.count], name=f"meter.{self.name}")
        return total / count
