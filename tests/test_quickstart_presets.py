"""The quickstart study's presets (issue 32): the medium preset is a valid config whose one stage
has the designed runs, counted from the stage's own ``runs`` without training anything."""
import torch

from vaetransfer import data, studies
from vaetransfer.studies import quickstart


def test_medium_preset_is_valid_and_its_runs_are_as_designed():
    c = studies.make_config("quickstart", "medium")
    assert c == quickstart.PRESETS["medium"] and quickstart.Config() != c
    assert quickstart.PRESETS["small"] == quickstart.Config(steps=1500, n=16384, similarity_n=1000)
    (stage,) = quickstart.STUDY.stages
    rows = stage.runs(c, {})
    # 3 replicate pairs, each of its own seeds: β = 1 from seed 2k, β = 8 from 2k + 1, the same-seed
    # baseline β = 8 from 2k — every pair's seeds disjoint from every other's (independent units).
    assert [(r["beta"], r["seed"], r["baseline"]) for r in rows] == [
        (b, 2 * k + s, base) for k in range(3) for b, s, base in ((1.0, 0, False), (8.0, 1, False), (8.0, 0, True))]
    assert len({r["model"] for r in rows}) == 9
    assert [(p.a.seed, p.b.seed, p.base.seed) for p in quickstart.pairs(c)] == [(0, 1, 0), (2, 3, 2), (4, 5, 4)]
    # The training the estimate in the preset's comment rests on: 9 × 10,000 steps of batch 64 on
    # 131,072 distinct dSprites images; snapshots every quarter (resumable).
    configs = [quickstart.train_config(c, quickstart.model_of(c, r), "cpu") for r in rows]
    assert [(t.steps, t.batch_size, t.snapshot_every) for t in configs] == [(10_000, 64, 2_500)] * 9
    assert all(t.dataset == "dsprites[131072]" for t in configs)
    rows_trained = quickstart.train_rows(c)
    assert len(rows_trained) == len(set(rows_trained.tolist())) == 131_072 < data.DSPRITES_COUNT
    assert (c.similarity_n, c.disentanglement_n, c.disentanglement_points) == (1000, 2000, 500)
    assert c.same_seed_baseline and c.betas[0] != c.betas[1]  # no finding undecided by design


def test_trained_check_rows_and_reference_per_preset():
    """The trained-model check (issue 32): its rows are held out wherever some images are not
    trained on, and its references are the β = 1 models of every replicate pair in every preset."""
    for name, c in quickstart.PRESETS.items():
        refs = quickstart.reference_models(c)
        assert [(r.beta, r.seed, r.baseline) for r in refs] == [(1.0, c.seed + 2 * k, False)
                                                                 for k in range(c.pairs)], name
        rows, held_out = quickstart.held_out_rows(c)
        assert len(rows) == quickstart.TRAINED_N and rows.tolist() == sorted(set(rows.tolist())), name
        if c.n:
            assert held_out and not set(rows.tolist()) & set(quickstart.train_rows(c).tolist()), name
        else:  # paper: every image is trained on, the check reads training rows and says so
            assert not held_out, name
    smoke = quickstart.PRESETS["smoke"]
    train_rows = quickstart.train_rows(smoke)
    expected = data.dsprites(train_rows).float_images().double().mean(0)
    assert torch.allclose(quickstart.mean_image(train_rows), expected, rtol=0, atol=1e-12)
