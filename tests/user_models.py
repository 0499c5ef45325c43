"""Modules a researcher might write, for tests/test_modules.py (importable: the package rebuilds them
from "user_models:Name")."""
import torch
from torch import nn


class SmallVAE(nn.Module):
    """8×8 images; fc_mu / fc_lv return the posterior's mean and log-variance directly."""

    def __init__(self, latent=4, hidden=32, dropout=0.0):
        super().__init__()
        self.enc = nn.Sequential(nn.Flatten(), nn.Linear(64, hidden), nn.ReLU(), nn.Dropout(dropout))
        self.fc_mu = nn.Linear(hidden, latent)
        self.fc_lv = nn.Linear(hidden, latent)
        self.dec = nn.Sequential(nn.Linear(latent, hidden), nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden, 64))

    def encode(self, x):
        h = self.enc(x)
        return self.fc_mu(h), self.fc_lv(h)

    def decode(self, z):
        return self.dec(z).view(-1, 1, 8, 8)


class SplitVAE(nn.Module):
    """One linear layer gives mean and log-variance (split): no submodule's output is the mean."""

    def __init__(self, latent=3):
        super().__init__()
        self.body = nn.Linear(64, 2 * latent)
        self.out = nn.Linear(latent, 64)

    def encode(self, x):
        return self.body(x.flatten(1)).chunk(2, dim=1)

    def decode(self, z):
        return self.out(z).view(-1, 1, 8, 8)


class WrongDecoder(SmallVAE):
    def decode(self, z):
        return self.dec(z)  # [N, 64], not the input's shape


class SmallNet(nn.Module):
    """A classifier with BatchNorm (buffers) and a linear head."""

    def __init__(self, classes=3, features=12):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(features, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 8), nn.ReLU())
        self.head = nn.Linear(8, classes)

    def forward(self, x):
        return self.head(self.body(x))


class NoReset(nn.Module):
    """A parameter the module holds itself, with no reset_parameters()."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(12))
        self.head = nn.Linear(12, 2)

    def forward(self, x):
        return self.head(x * self.scale)


def make_net(classes=3):
    """A factory function, not a class."""
    return SmallNet(classes=classes)


class PlainNet(nn.Module):
    """No BatchNorm: every parameter has a gradient well above float noise."""

    def __init__(self, classes=3):
        super().__init__()
        self.fc1 = nn.Linear(12, 16)
        self.fc2 = nn.Linear(16, 8)
        self.head = nn.Linear(8, classes)

    def forward(self, x):
        return self.head(torch.tanh(self.fc2(torch.tanh(self.fc1(x)))))
