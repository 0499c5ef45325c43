"""Plain-PyTorch oracles and baselines of the classifier training loops, only the tests and the
benchmarks use: :func:`train_python_classifier` (the idiomatic classifier loop), the RR reverse
pass (:func:`rr_reverse_pass`, the reference of ``vaetransfer.rr``) and its training loop
(:func:`train_python_rr`), on the twins of :mod:`vaetransfer.export`. Importable as
``reference_torch`` from the tests (pytest puts tests/ on the path) and from the benchmarks
(which add tests/ to ``sys.path``)."""
from __future__ import annotations

import torch
from torch import nn
import torch.nn.functional as F

from vaetransfer.export import ReferenceConv4Classifier, ReferenceMLPClassifier
from vaetransfer.studies.transfer.twin_training import Precision


def train_python_classifier(model: nn.Module, images: torch.Tensor, labels: torch.Tensor, steps: int,
                            batch_size: int = 32, lr: float = 1e-3, momentum: float = 0.9, seed: int = 0,
                            data_scale: float = 1.0, fused: bool = False, device: str = "cpu",
                            precision: str = "fp32") -> list[float]:
    """The idiomatic PyTorch classifier loop, used as the benchmark baseline: ``model.train()``,
    batches of ``batch_size`` rows drawn in the order of a permutation seeded with ``seed``
    (a new one whenever fewer than ``batch_size`` rows are left, like :func:`train_python`),
    x = images[batch].float() · data_scale, mean cross-entropy of ``model(x)`` against
    ``labels[batch]`` (int64 [N]), ``torch.optim.SGD(lr, momentum)`` (the protocol of the
    public code of *Similarity of Pre-trained and Fine-tuned Representations*: batch 32,
    lr 1e-3, momentum 0.9). ``fused=True`` uses ``SGD(fused=True)``. ``device``/``precision`` as in
    :func:`train_python`. Returns the loss of every step."""
    if len(images) != len(labels):
        raise ValueError(f"images and labels differ in length: {len(images)} vs {len(labels)}")
    if not 0 < batch_size <= len(images):
        raise ValueError(f"batch_size: expected 1 to {len(images)}, got {batch_size}")
    g = torch.Generator().manual_seed(seed)
    amp = Precision(device, precision)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum, fused=fused)
    model.train()
    labels = labels.long()
    losses = []
    perm, pos = torch.randperm(len(images), generator=g), 0
    for _ in range(steps):
        if pos + batch_size > len(images):
            perm, pos = torch.randperm(len(images), generator=g), 0
        idx = perm[pos:pos + batch_size]
        pos += batch_size
        x = amp.batch(images[idx]).float() * data_scale
        with amp.autocast():
            logits = model(x)
        loss = F.cross_entropy(logits.float(), amp.batch(labels[idx]))
        amp.step(loss, opt)
        losses.append(loss.item())
    return losses


# ---------------------------------------------------------------------------------- RR reverse pass
def _units_of(model: nn.Module) -> list[tuple[str, nn.Module, nn.Module | None, str, bool, bool, bool]]:
    """(kind, affine, bn, activation, bn_first, pool, residual) per unit of an MLP or conv4 twin,
    the head last."""
    if isinstance(model, ReferenceConv4Classifier):
        units = [("conv", getattr(model, n).conv, getattr(model, n).bn, "relu",
                  model.block_order == "conv-bn-relu-pool", True, False) for n in model._blocks]
    elif isinstance(model, ReferenceMLPClassifier):
        units = [("linear", getattr(model, n).linear, getattr(getattr(model, n), "bn", None), model.activation, True,
                  False, model._skips(n)) for n in model._layers]
    else:
        raise TypeError(f"no reverse pass for {type(model).__name__}")
    return units + [("linear", model.logits, None, "none", True, False, False)]


def _activate(name: str, x: torch.Tensor) -> torch.Tensor:
    return F.relu(x) if name == "relu" else torch.tanh(x) if name == "tanh" else x


def rr_reverse_pass(model: nn.Module, x: torch.Tensor, variant: str = "full", output_activation: str = "none"):
    """The RR reverse pass ("Reviving Autoencoder Pretraining", §2, App. A.3) written in
    plain PyTorch on a twin (the reference of ``vaetransfer.rr``): returns (logits, d_m, d'_m) with
    d_1 the input and d_{m+1} each unit's output before pooling. The reverse of unit m is
    f_{m−1}(BN_{m−1}(UP(M_mᵀ(v − b_m)))), BN with the forward batch's statistics (running ones in
    eval mode) and never updating them; v = d'_{m+1} (full) or d_{m+1} (local)."""
    units = _units_of(model)
    traces, h = [], x
    for kind, affine, bn, act, bn_first, pool, residual in units:  # the forward pass, recording each unit
        inp = h.flatten(1) if kind == "linear" else h
        z = affine(inp)
        norm_in = None
        if bn is not None:
            norm_in = z if bn_first else _activate(act, z)
            a = _activate(act, bn(z)) if bn_first else bn(norm_in)
        else:
            a = _activate(act, z)
        traces.append((inp, norm_in, a))
        h = a + inp if residual else F.max_pool2d(a, 2) if pool else a

    def norm(bn, norm_in, v):
        shape = [1, -1] + [1] * (v.dim() - 2)
        if model.training:
            dims = [0] + list(range(2, v.dim()))
            mean, var = norm_in.mean(dims), norm_in.var(dims, unbiased=False)
        else:
            mean, var = bn.running_mean, bn.running_var
        return (v - mean.view(shape)) / torch.sqrt(var.view(shape) + bn.eps) * bn.weight.view(shape) + bn.bias.view(shape)

    def reverse(m, v):
        kind, affine, *_ = units[m]
        if kind == "linear":
            r = (v - affine.bias) @ affine.weight
        else:
            r = F.conv_transpose2d(v - affine.bias.view(1, -1, 1, 1), affine.weight, stride=affine.stride,
                                   padding=affine.padding)
        if m == 0:
            return _activate(output_activation, r.reshape(traces[0][0].shape))
        _, _, bn, act, bn_first, pool, residual = units[m - 1]
        if residual:  # the input is a sum: compared as it is
            return r.reshape(traces[m][0].shape)
        target = traces[m - 1][2]
        r = r.reshape(target.shape[0], target.shape[1], *(s // 2 for s in target.shape[2:])) if pool \
            else r.reshape(target.shape)
        if pool:
            r = F.interpolate(r, size=target.shape[2:], mode="nearest")
        if bn is None:
            return _activate(act, r)
        return _activate(act, norm(bn, traces[m - 1][1], r)) if bn_first else norm(bn, traces[m - 1][1], _activate(act, r))

    n = len(units)
    targets = [traces[0][0]] + [traces[m][0] if units[m - 1][6] else traces[m - 1][2] for m in range(1, n)]
    recon = [None] * n
    if variant == "full":
        if any(u[5] or u[6] for u in units):
            raise ValueError("the full reverse pass needs a unique path: no max-pooling or residual units")
        v = traces[-1][2]
        for m in reversed(range(n)):
            v = reverse(m, v)
            recon[m] = v
    else:
        for m in range(n):
            recon[m] = reverse(m, traces[m][2])
    return traces[-1][2], targets, recon


def train_python_rr(model: nn.Module, images: torch.Tensor, labels: torch.Tensor, steps: int, batch_size: int = 64,
                    lr: float = 1e-3, lam: float = 1.0, variant: str = "local", reduction: str = "mean",
                    output_activation: str = "none", seed: int = 0) -> list[float]:
    """The RR training loop in idiomatic PyTorch (the benchmark baseline): Adam, cross-entropy plus
    λ Σ_m ‖d_m − d'_m‖² (each term summed over units, or averaged with ``reduction="mean"``, and
    averaged over the batch), batches as :func:`train_python_classifier`."""
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    losses, perm, pos = [], torch.randperm(len(images), generator=g), 0
    for _ in range(steps):
        if pos + batch_size > len(images):
            perm, pos = torch.randperm(len(images), generator=g), 0
        idx = perm[pos:pos + batch_size]
        pos += batch_size
        x = images[idx].float()
        logits, targets, recon = rr_reverse_pass(model, x, variant, output_activation)
        loss = F.cross_entropy(logits, labels[idx].long())
        for t, r in zip(targets, recon):
            e = (t - r).pow(2).sum() / len(x)
            loss = loss + lam * (e / t[0].numel() if reduction == "mean" else e)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses
