"""One GAN step: the discriminator first (generated points detached), then the generator through a frozen
discriminator."""

import torch
from torch import nn

bce = nn.BCEWithLogitsLoss()


def set_requires_grad(module: nn.Module, flag: bool) -> None:
    for param in module.parameters():
        param.requires_grad_(flag)


def train_step(generator, discriminator, opt_g, opt_d, real: torch.Tensor, noise: torch.Tensor):
    ones, zeros = torch.ones(len(real), 1), torch.zeros(len(real), 1)

    opt_d.zero_grad()
    fake = generator(noise)
    d_loss = bce(discriminator(real), ones) + bce(discriminator(fake.detach()), zeros)
    d_loss.backward()
    opt_d.step()

    set_requires_grad(discriminator, False)
    opt_g.zero_grad()
    g_loss = bce(discriminator(fake), ones)
    g_loss.backward()
    opt_g.step()
    set_requires_grad(discriminator, True)
    return g_loss.detach(), d_loss.detach()
