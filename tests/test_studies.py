"""Studies: the pipeline (stages, resume, execution apart from science, findings as data, one
results schema, one writer), configs, `vaetransfer run` / `vaetransfer findings`, and the
quickstart study at its smoke preset."""
import dataclasses
import fcntl
import json
import os
import shutil
import textwrap
from pathlib import Path

import pytest
from conftest import finished_work

import vaetransfer
from vaetransfer import cli, config as vconfig, studies
from vaetransfer.studies import pipeline, quickstart
from vaetransfer.studies.kit import declarations

PNG = b"\x89PNG\r\n\x1a\n"
FINDING_KEYS = {"name", "kind", "claim", "source", "rule", "verdict", "reproduced", "effect", "evidence", "reason",
                "figures", "diagnosis"}


@pytest.fixture(scope="module")
def smoke(study_smoke):
    """`vaetransfer run quickstart --preset smoke`, once for the test session: (out_dir, results)."""
    return study_smoke("quickstart")


def _files(out):
    """Snapshots, measurements and step results: path → (size, mtime_ns)."""
    paths = (sorted(out.rglob("snapshots/*.pt")) + sorted(out.rglob(declarations.MEASURED_FILE))
             + sorted((out / declarations.STEPS_DIR).glob("*.json")))
    return {str(p.relative_to(out)): (p.stat().st_size, p.stat().st_mtime_ns) for p in paths}


# ---------------------------------------------------------------------------------- the quickstart study
def test_smoke_run_writes_results_report_and_figures(smoke):
    out, _ = smoke
    study = json.loads((out / "study.json").read_text())
    assert study["study"] == "quickstart" and study["preset"] == "smoke"
    assert study["config"] == vconfig.config_to_dict(quickstart.PRESETS["smoke"])

    results = json.loads((out / "results.json").read_text())
    assert results["config"]["steps"] == 20 and results["config"]["n"] == 512
    runs = results["analysis"]["models"]
    # 2 replicate pairs at smoke: (β = 1 seed 0, β = 8 seed 1, baseline β = 8 seed 0), then seeds 2, 3, 2
    assert set(runs) == {"beta_1_seed_0", "beta_8_seed_1", "beta_8_seed_0", "beta_1_seed_2", "beta_8_seed_3",
                         "beta_8_seed_2"}
    assert all(r["steps"] == 20 and r["loss_last"] < r["loss_first"] for r in runs.values())
    assert results["runs"] == {"train": {"runs": 6, "done": 6, "seconds": results["runs"]["train"]["seconds"]}}
    sim = results["analysis"]["similarity"]
    assert sim["n"] == 64 and len(sim["layers"]) == 15 and "input" not in sim["encoder_layers"]
    pair, baseline = sim["pairs"]["beta_8_seed_1"], sim["pairs"]["beta_8_seed_0"]
    second = sim["pairs"]["beta_8_seed_3"]   # the second replicate: CKA only (Procrustes: the first pair's heatmap)
    assert (second["a"], second["pair"], set(second) & {"cka", "procrustes"}) == ("beta_1_seed_2", 1, {"cka"})
    assert not pair["baseline"] and baseline["baseline"]
    for p in (pair, baseline):
        for measure in ("cka", "procrustes"):
            assert p[measure]["diagonal"]["input"] == 1.0
            assert all(0.0 <= v <= 1.0 for v in p[measure]["diagonal"].values())
            assert all(0.0 <= p[measure][k] <= 1.0 for k in ("encoder_mean", "encoder_diagonal_mean", "decoder_mean"))

    figures = (["dsprites_samples", "dsprites_shapes", "tetrominoes_samples", "tetrominoes_factors", "loss_curves",
                "reconstructions", "traversal_beta_1_seed_0", "traversal_beta_8_seed_1", "heatmap_cka",
                "heatmap_procrustes", "baseline_same_seed"])
    assert sorted(results["figures"]) == sorted(f"{n}.png" for n in figures)
    index = (out / "index.md").read_text()
    for name in figures:
        png = (out / f"{name}.png").read_bytes()
        assert png[:8] == PNG and len(png) > 5_000, name
        assert f"({name}.png)" in index, name
    assert str(pair["cka"]["encoder_mean"]) in index and f"{baseline['cka']['encoder_mean']:.3f}" in index
    assert "not a valid comparison" in index
    assert [f["name"] for f in results["findings"]] == [f.name for f in quickstart.FINDINGS]
    for f in results["findings"]:
        assert set(f) == FINDING_KEYS and f["name"] in index
    assert not list(out.rglob(".*.tmp"))  # atomic writes leave no temporaries


def test_compared_models_have_different_seeds_and_the_baseline_the_same(smoke):
    out, _ = smoke
    saved = {}
    for d in (out / declarations.SWEEPS_DIR / "train" / "runs").iterdir():
        model = json.loads((d / "run.json").read_text())["config"]["args"]["model"]
        saved[model] = json.loads((d / "config.json").read_text())
    (b1, s1), (b8, s8), (b8_base, s8_base) = ((saved[d]["objective"]["beta"], saved[d]["seed"]) for d in
                                              ("beta_1_seed_0", "beta_8_seed_1", "beta_8_seed_0"))
    assert (b1, b8, b8_base) == (1.0, 8.0, 8.0)
    assert s1 != s8 and (s1, s8) == (0, 1)  # the compared pair
    assert s8_base == s1                     # the baseline: same initial weights as β = 1
    assert all(c["threads"] is None and c["device"] == "cpu" for c in saved.values())  # no execution in a run's identity
    pairs = json.loads((out / "results.json").read_text())["analysis"]["similarity"]["pairs"]
    assert (pairs["beta_8_seed_1"]["a_seed"], pairs["beta_8_seed_1"]["b_seed"]) == (0, 1)
    assert (pairs["beta_8_seed_0"]["a_seed"], pairs["beta_8_seed_0"]["b_seed"]) == (0, 0)


def test_rerun_reuses_finished_work_also_under_other_execution_settings(smoke):
    out, _ = smoke
    before = _files(out)
    assert any(p.endswith(".pt") for p in before) and any(p.endswith(declarations.MEASURED_FILE) for p in before)
    assert cli.main(["run", "quickstart", "--preset", "smoke", "--out", str(out), "--quiet"]) == 0
    assert _files(out) == before  # no snapshot retrained, no run re-measured, no step redone (file times included)
    assert cli.main(["run", "quickstart", "--preset", "smoke", "--out", str(out), "--quiet", "--workers", "2",
                     "--threads", "1"]) == 0
    assert _files(out) == before  # other execution settings: the same study, resumed
    results = json.loads((out / "results.json").read_text())
    assert results["execution"]["workers"] == 2 and results["execution"]["threads"] == 1


def test_set_reaches_the_config_and_an_incompatible_rerun_is_refused(smoke, tmp_path, monkeypatch, capsys):
    out, _ = smoke
    assert cli.main(["run", "quickstart", "--preset", "smoke", "--set", "steps=21", "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "argument 'out_dir'" in err and "steps" in err
    with pytest.raises(vaetransfer.ArgumentError) as info:
        studies.run_study("quickstart", out, preset="smoke", sets=["seed=3"], progress=False)
    assert info.value.argument == "out_dir"

    seen = {}
    monkeypatch.setattr(pipeline, "run", lambda study, config, out_dir, **kw: seen.update(config=config, **kw) or {})
    fresh = tmp_path / "fresh"
    assert cli.main(["run", "quickstart", "--preset", "smoke", "--set", "steps=7", "--set", "betas=[1, 4]",
                     "--set", "procrustes=false", "--out", str(fresh), "--workers", "3", "--track", "tensorboard"]) == 0
    assert (seen["config"].steps, seen["config"].betas, seen["config"].procrustes) == (7, (1.0, 4.0), False)
    assert seen["execution"] == studies.Execution(workers=3, tracking=("tensorboard",))
    # Another study's directory is refused (by the pipeline, before anything runs).
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "study.json").write_text(json.dumps({"study": "other", "config": {}}))
    monkeypatch.undo()
    with pytest.raises(vaetransfer.ArgumentError, match="holds the study 'other'") as info:
        studies.run_study("quickstart", tmp_path / "other", preset="smoke")
    assert info.value.argument == "out_dir"


def test_quickstart_config_checks_its_values():
    for item, argument in (("steps=0", "steps"), ("n=-1", "n"), ("similarity_n=10000000", "similarity_n"),
                           ("lr=0", "lr"), ("threads=2", "threads")):
        with pytest.raises(vaetransfer.ArgumentError) as info:
            studies.make_config("quickstart", "smoke", sets=[item])
        assert info.value.argument == argument  # threads is an execution setting, not a config field
    with pytest.raises(vaetransfer.ArgumentTypeError) as info:
        pipeline.run(quickstart.STUDY, vconfig.config_to_dict(quickstart.PRESETS["smoke"]), "unused")
    assert info.value.argument == "config"


def _quickstart_analysis(kl=(5.0, 1.0), enc=0.9, dec=0.5, base_enc=0.95, losses=(100.0, 50.0), jitter=0.01):
    """A synthetic quickstart analysis over the 3 replicate pairs of Config(): each pair's quadrants
    (``enc``/``dec``/``base_enc`` ± ``jitter`` by pair: a spread over the units), each model's loss and KL."""
    c = quickstart.Config()
    models, pairs = {}, {}
    for p in quickstart.pairs(c):
        shift = jitter * (p.k - 1)
        for m, k in ((p.a, kl[0]), (p.b, kl[1]), (p.base, 1.0)):
            models[m.dir] = {"loss_first": losses[0], "loss_last": losses[1], "kl_last": k}
        pairs[p.b.dir] = {"cka": {"encoder_mean": enc + shift, "decoder_mean": dec}}
        pairs[p.base.dir] = {"cka": {"encoder_mean": base_enc + 2 * shift, "decoder_mean": dec}}
    return {"models": models, "similarity": {"pairs": pairs}}


@pytest.mark.parametrize("finding, analysis, config, expected", [
    ("encoder_alike_decoder_less", {}, {}, "reproduced"),
    ("encoder_alike_decoder_less", {"enc": 0.4}, {}, "contradicted"),
    ("encoder_alike_decoder_less", {"enc": 0.5, "jitter": 0.3}, {}, "undecided"),   # inside the noise: no verdict
    ("encoder_alike_decoder_less", {"enc": 0.5, "jitter": 0.001}, {}, "absent"),    # excludes 0.05, not 0
    ("encoder_alike_decoder_less", {"losses": (100.0, 100.0)}, {}, "undecided"),   # no model trained
    ("same_seed_inflates_similarity", {}, {}, "reproduced"),
    ("same_seed_inflates_similarity", {"base_enc": 0.8}, {}, "contradicted"),
    ("same_seed_inflates_similarity", {}, {"same_seed_baseline": False}, "undecided"),
    ("higher_beta_lower_kl", {}, {}, "passed"),
    ("higher_beta_lower_kl", {"kl": (1.0, 5.0)}, {}, "failed"),
    ("higher_beta_lower_kl", {}, {"betas": (4.0, 4.0)}, "undecided"),
])
def test_quickstart_findings_rules(finding, analysis, config, expected):
    f = next(f for f in quickstart.FINDINGS if f.name == finding)
    record = f.judge(dataclasses.replace(quickstart.Config(), **config), _quickstart_analysis(**analysis))
    assert record["verdict"] == expected and set(record) == FINDING_KEYS
    assert record["kind"] == ("sanity" if finding == "higher_beta_lower_kl" else "finding")
    assert (record["reason"] is None) == (expected not in ("undecided", "absent", "contradicted"))
    if record["effect"] and expected != "undecided":
        part = record["effect"]["parts"]["dSprites"]
        assert part["n"] == 3 and part["method"] == "independent units"   # 3 pairs of disjoint seeds


# ---------------------------------------------------------------------------------- the command line
def test_run_list(capsys):
    assert cli.main(["run", "--list"]) == 0
    text = capsys.readouterr().out
    for name in studies.available():
        assert name in text
    assert "smoke, small, medium, paper" in text
    assert quickstart.__doc__.strip().splitlines()[0] in text


@pytest.mark.parametrize("argv, argument", [
    (["run", "nope", "--out", "x"], "study"),
    (["run", "quickstart", "--preset", "huge", "--out", "x"], "preset"),
    (["run", "quickstart", "--set", "stepz=3", "--out", "x"], "stepz"),
    (["run", "quickstart", "--set", "steps=many", "--out", "x"], "steps"),
    (["run", "quickstart", "--config", "missing.json", "--out", "x"], "config_file"),
    (["run", "quickstart", "--workers", "0", "--out", "x"], "workers"),
    (["run", "quickstart", "--executor", "slurm", "--out", "x"], "executor"),
    (["run", "quickstart", "--threads", "0", "--out", "x"], "threads"),
    (["findings", "missing_dir"], "dirs"),
    (["run", ".relative", "--out", "x"], "study"),
    (["run", "quickstart", "--set", "steps", "--out", "x"], "set"),
    (["run", "quickstart", "--set", "steps=[1", "--out", "x"], "steps"),
    (["run", "quickstart", "--set", "steps.x=3", "--out", "x"], "steps.x"),
    (["run", "quickstart", "--cpus-per-run", "-1", "--out", "x"], "cpus_per_run"),
])
def test_bad_run_arguments_are_named(argv, argument, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"argument '{argument}'" in err[0], err  # one line, no traceback
    assert not (tmp_path / "x").exists()  # refused before anything is written


def test_run_needs_a_study_and_out(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["run", "quickstart"])
    assert info.value.code == 2 and "--out" in capsys.readouterr().err


# ---------------------------------------------------------------------------------- a study of one's own
FAKE = '''
"""A fake study: two stages, one finding, for the pipeline's tests."""
import json
import os
from dataclasses import dataclass

from vaetransfer.studies import Finding, Stage, Study, undecided
from vaetransfer.studies.kit.decision import Effect, Part


@dataclass
class Config:
    seeds: tuple[int, ...] = (0, 1)
    value: float = 2.0


PRESETS = {"smoke": Config(seeds=(0,)), "small": Config(), "medium": Config(seeds=(0, 1)), "paper": Config(seeds=(0, 1, 2))}


def _first_runs(c, earlier):
    return [{"seed": s} for s in c.seeds]


def _first(c, row, job):
    from vaetransfer import tracking
    (job.run_dir / "trackers.txt").write_text(",".join(tracking.active()))  # what a training here reports to
    return {"y": c.value * (row["seed"] + 1), "pid": os.getpid(), "nested": {"deep": [1, 2]}}


def _second_runs(c, earlier):
    return [{"source": r.row["seed"]} for r in earlier["first"]]


def _second(c, row, job):
    source = job.run_dir_of("first", seed=row["source"])
    return {"z": json.loads((source / "measured.json").read_text())["y"] + 1}


def _analyse(c, runs, ctx):
    calls = ctx.step("counted", lambda: len(runs["first"]))
    return {"ys": [r["y"] for r in runs["first"]], "zs": [r["z"] for r in runs["second"]], "calls": calls}


def _decide(c, a):
    if len(a["ys"]) < 2:
        return undecided("one seed cannot decide", ys=a["ys"])
    return Effect("z minus twice y", "seed", {"all": Part.of_seeds({s: z - 2 * y for s, (y, z) in
                                                                    enumerate(zip(a["ys"], a["zs"]))})},
                  size=1.0, size_source="a test's", evidence={"z": a["zs"][1], "y": a["ys"][1]})


STUDY = Study(name="fake", title="A fake study", config=Config, presets=PRESETS,
              stages=(Stage("first", _first_runs, _first), Stage("second", _second_runs, _second)),
              analyse=_analyse,
              findings=(Finding("z_doubles_y", "z is more than twice y", "Nobody (2026), §0",
                                "the second seed's z above twice its y", _decide),),
              report=lambda r: "## Fake\\n\\nys: " + ", ".join(str(y) for y in r["analysis"]["ys"]))
'''


@pytest.fixture
def fake_study(tmp_path, monkeypatch):
    """An importable study module outside the package (workers find it through PYTHONPATH)."""
    (tmp_path / "fake_study_mod.py").write_text(textwrap.dedent(FAKE))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    return "fake_study_mod"


def test_pipeline_runs_stages_in_order_and_writes_one_schema(fake_study, tmp_path):
    out = tmp_path / "out"
    r = studies.run_study(fake_study, out, progress=False)
    assert json.loads((out / "results.json").read_text()) == r
    assert set(r) == {"schema", "study", "title", "preset", "config", "execution", "build_info", "runs", "analysis",
                      "findings", "figures", "seconds", "code"}
    assert r["schema"] == declarations.RESULTS_SCHEMA and r["study"] == "fake" and r["preset"] == "small"
    assert r["analysis"] == {"ys": [2.0, 4.0], "zs": [3.0, 5.0], "calls": 2}
    assert r["runs"]["first"]["runs"] == r["runs"]["first"]["done"] == 2
    (f,) = r["findings"]
    effect = f.pop("effect")
    reason = f.pop("reason")
    assert f == {"name": "z_doubles_y", "kind": "finding", "claim": "z is more than twice y",
                 "source": "Nobody (2026), §0", "rule": "the second seed's z above twice its y",
                 "verdict": "undecided", "reproduced": None, "evidence": {"z": 5.0, "y": 4.0}, "figures": [],
                 "diagnosis": None}
    # z − 2y = −1 and −3 over the two seeds: mean −2, se 1, a t(1) interval of ±12.7 — the pipeline, not the
    # study, finds two seeds too few and says how many would decide it
    part = effect["parts"]["all"]
    assert part["units"] == {"seed=0": -1.0, "seed=1": -3.0} and part["mean"] == -2.0 and part["se"] == 1.0
    assert reason.startswith("all: underpowered") and part["units_needed"] > 2
    index = (out / "index.md").read_text()
    assert index.startswith("# A fake study") and "ys: 2.0, 4.0" in index and "**– undecided**" in index
    # The runs are sweeps of the generic job; each run's row is all its arguments besides study, stage, config.
    from vaetransfer import sweep
    s = sweep.open_sweep(out / declarations.SWEEPS_DIR / "first")
    assert [spec.config["args"]["seed"] for spec in s.runs] == [0, 1]
    assert [row["y"] for row in s.results()] == [2.0, 4.0]  # the numbers reach the sweep's store


def test_pipeline_resumes_under_other_execution_and_undecided_findings(fake_study, tmp_path):
    out = tmp_path / "out"
    first = studies.run_study(fake_study, out, progress=False)
    measured = sorted(out.rglob(declarations.MEASURED_FILE))
    stamps = [p.stat().st_mtime_ns for p in measured]
    again = studies.run_study(fake_study, out, progress=False,
                              execution=studies.Execution(workers=2, threads=1))
    assert [p.stat().st_mtime_ns for p in measured] == stamps  # nothing re-measured
    assert again["analysis"] == first["analysis"] and again["execution"]["workers"] == 2
    assert {p.read_text() for p in out.rglob("trackers.txt")} == {""}
    tracked = studies.run_study(fake_study, tmp_path / "tracked", progress=False,
                                execution=studies.Execution(tracking=("tensorboard",)))
    assert list(tracked["execution"]["tracking"]) == ["tensorboard"]  # every run's trainings report there
    assert [p.read_text() for p in (tmp_path / "tracked").rglob("trackers.txt")] == ["tensorboard"] * 2
    smoke = studies.run_study(fake_study, tmp_path / "smoke", preset="smoke", progress=False)
    (f,) = smoke["findings"]
    assert f["reproduced"] is None and f["reason"] == "one seed cannot decide" and f["evidence"] == {"ys": [2.0]}
    assert "undecided" in (tmp_path / "smoke" / "index.md").read_text()


def test_one_writer_per_study_directory(fake_study, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    with open(out / ".lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another process running the study
        with pytest.raises(vaetransfer.ArgumentError, match="another process") as info:
            studies.run_study(fake_study, out, progress=False)
    assert info.value.argument == "out_dir" and not (out / "study.json").exists()


def test_findings_command_over_two_outputs(fake_study, smoke, tmp_path, capsys):
    studies.run_study(fake_study, tmp_path / "fake", preset="smoke", progress=False)
    out, _ = smoke
    assert cli.main(["findings", str(out), str(tmp_path / "fake")]) == 0
    text = capsys.readouterr().out
    for f in quickstart.FINDINGS:
        assert f.name in text
    assert "z_doubles_y" in text and "one seed cannot decide" in text
    # smoke quickstart models do not train: undecided; its KL check is a sanity check, counted apart
    assert "3 findings: 3 undecided" in text and "1 sanity checks: 1 undecided" in text
    assert cli.main(["findings", "--json", str(out), str(tmp_path / "fake" / "results.json")]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["study"] for r in rows] == ["quickstart"] * 3 + ["fake"]
    assert all(FINDING_KEYS <= set(r) for r in rows)


def test_a_study_declaration_is_checked():
    base = dict(name="x", title="X", config=quickstart.Config, stages=(), analyse=lambda c, r, x: {})
    with pytest.raises(vaetransfer.ArgumentError, match="medium"):
        studies.Study(presets={"smoke": quickstart.Config(), "small": quickstart.Config()}, **base)
    with pytest.raises(vaetransfer.ArgumentError, match="small"):
        studies.Study(presets={**quickstart.PRESETS, "small": quickstart.PRESETS["smoke"]}, **base)
    with pytest.raises(vaetransfer.ArgumentError, match="reason"):
        studies.Verdict(None)
    with pytest.raises(vaetransfer.ArgumentTypeError):
        studies.Verdict(1)
    with pytest.raises(vaetransfer.ArgumentError) as info:
        studies.Execution(executor="local", address="auto")
    assert info.value.argument == "address"


# ---------------------------------------------------------------------------------- configs
def test_available_studies_follow_the_protocol():
    names = studies.available()
    assert {"quickstart", "transfer", "rate_distortion", "finetune_similarity", "rr_pretraining", "t5_pretrain",
            "t5_vae"} == set(names)
    for name in names:
        study = studies.get_study(name)
        assert study.name == name
        assert set(declarations.REQUIRED_PRESETS) <= set(study.presets)
        assert vconfig.config_to_dict(study.config()) == vconfig.config_to_dict(study.presets["small"])
        fields = {f.name for f in dataclasses.fields(study.config)}
        assert not fields & {"executor", "workers", "threads", "address"}, name  # execution stays apart
        for preset in study.presets.values():
            assert isinstance(preset, study.config)
            d = vconfig.config_to_dict(preset)
            assert json.loads(json.dumps(d)) == d
            assert vconfig.config_from_dict(study.config, d) == preset
        assert study.findings, name  # every study decides something
    with pytest.raises(vaetransfer.ArgumentError) as info:
        studies.get("nope")
    assert info.value.argument == "study"
    with pytest.raises(vaetransfer.ArgumentTypeError) as info:
        studies.get(3)
    assert info.value.argument == "study"


@dataclasses.dataclass
class Inner:
    width: int = 4
    rate: float = 0.5
    tags: tuple[str, ...] = ("a",)


@dataclasses.dataclass
class FakeConfig:
    seed: int = 2
    name: str = "x"
    flag: bool = False
    sizes: tuple[int, int] = (1, 2)
    items: list[float] = dataclasses.field(default_factory=list)
    inner: Inner = dataclasses.field(default_factory=lambda: Inner(width=16))
    count: int | None = None


def _fake_declaration():
    return studies.Study(name="fake", title="Fake", config=FakeConfig,
                         presets={"smoke": FakeConfig(seed=1), "small": FakeConfig(), "medium": FakeConfig(seed=2),
                                  "paper": FakeConfig(seed=3)},
                         stages=(), analyse=lambda c, runs, ctx: {})


def test_make_config_layers_preset_file_and_sets(tmp_path):
    fake = _fake_declaration()
    assert studies.make_config(fake, "small") == FakeConfig()
    assert studies.make_config(fake, "small") is not fake.presets["small"]  # presets are never mutated
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"seed": 5, "inner": {"rate": 2}, "sizes": [7, 8]}))
    c = studies.make_config(fake, "small", path, sets=[
        "seed=6", "inner.tags=[\"b\", \"c\"]", "name=123", "flag=true", "items=[1, 2.5]", "count=2"])
    assert c == FakeConfig(seed=6, name="123", flag=True, sizes=(7, 8), items=[1.0, 2.5], count=2,
                           inner=Inner(width=16, rate=2.0, tags=("b", "c")))
    assert isinstance(c.inner.rate, float) and isinstance(c.sizes, tuple)
    assert studies.make_config(fake, "small", sets=["count=null", "name=plain text", "flag=False"]) == \
        FakeConfig(name="plain text")
    assert studies.make_config(fake, "small", sets=["inner={\"width\": 3}"]).inner == Inner(width=3)


@pytest.mark.parametrize("item, cls, argument", [
    ("inner.width=2.5", vaetransfer.ArgumentTypeError, "inner.width"),
    ("inner.nope=1", vaetransfer.ArgumentError, "inner.nope"),
    ("seed.x=1", vaetransfer.ArgumentError, "seed.x"),
    ("seed=\"3\"", vaetransfer.ArgumentTypeError, "seed"),
    ("seed=true", vaetransfer.ArgumentTypeError, "seed"),
    ("flag=1", vaetransfer.ArgumentTypeError, "flag"),
    ("sizes=[1]", vaetransfer.ArgumentError, "sizes"),
    ("sizes=[1, \"a\"]", vaetransfer.ArgumentTypeError, "sizes[1]"),
    ("sizes=3", vaetransfer.ArgumentTypeError, "sizes"),
    ("items=[\"a\"]", vaetransfer.ArgumentTypeError, "items[0]"),
    ("count=x", vaetransfer.ArgumentTypeError, "count"),
    ("inner=3", vaetransfer.ArgumentTypeError, "inner"),
    ("noequals", vaetransfer.ArgumentError, "set"),
])
def test_make_config_type_checks_name_the_key(item, cls, argument):
    with pytest.raises(cls) as info:
        studies.make_config(_fake_declaration(), "smoke", sets=[item])
    assert info.value.argument == argument


def test_make_config_file_and_preset_errors(tmp_path):
    fake = _fake_declaration()
    for text, argument in (("{\"inner\": {\"zzz\": 1}}", "inner.zzz"), ("[1, 2]", "config_file"), ("{oops", "config_file")):
        (tmp_path / "c.json").write_text(text)
        with pytest.raises(vaetransfer.ArgumentError) as info:
            studies.make_config(fake, "smoke", tmp_path / "c.json")
        assert info.value.argument == argument
    with pytest.raises(vaetransfer.ArgumentError) as info:
        studies.make_config(fake, "huge")
    assert info.value.argument == "preset" and "smoke, small, medium, paper" in str(info.value)


def test_config_dict_round_trip():
    c = FakeConfig(sizes=(3, 4), inner=Inner(tags=("p", "q")))
    d = vconfig.config_to_dict(c)
    assert d["sizes"] == [3, 4] and d["inner"] == {"width": 4, "rate": 0.5, "tags": ["p", "q"]}
    assert vconfig.config_from_dict(FakeConfig, json.loads(json.dumps(d))) == c
    assert vconfig.config_from_dict(FakeConfig, {"inner": {"width": 9}}) == FakeConfig(inner=Inner(width=9))
    with pytest.raises(vaetransfer.ArgumentError) as info:
        vconfig.config_from_dict(FakeConfig, {**d, "inner": {**d["inner"], "zzz": 1}})
    assert info.value.argument == "inner.zzz"


def test_a_record_written_before_a_field_existed_resumes_with_its_default(tmp_path, monkeypatch):
    """A study directory recorded by an older version (a field missing from study.json) resumes when
    the field has its default, and is refused when it is set to something else."""
    seen = []
    real_run = pipeline.run

    def no_stages(study, config, out_dir, **kw):  # the pinning only: no training
        seen.append(config)
        return real_run(dataclasses.replace(study, stages=(), analyse=lambda c, r, x: {}, figures=None, findings=(),
                                            report=None), config, out_dir, **kw)

    monkeypatch.setattr(pipeline, "run", no_stages)
    out = tmp_path / "old"
    studies.run_study("quickstart", out, preset="smoke", progress=False)
    record = json.loads((out / "study.json").read_text())
    del record["config"]["procrustes"]  # as if the field had been added after the run
    (out / "study.json").write_text(json.dumps(record))
    studies.run_study("quickstart", out, preset="smoke", progress=False)
    assert len(seen) == 2
    assert "procrustes" in json.loads((out / "study.json").read_text())["config"]  # the record is brought up to date
    default = quickstart.PRESETS["smoke"].procrustes
    with pytest.raises(vaetransfer.ArgumentError, match="procrustes") as info:
        studies.run_study("quickstart", out, preset="smoke", sets=[f"procrustes={str(not default).lower()}"],
                          progress=False)
    assert info.value.argument == "out_dir"


def test_runs_declared_before_a_field_existed_are_reused(fake_study, tmp_path):
    """A stage's sweep declared by an older version (its config without a field that now exists, at
    its default) keeps its runs: adding a field to a study never retrains what a directory holds."""
    out = tmp_path / "out"
    studies.run_study(fake_study, out, progress=False)
    for path in [out / "study.json", *sorted((out / declarations.SWEEPS_DIR).glob("*/sweep.json"))]:
        record = json.loads(path.read_text())
        config = record["config"] if path.name == "study.json" else record["base"]["args"]["config"]
        del config["value"]  # as if `value` (default 2.0) had been added after the runs
        path.write_text(json.dumps(record))
    measured = sorted(out.rglob(declarations.MEASURED_FILE))
    stamps = [p.stat().st_mtime_ns for p in measured]
    again = studies.run_study(fake_study, out, progress=False)
    assert measured and [p.stat().st_mtime_ns for p in measured] == stamps
    assert again["analysis"]["ys"] == [2.0, 4.0]


def test_step_runs_once_per_key_and_outputs(tmp_path):
    calls = []

    def compute():
        calls.append(1)
        (tmp_path / "fig.png").write_bytes(b"x")
        return {"value": (1, 2)}

    run = lambda key=None: studies.step(tmp_path, "figs", compute, key=key, outputs=[tmp_path / "fig.png"])
    assert run() == {"value": [1, 2]} and len(calls) == 1  # returned as a re-run reads it back
    assert run() == {"value": [1, 2]} and len(calls) == 1
    (tmp_path / "fig.png").unlink()
    run()
    assert len(calls) == 2  # a missing output redoes the step
    run(key={"step": 5})
    run(key={"step": 5})
    assert len(calls) == 3  # a new key redoes it once
    with pytest.raises(vaetransfer.ArgumentError):
        studies.step(tmp_path, "../escape", compute)


# ---------------------------------------------------------------------------------- every registered study
@pytest.mark.parametrize("name", studies.available())
def test_every_study_runs_at_smoke_with_one_schema_and_resumes(name, study_smoke, tmp_path):
    out, r = study_smoke(name)
    study = studies.get_study(name)
    assert set(r) == {"schema", "study", "title", "preset", "config", "execution", "build_info", "runs", "analysis",
                      "findings", "figures", "seconds", "code"}
    assert (r["schema"], r["study"], r["preset"], r["title"]) == (declarations.RESULTS_SCHEMA, name, "smoke", study.title)
    assert r["config"] == vconfig.config_to_dict(study.presets["smoke"])
    assert set(r["runs"]) == {s.name for s in study.stages}
    for stage, counts in r["runs"].items():
        assert set(counts) == {"runs", "done", "seconds"} and counts["done"] == counts["runs"], stage
    assert [f["name"] for f in r["findings"]] == [f.name for f in study.findings]
    for f in r["findings"]:
        assert set(f) == FINDING_KEYS
        assert f["reproduced"] in (True, False, None) and isinstance(f["evidence"], dict)
        assert all(isinstance(f[k], str) and f[k] for k in ("claim", "source", "rule"))
        assert f["kind"] in ("finding", "sanity") and (f["reproduced"] is None) == (f["verdict"] == "undecided")
        assert f["reason"] or f["verdict"] != "undecided"
        assert (f["effect"] is not None) <= (f["kind"] == "finding")
    index = (out / "index.md").read_text()
    assert index.startswith(f"# {study.title}")
    for f in r["findings"]:
        assert f"`{f['name']}`" in index
    for fig in r["figures"]:
        assert (out / fig).read_bytes()[:8] == PNG and f"({fig})" in index, fig
    # A second run reuses everything: no run re-measured, no snapshot rewritten, no step redone —
    # also when the output folder has moved (a copy elsewhere: nothing may be keyed by its path).
    before = finished_work(out)
    assert before
    assert str(out) not in (out / declarations.RESULTS_FILE).read_text()  # no absolute path of the output in its results
    moved = tmp_path / "moved" / name
    shutil.copytree(out, moved)
    again = studies.run_study(name, moved, preset="smoke", progress=False,
                              execution=studies.Execution(workers=2, threads=1))
    assert finished_work(moved) == before
    assert again["analysis"] == r["analysis"] and again["findings"] == r["findings"]


def test_results_name_the_code_that_made_them(monkeypatch):
    """``results["code"]``: the git commit of the package's source and whether the package or the core had
    uncommitted changes; None where git cannot say (an installed copy, no git)."""
    import subprocess
    here = pipeline.code_version()
    if here is not None:   # a checkout (CI's clean clone, a developer's tree)
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(pipeline.__file__).parent, capture_output=True,
                              text=True).stdout.strip()
        assert here["commit"] == head and isinstance(here["dirty"], bool)

    def no_git(*args, **kwargs):
        raise FileNotFoundError("git")
    monkeypatch.setattr(subprocess, "run", no_git)
    assert pipeline.code_version() is None
