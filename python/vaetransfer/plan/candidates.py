"""The candidate plans of a transfer plan, along a model's layer order.

A model's *parameterised layers* (those holding parameters, in the network's order: for a VAE the
encoder, ``mean``, ``logvar``, then the decoder) are ℓ1 … ℓn. Plan ``keep k`` keeps ℓ1 … ℓk fixed
(frozen at the source's weights) and trains ℓk+1 … ℓn on the target, either from the source's
weights (``finetune``) or re-initialised (``reinit``); for a VAE whose kept layers include the
latent layers, ``latent retrained`` trains those too (fine-tuned). References: ``as_is`` (keep
everything: the source evaluated on the target, nothing trained), ``finetune_all`` (keep 0,
fine-tuned), ``scratch`` (a model of the same architecture trained on the target from its own
initialisation). This is the transfer study's decoder retraining generalised to any layer: its
"output side" stages are the ``keep k`` plans whose kept layers include the encoder.
"""
from __future__ import annotations

from dataclasses import dataclass

from .._checks import value_error

__all__ = ["INITS", "LATENT", "Candidate", "parameterised_layers", "candidates"]

INITS = ("finetune", "reinit")
LATENT = ("frozen", "retrained")
LATENT_LAYERS = ("mean", "logvar")


@dataclass(frozen=True)
class Candidate:
    """One plan: the layers kept and trained, how the trained ones start, and what that costs."""

    id: str                        # "keep3/finetune", "keep9/reinit/latent-retrained", "scratch", ...
    kept: tuple[str, ...]          # layers frozen at the source's weights
    retrained: tuple[str, ...]     # layers trained on the target
    init: str                      # finetune | reinit | scratch | none
    latent: str | None = None      # VAEs: frozen | retrained (None where the latent is retrained anyway)
    reference: str | None = None   # as_is | finetune_all | scratch (None: a keep-k plan)
    parameters: int = 0            # parameters trained
    k: int | None = None           # layers kept (keep-k plans and references)

    @property
    def freeze(self) -> tuple[str, ...]:
        return self.kept

    @property
    def reinit(self) -> tuple[str, ...]:
        """Groups re-initialised, in layer order (each draws from the run's seed + 1 + its index)."""
        if self.init != "reinit":
            return ()
        # "latent retrained" fine-tunes the latent layers the plan would otherwise keep (as the transfer
        # study's stages do); every other retrained layer starts afresh
        return tuple(l for l in self.retrained if not (self.latent == "retrained" and l in LATENT_LAYERS))

    @property
    def trains(self) -> bool:
        return self.reference != "as_is"

    @property
    def uses_source(self) -> bool:
        return self.reference != "scratch"

    def label(self) -> str:
        if self.reference == "as_is":
            return "as is (nothing retrained)"
        if self.reference == "finetune_all":
            return "fine-tune all"
        if self.reference == "scratch":
            return "from scratch"
        first = self.retrained[0] if self.retrained else "—"
        extra = ", latent retrained" if self.latent == "retrained" else ""
        return f"keep {self.k} (retrain from {first}), {self.init}{extra}"

    def to_dict(self) -> dict:
        return {"id": self.id, "label": self.label(), "kept": list(self.kept), "retrained": list(self.retrained),
                "init": self.init, "latent": self.latent, "reference": self.reference, "parameters": self.parameters,
                "k": self.k, "freeze": list(self.freeze), "reinit": list(self.reinit)}


def parameterised_layers(model) -> list[str]:
    """The model's layers that hold parameters, in the network's order."""
    names = set(model.parameter_names)
    out = []
    for layer, _ in model.layers:
        try:
            if any(p in names for p in model.group(layer)):
                out.append(layer)
        except ValueError:  # a layer without parameters (input, sampled, a role without a module)
            continue
    return out


def _count(model, layers) -> int:
    sizes = {n: p.numel() for n, p in model.named_parameters().items()}
    return sum(sizes[p] for layer in layers for p in model.group(layer))


def candidates(model, *, keep: list[int] | None = None, inits=INITS, latent=LATENT,
               references=("as_is", "finetune_all", "scratch")) -> list[Candidate]:
    """The plans for ``model`` (see the module docstring): ``keep`` the values of k (default 1 … n−1;
    k = 0 is ``finetune_all`` / ``scratch``, k = n ``as_is``), ``inits`` and, for VAEs, ``latent``."""
    layers = parameterised_layers(model)
    n = len(layers)
    for i in inits:
        if i not in INITS:
            raise value_error("inits", f"expected entries of {list(INITS)}, got {i!r}")
    for v in latent:
        if v not in LATENT:
            raise value_error("latent", f"expected entries of {list(LATENT)}, got {v!r}")
    for r in references:
        if r not in ("as_is", "finetune_all", "scratch"):
            raise value_error("references", f"expected entries of ['as_is', 'finetune_all', 'scratch'], got {r!r}")
    ks = list(range(1, n)) if keep is None else list(keep)
    for k in ks:
        if not isinstance(k, int) or not 0 < k < n:
            raise value_error("keep", f"expected layers kept between 1 and {n - 1} (of {n}: {layers}), got {k!r}")
    has_latent = all(l in layers for l in LATENT_LAYERS)
    latent_end = max(layers.index(l) for l in LATENT_LAYERS) + 1 if has_latent else None
    total = _count(model, layers)
    out: list[Candidate] = []
    if "as_is" in references:
        out.append(Candidate("as_is", tuple(layers), (), "none", reference="as_is", parameters=0, k=n))
        if has_latent and "retrained" in latent:  # the latent alone retrained (the study's stage 0, latent retrained)
            kept = tuple(l for l in layers if l not in LATENT_LAYERS)
            out.append(Candidate(f"keep{n}/finetune/latent-retrained", kept, LATENT_LAYERS, "finetune",
                                 latent="retrained", parameters=_count(model, LATENT_LAYERS), k=n))
    for k in sorted(set(ks), reverse=True):
        kept, retrained = tuple(layers[:k]), tuple(layers[k:])
        latent_kept = has_latent and k >= latent_end
        for init in inits:
            out.append(Candidate(f"keep{k}/{init}", kept, retrained, init, latent="frozen" if latent_kept else None,
                                 parameters=_count(model, retrained), k=k))
            if latent_kept and "retrained" in latent:
                kept_l = tuple(l for l in kept if l not in LATENT_LAYERS)
                retrained_l = tuple(l for l in layers if l not in kept_l)
                out.append(Candidate(f"keep{k}/{init}/latent-retrained", kept_l, retrained_l, init, latent="retrained",
                                     parameters=_count(model, retrained_l), k=k))
    if "finetune_all" in references:
        out.append(Candidate("finetune_all", (), tuple(layers), "finetune", reference="finetune_all",
                             parameters=total, k=0))
    if "scratch" in references:
        out.append(Candidate("scratch", (), tuple(layers), "scratch", reference="scratch", parameters=total, k=0))
    if has_latent and "frozen" not in latent:  # keep only the latent-retrained variants of latent-kept plans
        out = [c for c in out if not (c.latent == "frozen")]
    # one run per distinct training: a latent-retrained variant can equal a plain keep-k plan (the one
    # keeping just the layers before the latent), which then stands for both
    def key(c: Candidate):
        return frozenset(c.freeze), c.reinit, c.reference == "scratch", c.trains

    plain = {key(c) for c in out if c.latent != "retrained"}
    return [c for c in out if c.latent != "retrained" or key(c) not in plain]
