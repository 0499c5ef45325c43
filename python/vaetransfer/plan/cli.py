"""``vaetransfer plan``: a transfer plan from the command line."""
from __future__ import annotations

import argparse
import json

from ..objectives import TaskConfig
from ..train import OptimizerConfig
from ..train import import_user_code  # the same --import as `vaetransfer train`
from .candidates import INITS, LATENT

__all__ = ["plan_main"]


def _ints(text: str, argument: str) -> tuple[int, ...]:
    from .._checks import value_error

    try:
        return tuple(int(v) for v in text.split(",") if v)
    except ValueError as e:
        raise value_error(argument, f"expected comma-separated integers, got {text!r}") from e


def plan_main(argv=None) -> int:
    from . import PlanConfig, plan

    p = argparse.ArgumentParser(prog="vaetransfer plan",
                                description="Which layers of a model to retrain for new data: trains every plan "
                                            "(keep the first k layers, retrain the rest) on the target over seeds "
                                            "and recommends one by a rule fixed in advance. A re-run resumes.")
    p.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                   help="import a module (a name or a .py file) first: data sets it registers, model factories")
    p.add_argument("--source", required=True, help="the source model: a run directory of vaetransfer train")
    p.add_argument("--target", required=True, help="target data: a registered data set or a .npy / .npz file")
    p.add_argument("--target-labels", default=None, help="class labels (.npy) for .npy target examples")
    p.add_argument("--eval-data", default=None, help="held-out target data (default: --eval-fraction of --target)")
    p.add_argument("--eval-fraction", type=float, default=0.1)
    p.add_argument("--steps", type=int, default=1000, help="training steps of every plan")
    p.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (each plan on each)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--objective", default=None, help="default: the source run's objective")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="an objective parameter")
    p.add_argument("--keep", default=None, help="comma-separated numbers of kept layers (default: all)")
    p.add_argument("--inits", default=",".join(INITS), help="finetune, reinit or both")
    p.add_argument("--latent", default=",".join(LATENT), help="frozen, retrained or both (VAEs)")
    p.add_argument("--tolerance", type=float, default=0.01, help="τ as a fraction of the best plan's loss")
    p.add_argument("--similarity-n", type=int, default=500)
    p.add_argument("--executor", default="local", choices=["local", "ray"])
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", required=True)
    p.add_argument("--quiet", action="store_true")
    a = p.parse_args(argv)
    for spec in a.imports:
        import_user_code(spec)
    objective = None
    if a.objective is not None or a.set:
        from ..train import parse_value, load_run

        params = {}
        for item in a.set:
            key, _, value = item.partition("=")
            params[key] = parse_value(value)
        name = a.objective or load_run(a.source).config.objective.name
        objective = TaskConfig(name, **params)
    target = a.target
    config = PlanConfig(steps=a.steps, seeds=_ints(a.seeds, "seeds"), batch_size=a.batch_size,
                        optimizer=OptimizerConfig(lr=a.lr), objective=objective,
                        keep=_ints(a.keep, "keep") if a.keep else None, inits=tuple(a.inits.split(",")),
                        latent=tuple(a.latent.split(",")), tolerance=a.tolerance, eval_fraction=a.eval_fraction,
                        similarity_n=a.similarity_n, threads=a.threads)
    result = plan(a.source, target, a.out, eval_data=a.eval_data, config=config, target_labels=a.target_labels,
                  executor=a.executor, workers=a.workers, progress=not a.quiet)
    r = result.recommended
    print(json.dumps({"recommended": r["id"], "label": r["label"], "parameters": r["parameters"],
                      result.results["primary"]: r["loss"], "report": str(result.out / "report.md")}))
    return 0
