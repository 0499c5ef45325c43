"""Your own torch.nn.Module trained by the core's loop (vaetransfer.modules: the C++ loop, the
module's forward called back in Python) vs the idiomatic PyTorch loop on the same module: same
initial weights, batch size, thread count; Adam for the VAEs (β-VAE, Bernoulli), SGD momentum 0.9
for the classifier. Goal: not slower (ratio python / core ≥ 1.0 within noise).

Cases: (a) a user-written conv VAE (Locatello layout) on dSprites, batch 64; (b) a user MLP VAE
3×512 on Tetrominoes, batch 128; (c) a small user classifier on 12-bit patterns, batch 256 (the
per-step overhead of the callback shows most here).

    python benchmarks/bench_modules.py [--threads T] [--steps N] [--repeat R] [--only abc]
"""
from __future__ import annotations

import argparse
import copy
import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))

from _common import header, seconds_per_step  # noqa: E402
from bench_train import time_cpp  # noqa: E402  (the same timing of the core loop)
from reference_torch import train_python_classifier  # noqa: E402
import vaetransfer as vt  # noqa: E402
from vaetransfer.studies.transfer.twin_training import beta_vae_loss  # noqa: E402


class ConvVAE(nn.Module):
    """A conv VAE as a researcher would write it (Locatello et al. 2019 layout, 64×64×1)."""

    def __init__(self, latent: int = 10):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv2d(1, 32, 4, 2, 1), nn.ReLU(), nn.Conv2d(32, 32, 4, 2, 1), nn.ReLU(),
            nn.Conv2d(32, 64, 4, 2, 1), nn.ReLU(), nn.Conv2d(64, 64, 4, 2, 1), nn.ReLU(),
            nn.Flatten(), nn.Linear(64 * 4 * 4, 256), nn.ReLU())
        self.mu, self.logvar = nn.Linear(256, latent), nn.Linear(256, latent)
        self.decoder = nn.Sequential(
            nn.Linear(latent, 256), nn.ReLU(), nn.Linear(256, 64 * 4 * 4), nn.ReLU(), nn.Unflatten(1, (64, 4, 4)),
            nn.ConvTranspose2d(64, 64, 4, 2, 1), nn.ReLU(), nn.ConvTranspose2d(64, 32, 4, 2, 1), nn.ReLU(),
            nn.ConvTranspose2d(32, 32, 4, 2, 1), nn.ReLU(), nn.ConvTranspose2d(32, 1, 4, 2, 1))

    def encode(self, x):
        h = self.encoder(x)
        return self.mu(h), self.logvar(h)

    def decode(self, z):
        return self.decoder(z)


class MlpVAE(nn.Module):
    def __init__(self, shape=(3, 32, 32), width: int = 512, latent: int = 10):
        super().__init__()
        n = shape[0] * shape[1] * shape[2]
        self.shape = tuple(shape)
        self.encoder = nn.Sequential(nn.Flatten(), nn.Linear(n, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                                     nn.Linear(width, width), nn.ReLU())
        self.mu, self.logvar = nn.Linear(width, latent), nn.Linear(width, latent)
        self.decoder = nn.Sequential(nn.Linear(latent, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                                     nn.Linear(width, width), nn.ReLU(), nn.Linear(width, n))

    def encode(self, x):
        h = self.encoder(x)
        return self.mu(h), self.logvar(h)

    def decode(self, z):
        return self.decoder(z).view(-1, *self.shape)


class BitsNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(12, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 4))

    def forward(self, x):
        return self.net(x)


def python_vae_loop(module: nn.Module, data: torch.Tensor, steps: int, batch: int, scale: float) -> list[float]:
    """The idiomatic loop over a module with encode/decode: Adam(1e-4), z = μ + σ·ε, β-VAE (β = 1)."""
    g = torch.Generator().manual_seed(0)
    opt = torch.optim.Adam(module.parameters(), lr=1e-4, betas=(0.9, 0.999), eps=1e-8)
    module.train()
    losses, perm, pos = [], torch.randperm(len(data), generator=g), 0
    for _ in range(steps):
        if pos + batch > len(data):
            perm, pos = torch.randperm(len(data), generator=g), 0
        x = data[perm[pos:pos + batch]].float() * scale
        pos += batch
        mean, logvar = module.encode(x)
        z = mean + torch.exp(0.5 * logvar) * torch.randn_like(mean)
        loss = beta_vae_loss(x, module.decode(z), mean, logvar, 1.0)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def time_python(module, data, labels, batch: int, steps: int, warmup: int, scale: float) -> float:
    if labels is None:
        loop = lambda n: python_vae_loop(module, data, n, batch, scale)  # noqa: E731
    else:
        loop = lambda n: train_python_classifier(module, data, labels, n, batch, lr=1e-3, momentum=0.9,  # noqa: E731
                                                 data_scale=scale)
    return seconds_per_step(loop, steps, warmup)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--steps", type=int, default=None, help="timed steps per case (default per case)")
    p.add_argument("--repeat", type=int, default=3, help="alternating repetitions; the best is kept")
    p.add_argument("--only", default="", help="run only the cases whose letters are given, e.g. 'ac'")
    a = p.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    header("bench_modules: your nn.Module through the core's loop vs the idiomatic PyTorch loop")
    bits = ((torch.arange(4096).unsqueeze(1) >> torch.arange(11, -1, -1)) & 1).to(torch.uint8)
    bit_labels = bits[:, :2].long() @ torch.tensor([2, 1])
    cases = [
        ("(a) user conv VAE, dSprites", vt.module_model(ConvVAE, kind="vae", input_shape=(1, 64, 64)),
         lambda: (vt.data.dsprites(torch.arange(0, 737280, 90)).images, None), 64, 1.0, 20),
        ("(b) user MLP VAE 3x512, Tetrominoes", vt.module_model(MlpVAE, kind="vae", input_shape=(3, 32, 32)),
         lambda: (vt.data.tetrominoes(torch.arange(0, 163840, 20)).images, None), 128, 1 / 255, 60),
        ("(c) user classifier 12-64-32-4", vt.module_model(BitsNet, kind="classifier", input_shape=(12,)),
         lambda: (bits, bit_labels), 256, 1.0, 500),
    ]
    print(f"{'case':<38} {'batch':>5} {'python ms':>10} {'core ms':>9} {'ratio':>7}")
    for name, mcfg, make_data, batch, scale, steps in cases:
        if a.only and name[1] not in a.only:
            continue
        data, labels = make_data()
        if data.dim() == 3:
            data = data.unsqueeze(1)
        steps = a.steps or steps
        warmup = max(3, steps // 10)
        model = vt.build_model(mcfg, seed=0)
        init = model.state_dict()
        ref = copy.deepcopy(model.module)
        ref_init = copy.deepcopy(ref.state_dict())
        best_core = best_py = float("inf")
        for _ in range(a.repeat):
            model.load_state_dict(init)
            best_core = min(best_core, time_cpp(model, data, labels, batch, steps, warmup, scale))
            ref.load_state_dict(ref_init)
            best_py = min(best_py, time_python(ref, data, labels, batch, steps, warmup, scale))
        print(f"{name:<38} {batch:>5} {best_py * 1e3:>10.3f} {best_core * 1e3:>9.3f} {best_py / best_core:>6.2f}×",
              flush=True)
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
