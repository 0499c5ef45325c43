"""The T5-style tokenizer (vaetransfer.text.tokenizer): SentencePiece unigram training on the
built-in corpus, T5's special ids, encoding (padding, mask, truncation), decoding, both load paths
(spiece.model and tokenizer.json), and id-for-id parity with transformers' AutoTokenizer."""
import io
import json
import shutil
import time

import pytest
import sentencepiece as spm
import torch
from sentencepiece import sentencepiece_model_pb2

from vaetransfer.text import corpus as C
from vaetransfer.text.tokenizer import Tokenizer, train_tokenizer

VOCAB = 700          # total, 100 sentinels included: a 600-piece SentencePiece model
ODD = ["the chef <extra_id_0> a soup <extra_id_7> .", "<extra_id_99>the<extra_id_1>cats sleep",
       "  the   chef\tcooked  .  ", "Ünïcode 中 cats", "xyz </s> <pad> <unk> q", "", "<extra_id_100> .",
       "THE Chefs, cooked!", "ﬁne soups"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tok")
    sentences = C.generate(2000, seed=0).sentences
    start = time.perf_counter()
    tok = train_tokenizer(sentences, folder=folder, vocab_size=VOCAB)
    seconds = time.perf_counter() - start
    return tok, folder, sentences, seconds


@pytest.fixture(scope="module")
def held_out():
    return C.generate(300, seed=1).sentences + C.generate(40, variant="long", seed=1).sentences


@pytest.fixture(scope="module")
def hf(trained):
    transformers = pytest.importorskip("transformers")
    return transformers.AutoTokenizer.from_pretrained(str(trained[1]))


def test_training_writes_a_t5_folder_with_t5s_special_ids(trained):
    tok, folder, _, seconds = trained
    assert seconds < 20
    assert {p.name for p in folder.iterdir()} >= {"spiece.model", "tokenizer.json", "tokenizer_config.json",
                                                  "special_tokens_map.json"}
    assert tok.backend == "tokenizers" and tok.vocab_size == VOCAB and len(tok) == VOCAB and tok.extra_ids == 100
    assert (tok.pad_id, tok.eos_id, tok.unk_id) == (0, 1, 2)
    assert [tok.id_to_token(i) for i in range(3)] == ["<pad>", "</s>", "<unk>"]
    assert tok.sentinel_id(0) == VOCAB - 1 and tok.sentinel_id(99) == VOCAB - 100
    assert all(tok.id_to_token(tok.sentinel_id(i)) == f"<extra_id_{i}>" for i in range(100))
    assert tok.is_sentinel(VOCAB - 1) and tok.is_sentinel(VOCAB - 100) and not tok.is_sentinel(VOCAB - 101)
    assert tok.is_sentinel(torch.tensor([0, VOCAB - 100, VOCAB - 1])).tolist() == [False, True, True]
    with pytest.raises(ValueError, match="'i'"):
        tok.sentinel_id(100)
    # the SentencePiece model itself: a unigram model of 600 pieces, pad 0, eos 1, unk 2, no BOS
    data = (folder / "spiece.model").read_bytes()
    sp = spm.SentencePieceProcessor(model_proto=data)
    assert sp.get_piece_size() == VOCAB - 100
    assert (sp.pad_id(), sp.eos_id(), sp.unk_id(), sp.bos_id()) == (0, 1, 2, -1)
    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(data)
    assert proto.trainer_spec.model_type == sentencepiece_model_pb2.TrainerSpec.UNIGRAM
    config = json.loads((folder / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == "T5Tokenizer" and config["extra_ids"] == 100
    assert config["model_max_length"] == 512 and tok.model_max_length == 512
    assert (config["pad_token"], config["eos_token"], config["unk_token"]) == ("<pad>", "</s>", "<unk>")
    assert len(config["additional_special_tokens"]) == 100


def test_round_trip_on_held_out_corpus_text(trained, held_out):
    tok, folder, _, _ = trained
    sp = Tokenizer.from_pretrained(folder, backend="sentencepiece")
    for t in (tok, sp):
        ids = [t.encode_one(s) for s in held_out]
        assert all(r[-1] == 1 and 1 not in r[:-1] and 2 not in r and 0 not in r for r in ids)
        assert t.decode(ids) == held_out
        assert t.decode(ids, skip_special_tokens=False) == held_out
    # a 600-piece model of a ~860-word grammar: frequent words are one piece, rare ones are split
    lengths = [len(tok.encode_one(s)) - 1 for s in held_out[:300]]
    words = [len(s.split()) for s in held_out[:300]]
    assert sum(words) <= sum(lengths) < 1.5 * sum(words)
    assert tok.tokens("the chefs cooked a soup .")[:2] == ["▁the", "▁chefs"]
    # normalisation caveats: whitespace is collapsed, NFKC applied, unknown characters dropped
    assert tok.decode([tok.encode_one("  the   chef\tcooked  .  ")]) == ["the chef cooked ."]
    assert tok.decode([tok.encode_one("ﬁne soups")]) == ["fine soups"]
    assert 2 in tok.encode_one("中 cats") and tok.decode([tok.encode_one("中 cats")]) == [" cats"]


def test_encode_pads_masks_and_truncates(trained):
    tok = trained[0]
    texts = ["the chefs cooked a delicious soup in the kitchen .", "the cat .", ""]
    ids, mask = tok.encode(texts)
    rows = [tok.encode_one(t) for t in texts]
    assert ids.dtype == torch.long and mask.dtype == torch.long
    assert ids.shape == mask.shape == (3, max(len(r) for r in rows))
    for i, r in enumerate(rows):
        assert ids[i, :len(r)].tolist() == r and ids[i, len(r):].eq(0).all()
        assert mask[i].tolist() == [1] * len(r) + [0] * (ids.shape[1] - len(r))
    assert rows[2] == [1]                      # an empty text is eos alone
    cut, cut_mask = tok.encode(texts, max_length=5)
    assert cut.shape == (3, 5) and cut[0].tolist() == rows[0][:4] + [1]   # room is kept for eos
    assert cut[1].tolist() == rows[1][:5] + [0] * (5 - len(rows[1][:5]))
    assert cut_mask.sum(1).tolist() == [5, min(5, len(rows[1])), 1]
    wide, _ = tok.encode(texts, max_length=40, padding="max_length")
    assert wide.shape == (3, 40)
    no_eos, _ = tok.encode(texts, add_eos=False, max_length=3)
    assert no_eos[0].tolist() == rows[0][:3] and 1 not in no_eos.tolist()[1]
    assert tok.encode(["the cat .", "the dog ."], padding=False)[0].shape == (2, len(rows[1]))
    empty_ids, empty_mask = tok.encode([])
    assert empty_ids.shape == (0, 0) and empty_mask.shape == (0, 0)
    with pytest.raises(ValueError, match="padding"):
        tok.encode(texts, padding=False)
    with pytest.raises(ValueError, match="max_length"):
        tok.encode(texts, max_length=0)
    with pytest.raises(ValueError, match="padding"):
        tok.encode(texts, padding="max_length")
    with pytest.raises(TypeError, match="texts"):
        tok.encode("the cat .")
    with pytest.raises(TypeError, match="texts"):
        tok.encode(["the cat .", 3])


def test_sentinels_in_text_and_decoding_forms(trained):
    tok = trained[0]
    ids = tok.encode_one("the chef <extra_id_0> a soup <extra_id_7> .")
    assert ids.count(tok.sentinel_id(0)) == 1 and ids.count(tok.sentinel_id(7)) == 1
    i0, i7 = ids.index(tok.sentinel_id(0)), ids.index(tok.sentinel_id(7))
    assert ids[:i0] == tok.encode_one("the chef", add_eos=False)
    assert ids[i0 + 1:i7] == tok.encode_one("a soup", add_eos=False)
    assert tok.decode([ids]) == ["the chef a soup ."]
    assert tok.decode([ids], skip_special_tokens=False) == ["the chef<extra_id_0> a soup<extra_id_7> ."]
    # "<extra_id_100>" is not a sentinel of a 100-sentinel vocabulary: it is plain text
    assert not any(tok.is_sentinel(i) for i in tok.encode_one("<extra_id_100>"))
    # every input form; decoding stops at the first eos
    row = tok.encode_one("the cat .") + [0, 0]
    second = tok.encode_one("the dog .")[:1] + [1, 5, 6, 7]
    second += [0] * (len(row) - len(second))
    batch = torch.tensor([row, second])
    assert tok.decode(batch) == ["the cat .", "the"]
    assert tok.decode(batch[0]) == ["the cat ."] == tok.decode(row) == tok.decode([row])
    assert tok.decode(batch.tolist()) == tok.decode(batch)
    assert tok.decode(batch, stop_at_eos=False, skip_special_tokens=False)[1].startswith("the</s>")
    with pytest.raises(ValueError, match="ids"):
        tok.decode([[VOCAB]])
    with pytest.raises(TypeError, match="ids"):
        tok.decode(torch.zeros(2, 3))
    with pytest.raises(TypeError, match="ids"):
        tok.decode("the cat")


def test_both_load_paths_give_the_same_tokenizer(trained, held_out):
    tok, folder, _, _ = trained
    sp = Tokenizer.from_pretrained(folder, backend="sentencepiece")
    tk = Tokenizer.from_pretrained(folder, backend="tokenizers")
    assert (sp.backend, tk.backend) == ("sentencepiece", "tokenizers")
    assert sp.vocab_size == tk.vocab_size == VOCAB and sp.extra_ids == tk.extra_ids == 100
    assert [sp.id_to_token(i) for i in range(VOCAB)] == [tk.id_to_token(i) for i in range(VOCAB)]
    texts = held_out + ODD
    assert [sp.encode_one(t) for t in texts] == [tk.encode_one(t) for t in texts]
    a, b = sp.encode(texts, max_length=16), tk.encode(texts, max_length=16)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    for kwargs in ({}, {"skip_special_tokens": False}, {"skip_special_tokens": False, "stop_at_eos": False}):
        assert sp.decode(a[0], **kwargs) == tk.decode(a[0], **kwargs)
    # a folder saved from the SentencePiece path is the same folder again
    again = sp.save_pretrained(folder.parent / "again")
    assert (again / "spiece.model").read_bytes() == (folder / "spiece.model").read_bytes()
    assert (again / "tokenizer.json").read_text() == (folder / "tokenizer.json").read_text()
    # a folder with tokenizer.json only (e.g. a Hugging Face save) loads, extra_ids from its vocabulary
    only_json = folder.parent / "only_json"
    only_json.mkdir()
    shutil.copy(folder / "tokenizer.json", only_json)
    loaded = Tokenizer.from_pretrained(only_json)
    assert loaded.extra_ids == 100 and [loaded.encode_one(t) for t in ODD] == [tk.encode_one(t) for t in ODD]


def test_training_is_deterministic_and_seeded_subsampling(trained, tmp_path):
    _, folder, sentences, _ = trained
    train_tokenizer(sentences, folder=tmp_path / "a", vocab_size=VOCAB)
    assert (tmp_path / "a" / "spiece.model").read_bytes() == (folder / "spiece.model").read_bytes()
    assert (tmp_path / "a" / "tokenizer.json").read_text() == (folder / "tokenizer.json").read_text()
    train_tokenizer(sentences[:1000], folder=tmp_path / "b", vocab_size=VOCAB)
    assert (tmp_path / "b" / "spiece.model").read_bytes() != (folder / "spiece.model").read_bytes()
    models = {}
    for name, seed in (("s0", 0), ("s0again", 0), ("s1", 1)):
        train_tokenizer(sentences, folder=tmp_path / name, vocab_size=VOCAB, max_sentences=800, seed=seed)
        models[name] = (tmp_path / name / "spiece.model").read_bytes()
    assert models["s0"] == models["s0again"] != models["s1"]
    small = train_tokenizer(sentences, folder=tmp_path / "c", vocab_size=300, extra_ids=10)
    assert small.vocab_size == 300 and small.sentinel_id(0) == 299 and small.sentinel_id(9) == 290
    assert Tokenizer.from_pretrained(tmp_path / "c", backend="sentencepiece").sentinel_id(9) == 290


def test_bad_input_gives_clear_errors(trained, tmp_path):
    sentences = trained[2]
    with pytest.raises(ValueError, match="sentences"):
        train_tokenizer([], folder=tmp_path / "x")
    with pytest.raises(ValueError, match="sentences"):
        train_tokenizer(["  ", ""], folder=tmp_path / "x")
    with pytest.raises(TypeError, match="sentences"):
        train_tokenizer("the cat .", folder=tmp_path / "x")
    with pytest.raises(ValueError, match="vocab_size.*at most"):
        train_tokenizer(sentences[:20], folder=tmp_path / "x", vocab_size=2000)
    with pytest.raises(ValueError, match="vocab_size"):
        train_tokenizer(sentences, folder=tmp_path / "x", vocab_size=103)
    assert not (tmp_path / "x").exists()
    with pytest.raises(FileNotFoundError, match="folder"):
        Tokenizer.from_pretrained(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="tokenizer.json nor spiece.model"):
        Tokenizer.from_pretrained(tmp_path / "empty")
    only_json = tmp_path / "only_json"
    only_json.mkdir()
    shutil.copy(trained[1] / "tokenizer.json", only_json)
    with pytest.raises(FileNotFoundError, match="spiece.model"):
        Tokenizer.from_pretrained(only_json, backend="sentencepiece")
    with pytest.raises(ValueError, match="backend"):
        Tokenizer.from_pretrained(only_json, backend="bpe")
    (only_json / "tokenizer_config.json").write_text("{not json")
    with pytest.raises(ValueError, match="tokenizer_config.json"):
        Tokenizer.from_pretrained(only_json)
    (only_json / "tokenizer_config.json").write_text(json.dumps({"pad_token": "[PAD]"}))
    with pytest.raises(ValueError, match="pad_token"):
        Tokenizer.from_pretrained(only_json)
    # a SentencePiece model with SentencePiece's default ids (unk 0, bos 1, eos 2) is not T5's
    writer = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(sentences[:300]), model_writer=writer, vocab_size=200,
                                   num_threads=1, minloglevel=2)
    with pytest.raises(ValueError, match="pad, eos, unk"):
        Tokenizer.from_sentencepiece(writer.getvalue())
    with pytest.raises(ValueError, match="sentencepiece_model"):
        Tokenizer.from_sentencepiece(b"not a model")


# ------------------------------------------------------------------------------- transformers
def test_transformers_autotokenizer_gives_the_same_ids_and_texts(trained, held_out, hf):
    tok = trained[0]
    assert type(hf).__name__ in ("T5Tokenizer", "T5TokenizerFast") and len(hf) == VOCAB
    assert hf.pad_token_id == 0 and hf.eos_token_id == 1 and hf.unk_token_id == 2
    assert hf.convert_tokens_to_ids(["<extra_id_0>", "<extra_id_99>"]) == [VOCAB - 1, VOCAB - 100]
    texts = held_out + ODD
    assert hf(texts)["input_ids"] == [tok.encode_one(t) for t in texts]
    for kwargs, ours in (({"padding": True}, {}),
                         ({"padding": True, "truncation": True, "max_length": 12}, {"max_length": 12}),
                         ({"padding": "max_length", "truncation": True, "max_length": 90},
                          {"max_length": 90, "padding": "max_length"})):
        theirs = hf(texts, return_tensors="pt", **kwargs)
        ids, mask = tok.encode(texts, **ours)
        assert torch.equal(ids, theirs["input_ids"]) and torch.equal(mask, theirs["attention_mask"]), kwargs
    ids, _ = tok.encode(texts, max_length=30)
    clean = [i for i, t in enumerate(texts) if "</s>" not in t]   # ours stops at the first eos, theirs skips it
    assert [tok.decode(ids[i])[0] for i in clean] == [hf.decode(ids[i], skip_special_tokens=True) for i in clean]
    assert tok.decode(ids, skip_special_tokens=False, stop_at_eos=False) == hf.batch_decode(ids)


def test_transformers_loads_a_spiece_only_folder_and_we_load_its_save(trained, held_out, tmp_path):
    transformers = pytest.importorskip("transformers")
    tok, folder, _, _ = trained
    spiece_only = tmp_path / "spiece_only"
    spiece_only.mkdir()
    for name in ("spiece.model", "tokenizer_config.json"):
        shutil.copy(folder / name, spiece_only)
    theirs = transformers.AutoTokenizer.from_pretrained(str(spiece_only))
    texts = held_out[:100] + ODD
    assert theirs(texts)["input_ids"] == [tok.encode_one(t) for t in texts]
    # the other direction: a folder transformers wrote loads here with the same ids
    theirs.save_pretrained(str(tmp_path / "hf_saved"))
    ours = Tokenizer.from_pretrained(tmp_path / "hf_saved")
    assert ours.vocab_size == VOCAB and ours.extra_ids == 100
    assert [ours.encode_one(t) for t in texts] == [tok.encode_one(t) for t in texts]
