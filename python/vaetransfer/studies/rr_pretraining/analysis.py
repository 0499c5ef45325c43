"""The RR study's analysis over its runs: means ± se over seeds per experiment (the SVD cases, the
MI planes and their deep layers, the shape transfer), the sections per λ of a sweep, and the trained
checks (did the models a finding rests on train?) with the failures the findings and the report read."""
from __future__ import annotations

from ..kit import trained
from ..kit.stats import chance, mean_se
from .config import STYLES, SWEPT, SWEPT_METHODS, Config, lambdas_of, seeds_of
from .stages import LAMBDAS, deep_layers, digits_data, peak_data, shape_images, twelve_bit


# ---------------------------------------------------------------------------------- summaries
def by_method(runs) -> dict:
    """{(experiment, method): [measured of each seed, in the config's order]}."""
    out: dict = {}
    for r in runs:
        out.setdefault((r.row["experiment"], r.row["method"]), []).append({**r.measured, "seed": r.row["seed"]})
    return out


def _summary(rows: list, get) -> dict:
    """Mean ± se over seeds of ``get(row)``, with each seed's own value (``by_seed``: the units the
    findings decide over)."""
    return {**mean_se([get(r) for r in rows]), "by_seed": {str(r["seed"]): get(r) for r in rows if get(r) is not None}}


def _svd_summary(results: dict, experiment: str, cases: tuple[str | None, ...]) -> dict:
    """{case: {method: {"distance": mean±se, "train_accuracy": …}}} of an SVD experiment."""
    out = {}
    for case in cases:
        per = {}
        for (e, method), rows in results.items():
            if e != experiment:
                continue
            rs = [r[case] if case else r for r in rows]
            rs = [{**r, "seed": row["seed"]} for r, row in zip(rs, rows)]
            per[method] = {"distance": _summary(rs, lambda r: r["distance"]),
                           "train_accuracy": mean_se([r["train_accuracy"] for r in rs])}
            if "test_accuracy" in rs[0]:
                per[method]["test_accuracy"] = mean_se([r["test_accuracy"] for r in rs])
        out[case or "peak"] = per
    return out


def _mi_summary(results: dict) -> dict:
    """Per method and stage (A, AA, AB): per-layer mean ± se of I(X; D) and I(D; Y), and the test
    accuracy."""
    out = {}
    for (e, method), rows in results.items():
        if e != "mi":
            continue
        per = {}
        for stage in ("A", "AA", "AB"):
            layers = list(rows[0][stage]["final"])
            per[stage] = {"layers": {l: {"ixt": mean_se([r[stage]["final"][l]["ixt"] for r in rows]),
                                         "ity": mean_se([r[stage]["final"][l]["ity"] for r in rows])} for l in layers},
                          "test_accuracy": _summary(rows, lambda r, stage=stage: r[stage]["test_accuracy"])}
        out[method] = per
    return out


def _mi_deep(c: Config, mi: dict, results: dict | None = None) -> dict:
    """The mean over the deep layers of each method's mean I(X; D) after stage A; with the runs'
    ``results``, also ``curve``: that mean over stage A's MI measurements (:func:`_deep_curve`)."""
    deep = deep_layers(c)
    out = {"layers": deep,
           "ixt": {m: round(sum(v["A"]["layers"][l]["ixt"]["mean"] for l in deep) / len(deep), 4)
                   for m, v in mi.items()}}
    if results:  # each seed's own deep-layer mean: the units the finding decides over
        out["ixt_by_seed"] = {method: {str(r["seed"]): round(sum(r["A"]["final"][l]["ixt"] for l in deep) / len(deep), 4)
                                       for r in rows}
                              for (e, method), rows in results.items() if e == "mi"}
    curve = _deep_curve(c, results) if results else None
    if curve:
        out["curve"] = curve
    return out


def _deep_curve(c: Config, results: dict) -> dict | None:
    """``{"epoch": [...], "ixt": {method: [...]}}``: the deep layers' mean I(X; D) at each MI
    measurement of stage A, the mean over seeds, of every method whose runs all recorded the same
    epochs for every deep layer (Pre records none); None when no method did."""
    deep = deep_layers(c)
    epochs, ixt = None, {}
    for (e, method), rows in results.items():
        if e != "mi" or not rows:
            continue
        curves = [r["A"].get("curves") or {} for r in rows]
        if not all(l in cur for cur in curves for l in deep):
            continue
        ep = curves[0][deep[0]]["epoch"]
        if not ep or any(cur[l]["epoch"] != ep or len(cur[l]["ixt"]) != len(ep) for cur in curves for l in deep):
            continue
        if epochs is not None and ep != epochs:
            continue
        epochs = ep
        ixt[method] = [round(sum(cur[l]["ixt"][i] for cur in curves for l in deep) / (len(curves) * len(deep)), 4)
                       for i in range(len(ep))]
    return {"epoch": epochs, "ixt": ixt} if ixt else None


def _transfer_summary(results: dict) -> dict:
    out = {}
    for (e, method), rows in results.items():
        if e != "transfer":
            continue
        out[method] = {"final": {s: _summary(rows, lambda r, s=s: r["final"][s]) for s in STYLES}}
        if rows[0]["stage_a"]:
            out[method]["stage_a"] = {s: mean_se([r["stage_a"][s] for r in rows]) for s in STYLES}
    return out


def _lambda_sweep(c: Config, runs: dict, shares: dict) -> dict:
    """{experiment: [{"lambda": λ, <the experiment's sections>}, ...]} of each swept experiment
    (``rr_lambdas`` not empty), λ in :func:`lambdas_of`'s order: the sections (``mi`` and
    ``mi_deep``, or ``transfer``, and ``trained`` with the experiment's check) computed as the
    study's with RR's (and RR¹'s) runs at that λ, Std's, Ort's and Pre's shared. The first entry is
    the study's own λ."""
    base = by_method(runs["train"])
    extra = runs.get(LAMBDAS.name, [])
    out = {}
    for e in SWEPT:
        if e not in c.experiments or not getattr(c, e).rr_lambdas:
            continue
        entries = []
        for i, lam in enumerate(lambdas_of(c, e)):
            results = {k: v for k, v in base.items() if k[0] == e}
            if i:
                for m in list(results):
                    if m[1] in SWEPT_METHODS:
                        results[m] = [{**r.measured, "seed": r.row["seed"]} for r in extra if r.row["experiment"] == e
                                      and r.row["method"] == m[1] and float(r.row["lambda"]) == lam]
            checks = {e: trained_check(c, results, e, shares[e])}
            if e == "mi":
                mi = _mi_summary(results)
                entries.append({"lambda": lam, "mi": mi, "mi_deep": _mi_deep(c, mi, results), "trained": checks})
            else:
                entries.append({"lambda": lam, "transfer": _transfer_summary(results), "trained": checks})
        out[e] = entries
    return out


# ---------------------------------------------------------------------------------- did they train?
#: Each trained check (a check of ``analysis["trained"]``): its experiment and the score it reads.
CHECKS = {"peak": ("peak", "training accuracy"), "pair": ("digits", "training accuracy"),
          "full": ("digits", "training accuracy"), "mi": ("mi", "stage-A test accuracy on task A"),
          "transfer": ("transfer", "test accuracy on the textured style")}


def chances(c: Config) -> dict:
    """Chance accuracy (:func:`.stats.chance`: the most frequent class's share) on the rows each
    check scores (:data:`CHECKS`): the peak test's and the digits' training images, the 12-bit
    task's test split (task B swaps the labels: the same share), the textured style's test rows."""
    out = {}
    if "peak" in c.experiments:
        p, tr, _ = peak_data(c)
        out["peak"] = chance(p.labels[tr])
    if "digits" in c.experiments:
        for case in ("pair", "full"):
            out[case] = chance(digits_data(case)[1])
    if "mi" in c.experiments:
        _, y, _, te = twelve_bit(c)
        out["mi"] = chance(y[te])
    if "transfer" in c.experiments:
        out["transfer"] = chance(shape_images(c, "textured", "test", c.transfer.n_test)[1])
    return out


def _records(c: Config, results: dict, check: str) -> tuple[dict, dict]:
    """``(models, finetuned)`` of a check: per model (``<method>/seed=<s>``) its ``method``, the
    check's ``accuracy`` and, where measured, the loss summary (``loss_first``, ``loss_last``,
    ``finite``) of the run where it learns the task — stage A, or Pre's fine-tuning on the shapes;
    per fine-tuning run (``<method>/<run>/seed=<s>``) its ``method`` and ``finite``. Pre's stage A
    learns no task: it has models only on the shapes, where a finding rests on its fine-tuned model."""
    experiment, _ = CHECKS[check]
    models, finetuned = {}, {}
    for (e, method), rows in results.items():
        if e != experiment or (method == "pre" and experiment != "transfer"):
            continue
        for seed, r in zip(seeds_of(c, experiment), rows):
            name = f"{method}/seed={seed}"
            if experiment in ("peak", "digits"):
                r = r[check] if experiment == "digits" else r
                models[name] = {"method": method, "accuracy": r["train_accuracy"], **(r.get("loss") or {})}
            elif experiment == "mi":
                models[name] = {"method": method, "accuracy": r["A"]["test_accuracy"], **(r["A"].get("loss") or {})}
                finetuned.update({f"{method}/{t}/seed={seed}": {"method": method, "finite": r[t]["loss"]["finite"]}
                                  for t in ("AA", "AB") if "loss" in r[t]})
            else:
                loss = r.get("loss_finetune" if method == "pre" else "loss_stage_a") or {}
                models[name] = {"method": method, "accuracy": r["final"]["textured"], **loss}
                if "loss_finetune" in r:
                    finetuned[f"{method}/finetune/seed={seed}"] = {"method": method,
                                                                   "finite": r["loss_finetune"]["finite"]}
    return models, finetuned


def trained_check(c: Config, results: dict, check: str, chance_share: float) -> dict:
    """One check of ``analysis["trained"]`` (:func:`.trained.check`): the ``models`` (:func:`_records`);
    the ``rule`` — a model's score at least halfway from chance to Std's mean, or ``{"error"}``
    when Std's mean is not above chance (the reference did not train) or there is no Std model;
    the ``context``: ``chance``, Std's mean score (``reference``) and the ``finetuned`` runs'
    records (only checked for divergence: :func:`models_failed`)."""
    _, what = CHECKS[check]
    models, finetuned = _records(c, results, check)
    std = [m["accuracy"] for m in models.values() if m["method"] == "std"]
    context: dict = {"chance": round(chance_share, 4)}
    if not std:
        rule = {"error": "no Std model: no reference"}
    else:
        ref = sum(std) / len(std)
        context["reference"] = round(ref, 4)
        rule = (trained.rule_record(trained.TrainedRule(
                    "accuracy", minimum=(chance_share + ref) / 2, what=what,
                    basis=f"halfway from chance {chance_share:.3g} to Std's mean {ref:.3g}"), digits=4)
                if ref > chance_share else
                {"error": f"Std's mean {what} {ref:.3g} is not above chance {chance_share:.3g}: the reference "
                          "itself did not train"})
    return trained.check(models, rule, **context, finetuned=finetuned)


def models_failed(check: dict, methods, *, finetuned: bool = False) -> list[str]:
    """The models of ``methods`` in a check (:func:`trained_check`) that did not train
    (:func:`.trained.check_failures`: a loss that diverged or did not fall by 1 % where recorded —
    outputs measured before have none, and only their scores are checked — or a score below the
    rule's minimum); when the reference did not train, ``Std reference: <why>`` first (every model
    fails) and the losses alone; with ``finetuned`` also the fine-tuning runs that diverged."""
    names = [name for name, m in check["models"].items() if m["method"] in methods]
    rule = check["rule"] or {}
    if "error" in rule:
        failed = [f"Std reference: {rule['error']}"] + trained.check_failures({**check, "rule": None}, names)
    else:
        failed = trained.check_failures(check, names)
    if finetuned:
        failed += [f"{name}: diverged (non-finite training loss)"
                   for name, m in check["context"].get("finetuned", {}).items()
                   if m["method"] in methods and m.get("finite") is False]
    return failed


def failures_by_seed(a: dict, check: str, methods, *, finetuned: bool = False) -> dict[str, str]:
    """Seed → why a model of ``methods`` of that seed in ``check`` did not train (:func:`models_failed`);
    ``"*"`` when the Std reference did not train (every seed fails); {} without the check."""
    section = (a.get("trained") or {}).get(check)
    if not section:
        return {}
    out: dict[str, list[str]] = {}
    for why in models_failed(section, methods, finetuned=finetuned):
        seed = why.split(":", 1)[0].rsplit("seed=", 1)[-1] if "seed=" in why.split(":", 1)[0] else "*"
        out.setdefault(seed, []).append(why)
    return {s: "; ".join(w) for s, w in out.items()}




# ---------------------------------------------------------------------------------- the analysis
def analyse(c: Config, runs: dict, ctx) -> dict:
    """Means ± se over seeds per experiment: ``svd`` (per case), ``mi`` (and ``mi_deep``), ``transfer``
    (each empty when its experiment is not in the config), ``trained`` (did the models train: a
    :func:`trained_check` per check of :data:`CHECKS`); with a λ sweep also ``lambdas``
    (:func:`_lambda_sweep`: the same sections per λ)."""
    results = by_method(runs["train"])
    svd = {}
    if "peak" in c.experiments:
        svd.update(_svd_summary(results, "peak", (None,)))
    if "digits" in c.experiments:
        svd.update(_svd_summary(results, "digits", ("pair", "full")))
    mi = _mi_summary(results) if "mi" in c.experiments else {}
    transfer = _transfer_summary(results) if "transfer" in c.experiments else {}
    shares = chances(c)
    out = {"svd": svd, "mi": mi, "mi_deep": _mi_deep(c, mi, results) if mi else {}, "transfer": transfer,
           "trained": {check: trained_check(c, results, check, shares[check]) for check in CHECKS
                       if check in shares}}
    sweep = _lambda_sweep(c, runs, shares)
    if sweep:  # only then: the analysis of a config without a sweep stays as it was
        out["lambdas"] = sweep
    return out
