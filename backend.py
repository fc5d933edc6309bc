import importlib


class HorovodBackend:
    MODULE = "horovod.torch"

    def setup(self):
        self.hvd = importlib.import_module(self.MODULE)
        self.hvd.init()

    @property
    def rank(self):
        return self.hvd.rank()
