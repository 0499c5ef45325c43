"""The built-in text corpus (vaetransfer.text.corpus): determinism, the dependence of the words on
each generating attribute (topic, sentiment, tense, number, length class), splits, and the
loaders of PTB, one-per-line (Yahoo/Yelp) and SNLI files."""
import json
import re

import numpy as np
import pytest

from vaetransfer.text import corpus as C

N = 3000


@pytest.fixture(scope="module")
def short():
    return C.generate(N, variant="short", seed=0)


@pytest.fixture(scope="module")
def long():
    return C.generate(600, variant="long", seed=0)


# ------------------------------------------------------------------- word classes of the grammar
def _forms(kind):
    return {f for t in C.LEXICON["topics"].values() for v in t[kind] for f in v}


TOPIC = C.LEXICON["topics"]
GENERIC = C.LEXICON["generic"]
VERBS = ([v for t in TOPIC.values() for v in t["verbs"] + t["intransitive"]]
         + [v for vs in GENERIC["experiencer"].values() for v in vs] + [GENERIC["feel"]])
BASE = {v[0] for v in VERBS}
THIRD = {v[1] for v in VERBS} | {"is"}
PAST = {v[2] for v in VERBS} | {"was", "were"}
SINGULAR_NOUNS = {n[0] for t in TOPIC.values() for n in t["agents"] + t["things"]}
PLURAL_NOUNS = {n[1] for t in TOPIC.values() for n in t["agents"] + t["things"]}


def _topic_words(topic):
    t = TOPIC[topic]
    words = {f for key in ("agents", "things", "verbs", "intransitive") for v in t[key] for f in v}
    return words | {p for _, p in t["places"]} | set(t["adjectives"]) | set(t["positive"]) | set(t["negative"])


def _polar_words(polarity):
    words = {w for t in TOPIC.values() for w in t[polarity]}
    for key in ("thing_adjectives", "agent_adjectives", "feelings", "manner"):
        words |= set(GENERIC[key][polarity])
    return words | {f for v in GENERIC["experiencer"][polarity] for f in v}


def _rows(corpus, attribute, label):
    code = C.ATTRIBUTES[attribute].index(label)
    return [s for s, c in zip(corpus.sentences, corpus.attributes[attribute]) if c == code]


def _units(corpus):
    """Every sentence of a corpus (a document's sentences one by one) with its row's attributes."""
    for i, text in enumerate(corpus.sentences):
        for sentence in re.split(r"(?<= \.) ", text):
            yield sentence, {a: C.ATTRIBUTES[a][corpus.attributes[a][i]] for a in C.ATTRIBUTES}


def test_word_classes_are_disjoint_so_the_markers_below_are_unambiguous():
    nouns = SINGULAR_NOUNS | PLURAL_NOUNS
    adjectives = ({w for t in TOPIC.values() for k in ("adjectives", "positive", "negative") for w in t[k]}
                  | {w for k in ("thing_adjectives", "agent_adjectives", "feelings") for ws in GENERIC[k].values()
                     for w in ws})
    verb_forms = BASE | THIRD | PAST
    assert not nouns & verb_forms, nouns & verb_forms
    assert not adjectives & verb_forms, adjectives & verb_forms
    assert not nouns & adjectives
    assert not SINGULAR_NOUNS & PLURAL_NOUNS
    assert not BASE & THIRD and not BASE & PAST and not THIRD & PAST
    tw = {t: _topic_words(t) for t in C.TOPICS}
    for a in C.TOPICS:
        for b in C.TOPICS:
            if a < b:
                assert not tw[a] & tw[b], (a, b, tw[a] & tw[b])
    assert not _polar_words("positive") & _polar_words("negative")


# ------------------------------------------------------------------------------ basic structure
def test_generate_returns_coded_attributes_drawn_uniformly(short):
    assert len(short) == N and len(short.sentences) == N
    assert list(short.attributes) == list(C.ATTRIBUTES)
    for name, labels in C.ATTRIBUTES.items():
        codes = short.attributes[name]
        assert codes.dtype == np.int64 and codes.shape == (N,)
        assert short.attribute_names[name] == list(labels)
        counts = np.bincount(codes, minlength=len(labels))
        expected = N / len(labels)
        assert counts.min() > 0.8 * expected and counts.max() < 1.2 * expected, (name, counts)
    # the attributes are drawn independently: e.g. topic and tense are not associated
    table = np.zeros((8, 3))
    np.add.at(table, (short.attributes["topic"], short.attributes["tense"]), 1)
    expected = table.sum(1, keepdims=True) * table.sum(0, keepdims=True) / N
    chi2 = float(((table - expected) ** 2 / expected).sum())
    assert chi2 < 36.0, chi2  # 14 degrees of freedom: p < 0.001 above ~36


def test_format_lower_case_tokenised_and_within_the_grammars_vocabulary(short, long):
    vocab = set(C.vocabulary())
    assert 500 <= len(vocab) <= 1000
    used = set()
    for corpus in (short, long):
        for s in corpus.sentences:
            assert s == s.lower() and s == " ".join(s.split()) and s.endswith(" ."), s
            tokens = s.split()
            assert set(tokens) <= vocab, set(tokens) - vocab
            used |= set(tokens)
            assert tokens[0] not in (",", ".")
    assert len(used) > 0.95 * len(vocab), len(used)   # the grammar really uses its vocabulary
    one_sentence = [s for s in short.sentences if s.count(" .") == 1]
    assert len(one_sentence) == len(short)
    assert min(s.count(" .") for s in long.sentences) >= 2


def test_generation_is_deterministic_prefix_stable_and_independent_of_global_state():
    np.random.seed(1)
    a = C.generate(300, seed=5)
    np.random.seed(2)
    state = np.random.get_state()[1].copy()
    b = C.generate(300, seed=5)
    assert np.array_equal(np.random.get_state()[1], state)  # the global stream is not used
    assert a.sentences == b.sentences
    for k in C.ATTRIBUTES:
        assert np.array_equal(a.attributes[k], b.attributes[k])
    c = C.generate(300, seed=6)
    assert sum(x != y for x, y in zip(a.sentences, c.sentences)) > 290
    prefix = C.generate(40, seed=5)
    assert prefix.sentences == a.sentences[:40]
    assert all(np.array_equal(prefix.attributes[k], a.attributes[k][:40]) for k in C.ATTRIBUTES)
    long_a, long_b = C.generate(20, variant="long", seed=5), C.generate(7, variant="long", seed=5)
    assert long_b.sentences == long_a.sentences[:7]
    assert long_a.sentences[0] != a.sentences[0]  # the variant is part of the seed
    assert C.generate(0).sentences == [] and C.generate(0).attributes["topic"].shape == (0,)


# ----------------------------------------------------------------------- attribute–word checks
@pytest.mark.parametrize("variant", ["short", "long"])
def test_each_topic_has_its_own_words_and_never_anothers(variant, short, long):
    corpus = short if variant == "short" else long
    words = {t: _topic_words(t) for t in C.TOPICS}
    for sentence, attrs in _units(corpus):
        tokens = set(sentence.split())
        for t in C.TOPICS:
            if t == attrs["topic"]:
                assert tokens & words[t], (t, sentence)
            else:
                assert not tokens & words[t], (t, sentence)
    # hand-picked markers, independent of the lexicon's lists
    markers = {"food": {"chef", "chefs", "soup", "soups", "kitchen"}, "sports": {"stadium", "match", "matches"},
               "travel": {"airport", "flight", "flights", "tourist", "tourists"}, "technology": {"laptop", "laptops"},
               "music": {"concert", "concerts", "singer", "singers"}, "weather": {"storm", "storms", "forecaster"},
               "movies": {"film", "films", "director", "directors"}, "animals": {"cat", "cats", "dog", "dogs"}}
    for t, m in markers.items():
        inside = sum(bool(set(s.split()) & m) for s in _rows(corpus, "topic", t))
        outside = sum(bool(set(s.split()) & m) for s in corpus.sentences) - inside
        assert inside > 0 and outside == 0, (t, inside, outside)


@pytest.mark.parametrize("variant", ["short", "long"])
def test_sentiment_words_follow_the_sentiment_in_every_clause(variant, short, long):
    corpus = short if variant == "short" else long
    pos, neg = _polar_words("positive"), _polar_words("negative")
    for sentence, attrs in _units(corpus):
        tokens = sentence.split()
        n_pos, n_neg = sum(w in pos for w in tokens), sum(w in neg for w in tokens)
        if attrs["sentiment"] == "positive":
            assert n_pos >= 1 and n_neg == 0, sentence
        elif attrs["sentiment"] == "negative":
            assert n_neg >= 1 and n_pos == 0, sentence
        else:
            assert n_pos == n_neg == 0, sentence
        if attrs["sentiment"] != "neutral":  # each clause of a two-clause sentence carries the polarity
            polar = pos if attrs["sentiment"] == "positive" else neg
            for clause in re.split(r" (?:, so|and|because) ", sentence):
                assert any(w in polar for w in clause.split()), (clause, sentence)
    for word, label in (("loved", "positive"), ("hated", "negative"), ("delicious", "positive"),
                        ("terrible", "negative"), ("happily", "positive"), ("angrily", "negative")):
        rows = [set(s.split()) for s in corpus.sentences]
        with_word = [corpus.attributes["sentiment"][i] for i, r in enumerate(rows) if word in r]
        assert with_word and set(with_word) == {C.SENTIMENTS.index(label)}, word


@pytest.mark.parametrize("variant", ["short", "long"])
def test_tense_is_carried_by_every_finite_verb_and_the_time_adverbials(variant, short, long):
    corpus = short if variant == "short" else long
    for sentence, attrs in _units(corpus):
        tokens = sentence.split()
        t = set(tokens)
        if attrs["tense"] == "past":
            assert "will" not in t and t & PAST and not t & (THIRD | BASE | {"are"}), sentence
        elif attrs["tense"] == "present":
            assert "will" not in t and not t & PAST and t & (THIRD | BASE | {"are"}), sentence
        else:
            assert "will" in t and not t & PAST and not t & (THIRD | {"are"}), sentence
            for i, w in enumerate(tokens):  # "will (adverb) base"
                if w == "will":
                    nxt = tokens[i + 1] if tokens[i + 1] in BASE | {"be"} else tokens[i + 2]
                    assert nxt in BASE | {"be"}, sentence
    for word, tense in (("yesterday", "past"), ("nowadays", "present"), ("tomorrow", "future"), ("will", "future"),
                        ("cooked", "past"), ("cooks", "present"), ("were", "past"), ("is", "present")):
        codes = {corpus.attributes["tense"][i] for i, s in enumerate(corpus.sentences) if word in s.split()}
        assert codes == {C.TENSES.index(tense)}, (word, codes)


@pytest.mark.parametrize("variant", ["short", "long"])
def test_subjects_and_verbs_agree_with_the_number(variant, short, long):
    corpus = short if variant == "short" else long
    counts = {"singular": 0, "plural": 0}
    for sentence, attrs in _units(corpus):
        tokens = sentence.split()
        t = set(tokens)
        plural = attrs["number"] == "plural"
        counts[attrs["number"]] += 1
        # every subject's head: the first topic noun of each clause not led by a pronoun (time
        # adverbials hold no topic noun), and the noun after the relativiser in "that the <noun>"
        heads = []
        for clause in re.split(r" (?:, so|and|because) ", sentence):
            words = clause.split()
            if words[0] not in ("he", "she", "it", "they"):
                heads.append(next(w for w in words if w in SINGULAR_NOUNS | PLURAL_NOUNS))
        heads += re.findall(r"\bthat the (\S+)", sentence)
        for head in heads:
            assert head in (PLURAL_NOUNS if plural else SINGULAR_NOUNS), (head, sentence)
        if plural:
            assert not t & {"was", "is", "he", "she", "it"} and not t & THIRD, sentence
        else:
            assert not t & {"were", "are", "they"}, sentence
            if attrs["tense"] == "present":
                assert not t & BASE, sentence
        if attrs["tense"] == "present":
            assert t & (BASE | {"are"} if plural else THIRD), sentence
    assert min(counts.values()) > 0
    # hand-picked pairs (in the present tense: "will sleep" is both numbers' future)
    present = corpus.attributes["tense"] == C.TENSES.index("present")
    for word, number in (("sleeps", "singular"), ("sleep", "plural"), ("is", "singular"), ("are", "plural"),
                         ("was", "singular"), ("were", "plural"), ("they", "plural"), ("she", "singular")):
        codes = {corpus.attributes["number"][i] for i, s in enumerate(corpus.sentences)
                 if word in s.split() and (present[i] or word not in ("sleep", "sleeps"))}
        assert codes == {C.NUMBERS.index(number)}, (word, codes)


def _words(sentence):
    return sum(w not in ",." for w in sentence.split())


def test_length_classes_and_mean_lengths(short, long):
    words = np.array([_words(s) for s in short.sentences])
    means = [words[short.attributes["length_class"] == k].mean() for k in range(3)]
    assert means[0] + 2 < means[1] and means[1] + 2 < means[2], means
    assert 9.0 <= words.mean() <= 11.0, words.mean()   # "about 10 words", like PTB/SNLI sentences
    assert words.min() >= 4
    # two clauses exactly in the long class (joined by and / so / because)
    joined = np.array([bool(re.search(r" (and|so|because) ", s)) for s in short.sentences])
    assert np.array_equal(joined, short.attributes["length_class"] == 2)
    doc_words = np.array([_words(s) for s in long.sentences])
    assert 45.0 <= doc_words.mean() <= 55.0, doc_words.mean()   # "about 50 words", like Yahoo/Yelp
    counts = np.array([s.count(" .") for s in long.sentences])
    lc = long.attributes["length_class"]
    for k, (lo, hi) in enumerate([(2, 4), (4, 6), (6, 8)]):
        assert counts[lc == k].min() >= lo and counts[lc == k].max() <= hi
    doc_means = [doc_words[lc == k].mean() for k in range(3)]
    assert doc_means[0] + 10 < doc_means[1] and doc_means[1] + 10 < doc_means[2], doc_means


def test_generate_rejects_bad_arguments():
    with pytest.raises(ValueError, match="variant"):
        C.generate(3, variant="medium")
    with pytest.raises(ValueError, match="'n'"):
        C.generate(-1)
    with pytest.raises(TypeError, match="'n'"):
        C.generate(2.5)
    with pytest.raises(ValueError, match="seed"):
        C.generate(3, seed=-1)
    with pytest.raises(TypeError, match="seed"):
        C.generate(3, seed="0")


# ------------------------------------------------------------------------------------ splits
def test_splits_are_disjoint_deterministic_and_the_deduplicated_stream():
    s = C.splits(n_train=2000, n_valid=300, n_test=300, seed=3)
    assert [len(s[k]) for k in ("train", "valid", "test")] == [2000, 300, 300]
    sets = {k: set(v.sentences) for k, v in s.items()}
    assert all(len(sets[k]) == len(s[k]) for k in s)   # no duplicates inside a split
    assert not sets["train"] & sets["valid"] and not sets["train"] & sets["test"] and not sets["valid"] & sets["test"]
    again = C.splits(n_train=2000, n_valid=300, n_test=300, seed=3)
    for k in s:
        assert again[k].sentences == s[k].sentences
        assert all(np.array_equal(again[k].attributes[a], s[k].attributes[a]) for a in C.ATTRIBUTES)
    other = C.splits(n_train=2000, n_valid=300, n_test=300, seed=4)
    assert other["test"].sentences != s["test"].sentences
    # the rows of generate(·, seed) in order, each at its first occurrence, and their attributes
    stream = C.generate(2700, seed=3)
    seen, order = set(), []
    for i, x in enumerate(stream.sentences):
        if x not in seen:
            seen.add(x)
            order.append(i)
    assert s["train"].sentences == [stream.sentences[i] for i in order[:2000]]
    assert np.array_equal(s["test"].attributes["topic"], stream.attributes["topic"][order[2300:2600]])
    docs = C.splits(variant="long", n_train=20, n_valid=5, n_test=5)
    assert docs["train"].sentences == C.generate(20, variant="long").sentences


def test_splits_refuse_impossible_sizes(monkeypatch):
    with pytest.raises(ValueError, match="n_train"):
        C.splits(n_train=0)
    with pytest.raises(ValueError, match="n_test"):
        C.splits(n_train=5, n_test=-1)
    # a grammar with few distinct rows cannot fill the splits: a clear error, not an endless loop
    monkeypatch.setattr(C, "_row", lambda seed, variant, i: (f"row {i % 7} .", (0, 0, 0, 0, 0)))
    with pytest.raises(ValueError, match="distinct"):
        C.splits(n_train=5, n_valid=3, n_test=3)


# ------------------------------------------------------------------------------------ Corpus
def test_corpus_subset_labels_and_validation(short):
    sub = short.subset([5, 2, 2])
    assert sub.sentences == [short.sentences[5], short.sentences[2], short.sentences[2]]
    assert sub.attributes["tense"].tolist() == short.attributes["tense"][[5, 2, 2]].tolist()
    mask = short.attributes["topic"] == 3
    by_mask = short.subset(mask)
    assert len(by_mask) == int(mask.sum()) and set(by_mask.labels("topic")) == {"technology"}
    assert short.subset(slice(10, 13)).sentences == short.sentences[10:13]
    assert len(short.subset([])) == 0
    assert short.labels("number")[0] == C.NUMBERS[short.attributes["number"][0]]
    with pytest.raises(ValueError, match="indices"):
        short.subset([N])
    with pytest.raises(ValueError, match="attribute"):
        short.labels("colour")
    with pytest.raises(ValueError, match="attributes"):
        C.Corpus(["a", "b"], {"x": np.array([0])}, {"x": ["p"]})
    with pytest.raises(ValueError, match="attributes"):
        C.Corpus(["a"], {"x": np.array([2])}, {"x": ["p", "q"]})
    with pytest.raises(ValueError, match="attribute_names"):
        C.Corpus(["a"], {"x": np.array([0])}, {})
    with pytest.raises(TypeError, match="sentences"):
        C.Corpus(["a", 3])


# ----------------------------------------------------------------------------------- loaders
def test_load_ptb_reads_three_files(tmp_path):
    (tmp_path / "ptb.train.txt").write_text(" aer banknote berlitz \n\n the <unk> rose N % \n")
    (tmp_path / "ptb.valid.txt").write_text(" consumers may want to move \n")
    (tmp_path / "ptb.test.txt").write_text(" no it was n't black monday\n   \n")
    d = C.load_ptb(tmp_path)
    assert set(d) == {"train", "valid", "test"}
    assert d["train"].sentences == ["aer banknote berlitz", "the <unk> rose N %"]
    assert d["valid"].sentences == ["consumers may want to move"]
    assert d["test"].sentences == ["no it was n't black monday"]
    assert d["train"].attributes == {}
    (tmp_path / "ptb.test.txt").unlink()
    with pytest.raises(FileNotFoundError, match="ptb.test.txt"):
        C.load_ptb(tmp_path)
    with pytest.raises(FileNotFoundError, match="nowhere"):
        C.load_ptb(tmp_path / "nowhere")
    (tmp_path / "ptb.test.txt").write_text("\n \n")
    with pytest.raises(ValueError, match="ptb.test.txt.*no non-blank line"):
        C.load_ptb(tmp_path)


def test_load_lines_plain_labelled_folders_and_write_lines(tmp_path, long):
    path = tmp_path / "docs.txt"
    C.write_lines(long.subset(range(12)), path)
    back = C.load_lines(path)
    assert back.sentences == long.sentences[:12] and back.attributes == {}
    assert path.read_text().count("\n") == 12
    C.write_lines(["one", "two"], tmp_path / "plain.txt")
    assert C.load_lines(tmp_path / "plain.txt").sentences == ["one", "two"]
    with pytest.raises(ValueError, match="line break"):
        C.write_lines(["a\nb"], tmp_path / "bad.txt")

    (tmp_path / "yelp.train.txt").write_text("4\tgreat  food .\n0\tawful service\n\n1\tok\n")
    (tmp_path / "yelp.valid.txt").write_text("4\tnice\n")
    (tmp_path / "yelp.test.txt").write_text("0\tbad\n10\tsuperb\n")
    d = C.load_lines_folder(tmp_path, pattern="yelp.{split}.txt", labelled=True)
    assert d["train"].sentences == ["great food .", "awful service", "ok"]
    assert d["train"].attribute_names["label"] == ["0", "1", "4"] and d["train"].labels("label") == ["4", "0", "1"]
    assert d["test"].attribute_names["label"] == ["0", "10"]   # integers sort by value
    unlabelled = C.load_lines_folder(tmp_path, pattern="yelp.{split}.txt")
    assert unlabelled["valid"].sentences == ["4 nice"]   # the tab is whitespace
    (tmp_path / "yelp.valid.txt").write_text("4\tnice\nno label here\n")
    with pytest.raises(ValueError, match="line 2"):
        C.load_lines_folder(tmp_path, pattern="yelp.{split}.txt", labelled=True)
    with pytest.raises(FileNotFoundError, match="train"):
        C.load_lines_folder(tmp_path)   # no train.txt
    with pytest.raises(ValueError, match="pattern"):
        C.load_lines_folder(tmp_path, pattern="yelp.txt")
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        C.load_lines(tmp_path / "missing.txt")
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(ValueError, match="empty.txt"):
        C.load_lines(tmp_path / "empty.txt")


def test_load_snli_jsonl(tmp_path):
    rows = [{"sentence1": "A man plays.", "sentence2": "A person plays.", "gold_label": "entailment"},
            {"sentence1": "A man plays.", "sentence2": "Nobody  plays.", "gold_label": "contradiction"},
            {"sentence1": "Two dogs run.", "sentence2": "Dogs race.", "gold_label": "-"},
            {"sentence1": "A cat sleeps.", "sentence2": "The cat is tired.", "gold_label": "neutral"}]
    path = tmp_path / "snli_1.0_dev.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows[:2]) + "\n\n" + "\n".join(json.dumps(r) for r in rows[2:]))
    both = C.load_snli(path)
    assert both.sentences == ["A man plays.", "A person plays.", "A man plays.", "Nobody plays.",
                              "A cat sleeps.", "The cat is tired."]
    assert both.labels("label") == ["entailment"] * 2 + ["contradiction"] * 2 + ["neutral"] * 2
    assert both.attributes["part"].tolist() == [0, 1, 0, 1, 0, 1]
    hyp = C.load_snli(path, which="sentence2")
    assert hyp.sentences == ["A person plays.", "Nobody plays.", "The cat is tired."]
    assert hyp.attributes["label"].tolist() == [0, 2, 1] and "part" not in hyp.attributes
    assert C.load_snli(path, which="sentence1").sentences == ["A man plays.", "A man plays.", "A cat sleeps."]

    lines = path.read_text().splitlines()
    lines[3] = '{"sentence1": "broken", '   # line 4 of the file
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines))
    with pytest.raises(ValueError, match=r"bad\.jsonl.*line 4.*malformed JSON"):
        C.load_snli(bad)
    bad.write_text(json.dumps({"sentence1": "x", "gold_label": "neutral"}))
    with pytest.raises(ValueError, match="line 1.*sentence2"):
        C.load_snli(bad)
    bad.write_text(json.dumps({"sentence1": "x", "sentence2": "y", "gold_label": "maybe"}))
    with pytest.raises(ValueError, match="gold_label"):
        C.load_snli(bad)
    with pytest.raises(ValueError, match="which"):
        C.load_snli(path, which="premise")
    with pytest.raises(FileNotFoundError, match="snli_1.0_train.jsonl"):
        C.load_snli(tmp_path / "snli_1.0_train.jsonl")
    bad.write_text("\n")
    with pytest.raises(ValueError, match="no non-blank line"):
        C.load_snli(bad)
