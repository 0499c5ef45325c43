"""Studies: the framework (discovery, typed configs, resumable runs, `vaetransfer run`) and the
quickstart study, run once per module with its smoke preset."""
import dataclasses
import json
import time
import types

import pytest

import vaetransfer
from vaetransfer import cli, experiments
from vaetransfer.experiments import quickstart

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """`vaetransfer run quickstart --preset smoke`, once for the module: (out_dir, seconds)."""
    out = tmp_path_factory.mktemp("studies") / "quickstart"
    start = time.perf_counter()
    assert cli.main(["run", "quickstart", "--preset", "smoke", "--out", str(out), "--quiet"]) == 0
    return out, time.perf_counter() - start


def _files(out):
    """Snapshot files and step results: path → (size, mtime_ns)."""
    paths = sorted(out.glob("*/snapshots/*.pt")) + sorted((out / experiments.STEPS_DIR).glob("*.json"))
    return {str(p.relative_to(out)): (p.stat().st_size, p.stat().st_mtime_ns) for p in paths}


# ---------------------------------------------------------------------------------- the quickstart study
def test_smoke_run_writes_results_report_and_figures(smoke):
    out, _ = smoke
    study = json.loads((out / "study.json").read_text())
    assert study["study"] == "quickstart" and study["preset"] == "smoke"
    assert study["config"] == experiments.config_to_dict(quickstart.PRESETS["smoke"])

    results = json.loads((out / "results.json").read_text())
    assert results["config"]["steps"] == 20 and results["config"]["n"] == 512
    runs = results["training"]["runs"]
    assert set(runs) == {"beta_1_seed_0", "beta_8_seed_1", "beta_8_seed_0"}
    assert all(r["steps"] == 20 and r["loss_last"] < r["loss_first"] for r in runs.values())
    sim = results["similarity"]
    assert sim["n"] == 64 and len(sim["layers"]) == 15 and "input" not in sim["encoder_layers"]
    for pair in (sim["pair"], sim["baseline"]):
        for measure in ("cka", "procrustes"):
            assert pair[measure]["diagonal"]["input"] == 1.0
            assert all(0.0 <= v <= 1.0 for v in pair[measure]["diagonal"].values())
            assert all(0.0 <= pair[measure][k] <= 1.0 for k in ("encoder_mean", "encoder_diagonal_mean", "decoder_mean"))

    figures = (["dsprites_samples", "dsprites_shapes", "tetrominoes_samples", "tetrominoes_factors", "loss_curves",
                "reconstructions", "traversal_beta_1_seed_0", "traversal_beta_8_seed_1", "heatmap_cka",
                "heatmap_procrustes", "baseline_same_seed"])
    index = (out / "index.md").read_text()
    for name in figures:
        png = (out / f"{name}.png").read_bytes()
        assert png[:8] == PNG and len(png) > 5_000, name
        assert f"({name}.png)" in index, name
    assert str(sim["pair"]["cka"]["encoder_mean"]) in index and str(sim["baseline"]["cka"]["encoder_mean"]) in index
    assert "not a valid comparison" in index
    assert not list(out.rglob(".*.tmp"))  # atomic writes leave no temporaries


def test_compared_models_have_different_seeds_and_the_baseline_the_same(smoke):
    out, _ = smoke
    saved = {d: json.loads((out / d / "config.json").read_text()) for d in
             ("beta_1_seed_0", "beta_8_seed_1", "beta_8_seed_0")}
    (b1, s1), (b8, s8), (b8_base, s8_base) = ((c["objective"]["beta"], c["seed"]) for c in saved.values())
    assert (b1, b8, b8_base) == (1.0, 8.0, 8.0)
    assert s1 != s8 and (s1, s8) == (0, 1)  # the compared pair
    assert s8_base == s1                     # the baseline: same initial weights as β = 1
    sim = json.loads((out / "results.json").read_text())["similarity"]
    assert (sim["pair"]["a_seed"], sim["pair"]["b_seed"]) == (0, 1)
    assert (sim["baseline"]["a_seed"], sim["baseline"]["b_seed"]) == (0, 0)


def test_rerun_reuses_finished_work(smoke):
    out, _ = smoke
    before = _files(out)
    assert any(p.endswith(".pt") for p in before)
    assert cli.main(["run", "quickstart", "--preset", "smoke", "--out", str(out), "--quiet"]) == 0
    assert _files(out) == before  # no snapshot retrained, no step redone (file times included)


def test_set_reaches_the_config_and_an_incompatible_rerun_is_refused(smoke, tmp_path, monkeypatch, capsys):
    out, _ = smoke
    assert cli.main(["run", "quickstart", "--preset", "smoke", "--set", "steps=21", "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "argument 'out_dir'" in err and "steps" in err
    with pytest.raises(vaetransfer.ArgumentError) as info:
        experiments.run_study("quickstart", out, preset="smoke", sets=["seed=3"], progress=False)
    assert info.value.argument == "out_dir"

    seen = {}
    monkeypatch.setattr(quickstart, "run", lambda config, out_dir, progress=True: seen.update(config=config) or {})
    fresh = tmp_path / "fresh"
    assert cli.main(["run", "quickstart", "--preset", "smoke", "--set", "steps=7", "--set", "betas=[1, 4]",
                     "--set", "procrustes=false", "--out", str(fresh)]) == 0
    assert (seen["config"].steps, seen["config"].betas, seen["config"].procrustes) == (7, (1.0, 4.0), False)
    assert json.loads((fresh / "study.json").read_text())["config"]["steps"] == 7
    # Another study's directory is refused too.
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "study.json").write_text(json.dumps({"study": "other", "config": {}}))
    with pytest.raises(vaetransfer.ArgumentError, match="holds the study 'other'") as info:
        experiments.run_study("quickstart", tmp_path / "other", preset="smoke")
    assert info.value.argument == "out_dir"


def test_a_record_written_before_a_field_existed_resumes_with_its_default(tmp_path, monkeypatch):
    """A study directory recorded by an older version (a field missing from study.json) resumes when
    the field has its default, and is refused when it is set to something else."""
    monkeypatch.setattr(quickstart, "run", lambda config, out_dir, progress=True: {"ran": True})
    out = tmp_path / "old"
    assert experiments.run_study("quickstart", out, preset="smoke", progress=False) == {"ran": True}
    record = json.loads((out / "study.json").read_text())
    del record["config"]["procrustes"]  # as if the field had been added after the run
    (out / "study.json").write_text(json.dumps(record))
    assert experiments.run_study("quickstart", out, preset="smoke", progress=False) == {"ran": True}
    assert "procrustes" in json.loads((out / "study.json").read_text())["config"]  # the record is brought up to date
    default = quickstart.PRESETS["smoke"].procrustes
    with pytest.raises(vaetransfer.ArgumentError, match="procrustes") as info:
        experiments.run_study("quickstart", out, preset="smoke", sets=[f"procrustes={str(not default).lower()}"],
                              progress=False)
    assert info.value.argument == "out_dir"


def test_quickstart_config_checks_its_values():
    for item, argument in (("steps=0", "steps"), ("n=-1", "n"), ("similarity_n=10000000", "similarity_n"),
                           ("lr=0", "lr"), ("threads=0", "threads")):
        with pytest.raises(vaetransfer.ArgumentError) as info:
            experiments.make_config("quickstart", "smoke", sets=[item])
        assert info.value.argument == argument
    with pytest.raises(vaetransfer.ArgumentTypeError) as info:
        quickstart.run(experiments.config_to_dict(quickstart.PRESETS["smoke"]), "unused")
    assert info.value.argument == "config"


# ---------------------------------------------------------------------------------- the command line
def test_run_list(capsys):
    assert cli.main(["run", "--list"]) == 0
    text = capsys.readouterr().out
    assert "quickstart" in text and "smoke, small, paper" in text
    assert quickstart.__doc__.strip().splitlines()[0] in text


@pytest.mark.parametrize("argv, argument", [
    (["run", "nope", "--out", "x"], "study"),
    (["run", "quickstart", "--preset", "huge", "--out", "x"], "preset"),
    (["run", "quickstart", "--set", "stepz=3", "--out", "x"], "stepz"),
    (["run", "quickstart", "--set", "steps=many", "--out", "x"], "steps"),
    (["run", "quickstart", "--config", "missing.json", "--out", "x"], "config_file"),
])
def test_bad_run_arguments_are_named(argv, argument, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(argv) == 2
    assert f"argument '{argument}'" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()  # refused before anything is written


def test_run_needs_a_study_and_out(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["run", "quickstart"])
    assert info.value.code == 2 and "--out" in capsys.readouterr().err


# ---------------------------------------------------------------------------------- the framework
def test_available_studies_follow_the_protocol():
    names = experiments.available()
    assert "quickstart" in names
    for name in names:
        study = experiments.get(name)
        assert {"smoke", "small", "paper"} <= set(study.PRESETS)
        for preset in study.PRESETS.values():
            assert isinstance(preset, study.Config)
            d = experiments.config_to_dict(preset)
            assert json.loads(json.dumps(d)) == d
            assert experiments.config_from_dict(study.Config, d) == preset
    with pytest.raises(vaetransfer.ArgumentError) as info:
        experiments.get("nope")
    assert info.value.argument == "study"
    with pytest.raises(vaetransfer.ArgumentTypeError) as info:
        experiments.get(3)
    assert info.value.argument == "study"


@dataclasses.dataclass
class Inner:
    width: int = 4
    rate: float = 0.5
    tags: tuple[str, ...] = ("a",)


@dataclasses.dataclass
class FakeConfig:
    seed: int = 0
    name: str = "x"
    flag: bool = False
    sizes: tuple[int, int] = (1, 2)
    items: list[float] = dataclasses.field(default_factory=list)
    inner: Inner = dataclasses.field(default_factory=Inner)
    threads: int | None = None


def _fake_study():
    m = types.ModuleType("vaetransfer.experiments.fake")
    m.Config = FakeConfig
    m.PRESETS = {"smoke": FakeConfig(seed=1), "small": FakeConfig(seed=2, inner=Inner(width=16)), "paper": FakeConfig(seed=3)}
    m.run = lambda config, out_dir, progress=True: {}
    return m


def test_make_config_layers_preset_file_and_sets(tmp_path):
    fake = _fake_study()
    assert experiments.make_config(fake, "small") == FakeConfig(seed=2, inner=Inner(width=16))
    assert experiments.make_config(fake, "small") is not fake.PRESETS["small"]  # presets are never mutated
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"seed": 5, "inner": {"rate": 2}, "sizes": [7, 8]}))
    c = experiments.make_config(fake, "small", path, sets=[
        "seed=6", "inner.tags=[\"b\", \"c\"]", "name=123", "flag=true", "items=[1, 2.5]", "threads=2"])
    assert c == FakeConfig(seed=6, name="123", flag=True, sizes=(7, 8), items=[1.0, 2.5], threads=2,
                           inner=Inner(width=16, rate=2.0, tags=("b", "c")))
    assert isinstance(c.inner.rate, float) and isinstance(c.sizes, tuple)
    assert experiments.make_config(fake, "small", sets=["threads=null", "name=plain text", "flag=False"]) == \
        FakeConfig(seed=2, name="plain text", inner=Inner(width=16))
    assert experiments.make_config(fake, "small", sets=["inner={\"width\": 3}"]).inner == Inner(width=3)


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
    ("threads=x", vaetransfer.ArgumentTypeError, "threads"),
    ("inner=3", vaetransfer.ArgumentTypeError, "inner"),
    ("noequals", vaetransfer.ArgumentError, "set"),
])
def test_make_config_type_checks_name_the_key(item, cls, argument):
    with pytest.raises(cls) as info:
        experiments.make_config(_fake_study(), "smoke", sets=[item])
    assert info.value.argument == argument


def test_make_config_file_and_preset_errors(tmp_path):
    fake = _fake_study()
    for text, argument in (("{\"inner\": {\"zzz\": 1}}", "inner.zzz"), ("[1, 2]", "config_file"), ("{oops", "config_file")):
        (tmp_path / "c.json").write_text(text)
        with pytest.raises(vaetransfer.ArgumentError) as info:
            experiments.make_config(fake, "smoke", tmp_path / "c.json")
        assert info.value.argument == argument
    with pytest.raises(vaetransfer.ArgumentError) as info:
        experiments.make_config(fake, "huge")
    assert info.value.argument == "preset" and "smoke, small, paper" in str(info.value)


def test_config_dict_round_trip():
    c = FakeConfig(sizes=(3, 4), inner=Inner(tags=("p", "q")))
    d = experiments.config_to_dict(c)
    assert d["sizes"] == [3, 4] and d["inner"] == {"width": 4, "rate": 0.5, "tags": ["p", "q"]}
    assert experiments.config_from_dict(FakeConfig, json.loads(json.dumps(d))) == c
    assert experiments.config_from_dict(FakeConfig, {"inner": {"width": 9}}) == FakeConfig(inner=Inner(width=9))
    with pytest.raises(vaetransfer.ArgumentError) as info:
        experiments.config_from_dict(FakeConfig, {**d, "inner": {**d["inner"], "zzz": 1}})
    assert info.value.argument == "inner.zzz"


def test_step_runs_once_per_key_and_outputs(tmp_path):
    calls = []

    def compute():
        calls.append(1)
        (tmp_path / "fig.png").write_bytes(b"x")
        return {"value": (1, 2)}

    run = lambda key=None: experiments.step(tmp_path, "figs", compute, key=key, outputs=[tmp_path / "fig.png"])
    assert run() == {"value": [1, 2]} and len(calls) == 1  # returned as a re-run reads it back
    assert run() == {"value": [1, 2]} and len(calls) == 1
    (tmp_path / "fig.png").unlink()
    run()
    assert len(calls) == 2  # a missing output redoes the step
    run(key={"step": 5})
    run(key={"step": 5})
    assert len(calls) == 3  # a new key redoes it once
    with pytest.raises(vaetransfer.ArgumentError):
        experiments.step(tmp_path, "../escape", compute)
