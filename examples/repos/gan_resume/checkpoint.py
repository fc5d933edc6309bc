"""The GAN's checkpoint: both networks, both optimizers, the generator's EMA and the epoch, with their own
keys; written atomically, read strictly."""

import os

import torch


def save_checkpoint(path: str, generator, discriminator, opt_g, opt_d, ema, epoch: int) -> None:
    state = {"generator": generator.state_dict(), "discriminator": discriminator.state_dict(),
             "opt_g": opt_g.state_dict(), "opt_d": opt_d.state_dict(), "ema": ema.module.state_dict(),
             "epoch": epoch}
    partial = f"{path}.partial"
    torch.save(state, partial)
    os.replace(partial, path)


def load_checkpoint(path: str, generator, discriminator, opt_g, opt_d, ema) -> int:
    state = torch.load(path, map_location="cpu", weights_only=True)
    generator.load_state_dict(state["generator"], strict=True)
    discriminator.load_state_dict(state["discriminator"], strict=True)
    opt_g.load_state_dict(state["opt_g"])
    opt_d.load_state_dict(state["opt_d"])
    ema.module.load_state_dict(state["ema"], strict=True)
    return int(state["epoch"])
