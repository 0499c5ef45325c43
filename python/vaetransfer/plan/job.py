"""One plan on one seed, as a sweep's function job (run in a worker process or on Ray), and the
one evaluation every plan is measured by."""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np

from .. import objectives
from ..data import Dataset, load_arrays
from ..train import TrainConfig, train

__all__ = ["PRIMARY", "CONVENTIONS", "evaluate", "save_data", "load_data", "train_candidate"]

#: The loss a plan is judged by, per model family (lower is better), and what each reported number is.
PRIMARY = {"vae": "neg_elbo", "classifier": "cross_entropy"}
CONVENTIONS = {
    "neg_elbo": "−ELBO per example (nats; reconstruction −log p(x|z) with one draw z ~ q(z|x), plus KL(q(z|x) ‖ "
                "N(0, I)) with weight 1 whatever the objective's β): a bound on −log p(x), comparable across plans",
    "reconstruction_at_mean": "−log p(x | z = posterior mean) per example (nats): the transfer study's "
                              "reconstruction loss",
    "rate": "KL(q(z|x) ‖ N(0, I)) per example (nats)",
    "objective_loss": "the training objective on the held-out data, with its own weights (e.g. β·KL): what "
                      "eval_loss reports; not comparable across objectives",
    "cross_entropy": "−log p(y|x) per example (nats)",
    "error_rate": "the fraction of held-out examples misclassified",
}


def evaluate(model, objective, data: Dataset) -> dict:
    """The plan's numbers of ``model`` on ``data`` (see :data:`CONVENTIONS`), in eval mode."""
    model.eval()
    if model.family == "vae":
        terms = objectives.evaluate(model, objective, data, seed=0)
        at_mean = objectives.evaluate(model, objective, data, z=terms["mean"])["distortion"]
        return {"neg_elbo": float(terms["neg_elbo"].double().mean()), "rate": float(terms["rate"].double().mean()),
                "reconstruction_at_mean": float(at_mean.double().mean())}
    terms = objectives.evaluate(model, objective, data)
    return {"cross_entropy": float(terms["cross_entropy"].double().mean()),
            "error_rate": 1.0 - float(terms["correct"].double().mean())}


def save_data(ds: Dataset, path: Path) -> None:
    """A data set as the ``.npz`` the workers read (examples, labels, scale)."""
    arrays = {"x": ds.images.numpy(), "scale": np.array(float(ds.scale))}
    if ds.labels is not None:
        arrays["y"] = ds.labels.numpy()
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez(tmp, **arrays)
    tmp.replace(path)


def load_data(path: str | Path) -> Dataset:
    ds = load_arrays(path, argument="data")
    with np.load(path, allow_pickle=False) as archive:
        scale = float(archive["scale"]) if "scale" in archive.files else ds.scale
    return dataclasses.replace(ds, scale=scale)


def train_candidate(args: dict, run_dir, device: str | None = None) -> dict:
    """Trains plan ``args["candidate"]`` on seed ``args["seed"]`` into ``run_dir`` and evaluates it."""
    for p in args.get("paths", []):  # where the model's factory module lives (a user's module)
        if p not in sys.path:
            sys.path.insert(0, p)
    c = args["candidates"][args["candidate"]]
    cfg = dict(args["train"], seed=int(args["seed"]), freeze=list(c["freeze"]), reinit=list(c["reinit"]))
    if c["reference"] != "scratch":
        cfg["init_from"] = args["source"]
    if device is not None:
        cfg["device"] = device
    config = TrainConfig.from_dict(cfg)
    train_set, eval_set = load_data(args["data"]["train"]), load_data(args["data"]["eval"])
    run = train(config, train_set, run_dir, eval_data=eval_set, progress=False)
    if not run.finished:
        raise RuntimeError(f"training stopped at step {run.step} of {config.steps}")
    out = evaluate(run.model(device=config.device), config.objective, eval_set)
    evals = [r for r in run.metrics if "eval_loss" in r]
    if evals:
        out["objective_loss"] = float(evals[-1]["eval_loss"])
    out["train_loss_last"] = float(run.history["loss"][-max(1, len(run.history["loss"]) // 10):].mean())
    return out
