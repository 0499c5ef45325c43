"""The T5 pretraining study (`vaetransfer run t5_pretrain`) at its smoke preset: it writes a
Hugging Face folder that both our loader and transformers load, and pretraining lowers the
held-out span-corruption loss."""
from __future__ import annotations

import json
import time

import pytest
import torch

from vaetransfer import cli, experiments
from vaetransfer.experiments import t5_pretrain
from vaetransfer.text import T5

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("t5_pretrain")
    start = time.perf_counter()
    assert cli.main(["run", "t5_pretrain", "--preset", "smoke", "--out", str(out), "--quiet"]) == 0
    return out, time.perf_counter() - start


def test_smoke_writes_a_folder_both_loaders_read(smoke):
    out, seconds = smoke
    results = json.loads((out / "results.json").read_text())
    assert results["config"] == experiments.config_to_dict(t5_pretrain.PRESETS["smoke"])
    folder = out / t5_pretrain.MODEL_DIR
    for name in ("config.json", "model.safetensors", "spiece.model", "tokenizer_config.json"):
        assert (folder / name).is_file(), name
    assert (out / "loss.png").is_file() and (out / "index.md").is_file()
    assert results["reload_bit_exact"] is True
    ours = T5.from_pretrained(folder).eval()
    assert ours.tokenizer is not None and ours.tokenizer.vocab_size == ours.t5_config.vocab_size
    theirs = transformers.T5ForConditionalGeneration.from_pretrained(folder, attn_implementation="eager").eval()
    ids, mask = ours.tokenizer.encode(["the first sentence of a test", "another one"])
    labels = ids.masked_fill(mask == 0, -100)
    with torch.no_grad():
        hf = theirs(input_ids=ids, attention_mask=mask, labels=labels, use_cache=False)
    torch.testing.assert_close(ours(ids, mask, labels=labels), hf.logits, rtol=1e-5, atol=1e-5)
    assert seconds < 120


def test_pretraining_lowers_the_held_out_loss_below_the_references(smoke):
    out, _ = smoke
    r = json.loads((out / "results.json").read_text())
    h = r["held_out_cross_entropy"]
    # Even 40 smoke steps learn token frequencies: below the untrained model, and the evaluations
    # the trainer made go down.
    assert h["pretrained"] < h["untrained"]
    evals = [e["eval_cross_entropy"] for e in r["evaluations"]]
    assert len(evals) == 2 and evals[-1] < evals[0]
    # The untrained model is near uniform over the vocabulary; the unigram reference is below it.
    assert abs(h["untrained"] - torch.log(torch.tensor(float(r["tokenizer"]["vocab_size"]))).item()) < 1.5
    assert h["unigram"] < h["untrained"]


def test_rerun_resumes_without_training(smoke):
    out, _ = smoke
    before = (out / "train" / "history.csv").stat().st_mtime_ns
    start = time.perf_counter()
    assert cli.main(["run", "t5_pretrain", "--preset", "smoke", "--out", str(out), "--quiet"]) == 0
    assert (out / "train" / "history.csv").stat().st_mtime_ns == before
    assert time.perf_counter() - start < 60


@pytest.mark.parametrize("sets,argument", [(["vocab_size=20"], "vocab_size"), (["variant=medium"], "variant"),
                                           (["noise_density=1.5"], "noise_density")])
def test_config_errors_name_the_key(sets, argument):
    with pytest.raises(ValueError) as e:
        experiments.make_config(t5_pretrain, "smoke", None, sets)
    assert getattr(e.value, "argument", None) == argument
