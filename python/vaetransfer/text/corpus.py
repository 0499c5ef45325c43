"""Text corpora: a built-in, seeded English-like corpus whose sentences carry the attributes that
generated them, and readers for the corpora of "Finetuning Pretrained Transformers into
Variational Autoencoders" (Park & Lee, 2021): PTB, Yahoo/Yelp (one document per line) and SNLI.

**Why a generated corpus.** A T5 is pretrained on it here and a T5-VAE is then finetuned on it; a
probe can then ask whether a sentence's latent code captures the sentence's latent attributes,
which only works when every sentence's attributes are known and the words really depend on them.

**The grammar** (:func:`generate`). Every sentence (``variant="short"``) or document
(``variant="long"``) first draws five attributes, independently and uniformly:

* ``topic`` (:data:`TOPICS`, 8): food, sports, travel, technology, music, weather, movies,
  animals. Each topic has its own agents (``chef``, ``runner``, ``pilot``...), things (``soup``,
  ``match``, ``flight``...), places, transitive and intransitive verbs, descriptive adjectives and
  positive/negative evaluative adjectives (``delicious``/``bland``). Every clause's subject is a
  noun of the topic (or a pronoun for one), and no topic word ever appears in another topic's
  sentences.
* ``sentiment`` (:data:`SENTIMENTS`): negative, neutral, positive. Positive and negative
  sentences carry at least one evaluative word in each of their one or two main clauses: an evaluative adjective (generic,
  ``wonderful``/``terrible``, or the topic's), an experiencer verb (``loved``/``hated``), a
  feeling adjective (``happy``/``upset``), a manner adverb (``happily``/``angrily``) or a
  character adjective (``friendly``/``rude``). Neutral sentences use only the neutral
  counterparts (``noticed``, ``curious``, ``quietly``, ``spicy``...). There is no negation, so a
  word's polarity is the sentence's.
* ``tense`` (:data:`TENSES`): past, present (simple, habitual), future. Every finite verb carries
  it (``cooked`` / ``cooks`` / ``will cook``; ``was`` / ``is`` / ``will be``), and time
  adverbials agree (``yesterday`` / ``these days`` / ``tomorrow``).
* ``number`` (:data:`NUMBERS`): singular, plural: the number of **every subject** in the
  sentence (or document), main and subordinate clauses alike, with subject–verb agreement
  (``the cat sleeps`` / ``the cats sleep``, ``was`` / ``were``) and agreeing pronouns
  (``he``/``she``/``it`` vs ``they``). Objects and prepositional nouns take a random number.
* ``length_class`` (:data:`LENGTH_CLASSES`): short, medium, long. For a sentence: one clause
  with 0–1 optional modifiers, one clause with 1–3, or two clauses (``and`` / ``, so`` /
  ``because``) with 0–1. For a document: 2–4, 4–6 or 6–8 sentences, each sentence drawing its
  own sentence length class.

A clause is one of five frames: transitive (``the chef cooked a soup``), experiencer (``the
chefs loved the soup``), intransitive (``the guests dined at the cafe``), feeling (``the diner
was happy with the salad``) and copular with a thing as subject (``the soups were delicious``).
Optional modifiers: adjectives on the subject or object, a degree adverb (``very``), a manner
adverb, a place (``in the kitchen``), a benefactive (``for the guests``), company (``with
friends``), a time adverbial (fronted with a comma or final) and a relative clause on the subject
(``the chefs who work at the bakery``, ``the soup that the chef cooked``).

**Format.** Lower case, whitespace-tokenised, punctuation as separate tokens (``,`` after a
fronted adverbial and before ``so``; every sentence ends with `` .``), single spaces, no leading or
trailing space: ``text.split()`` gives the tokens, as in the PTB files. A document is its
sentences joined by one space.

**Measured** (``generate(20000, seed=0)``, words = tokens other than ``,`` and ``.``):
``short``: 10.2 words per sentence (s.d. 3.5, range 4–23; 11.4 tokens with punctuation; by length
class 7.0 / 10.3 / 13.4 words); ``long``: 51.2 words per document (s.d. 20.6, range 9–125; 57.3
tokens; 3.0 / 5.0 / 7.0 sentences and 30.7 / 51.0 / 71.7 words by length class). The grammar can
produce :func:`vocabulary` = 857 distinct tokens (855 words and the two punctuation marks), and
20,000 sentences of either variant use all of them; 1 of the 20,000 short sentences is a
duplicate. Generating 20,000 short sentences takes about 1.6 s, 20,000 documents about 3.5 s.

**Determinism.** Sentence i is drawn from its own generator, ``numpy.random.PCG64`` seeded by
``SeedSequence((seed, variant, i))``, so ``generate(n, seed=s)`` is a function of its arguments
only (no global state) and ``generate(k, seed=s)`` is the first k rows of ``generate(n, seed=s)``
for every k ≤ n. :func:`splits` cuts the de-duplicated rows of one such stream into disjoint
train/valid/test sets.

**Loaders.** :func:`load_ptb`, :func:`load_lines`, :func:`load_lines_folder` and
:func:`load_snli` read the public files (nothing is downloaded); :func:`write_lines` writes a
corpus one sentence per line, which :func:`load_lines` reads back.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from .._checks import check_int, check_seed, type_error, value_error
from ..io import atomic_path

__all__ = ["Corpus", "TOPICS", "SENTIMENTS", "TENSES", "NUMBERS", "LENGTH_CLASSES", "ATTRIBUTES", "VARIANTS",
           "LEXICON", "generate", "splits", "vocabulary", "load_ptb", "load_lines", "load_lines_folder",
           "load_snli", "write_lines", "SPLITS", "SNLI_LABELS"]

TOPICS = ("food", "sports", "travel", "technology", "music", "weather", "movies", "animals")
SENTIMENTS = ("negative", "neutral", "positive")
TENSES = ("past", "present", "future")
NUMBERS = ("singular", "plural")
LENGTH_CLASSES = ("short", "medium", "long")
#: The attributes of a generated corpus, in the order they are drawn, with their labels.
ATTRIBUTES = {"topic": TOPICS, "sentiment": SENTIMENTS, "tense": TENSES, "number": NUMBERS,
              "length_class": LENGTH_CLASSES}
VARIANTS = ("short", "long")
SPLITS = ("train", "valid", "test")
#: SNLI's gold labels, in the order of their codes in ``attributes["label"]``.
SNLI_LABELS = ("entailment", "neutral", "contradiction")


# ------------------------------------------------------------------------------------ corpus
@dataclass
class Corpus:
    """Sentences (or documents) with integer-coded attributes.

    ``sentences``: N strings. ``attributes``: name → int64 array [N] of codes; ``attribute_names``:
    name → labels, ``attribute_names[a][attributes[a][i]]`` is row i's label of attribute a (every
    attribute has its labels). A corpus read from files without labels has no attributes.
    """

    sentences: list[str]
    attributes: dict[str, np.ndarray] = field(default_factory=dict)
    attribute_names: dict[str, list[str]] = field(default_factory=dict)

    def __post_init__(self):
        if not isinstance(self.sentences, list) or not all(isinstance(s, str) for s in self.sentences):
            raise type_error("sentences", "expected a list of str")
        if set(self.attributes) != set(self.attribute_names):
            raise value_error("attribute_names", f"expected labels for exactly the attributes "
                                                 f"{sorted(self.attributes)}, got {sorted(self.attribute_names)}")
        if not isinstance(self.attributes, dict):
            raise type_error("attributes", f"expected a dict of name to codes, got {type(self.attributes).__name__}")
        if not isinstance(self.attribute_names, dict):
            raise type_error("attribute_names", f"expected a dict of name to labels, got {type(self.attribute_names).__name__}")
        for name, labels in self.attribute_names.items():
            if isinstance(labels, (str, bytes)) or not isinstance(labels, (list, tuple)) \
                    or not all(isinstance(x, str) for x in labels):
                raise type_error("attribute_names", f"{name!r}: expected a list of label strings, got {labels!r}")
        attributes = {}
        for name, codes in self.attributes.items():
            codes = np.asarray(codes)
            if codes.ndim != 1 or codes.shape[0] != len(self.sentences):
                raise value_error("attributes", f"{name!r}: expected shape [{len(self.sentences)}], "
                                                f"got {list(codes.shape)}")
            if codes.size and not np.issubdtype(codes.dtype, np.integer):
                raise type_error("attributes", f"{name!r}: expected integer codes, got {codes.dtype}")
            codes = codes.astype(np.int64)
            labels = list(self.attribute_names[name])
            if codes.size and (codes.min() < 0 or codes.max() >= len(labels)):
                raise value_error("attributes", f"{name!r}: codes must lie in [0, {len(labels)}), got "
                                                f"{int(codes.min())}..{int(codes.max())}")
            attributes[name] = codes
            self.attribute_names[name] = labels
        self.attributes = attributes

    def __len__(self) -> int:
        return len(self.sentences)

    def subset(self, indices: Sequence[int] | np.ndarray | slice) -> "Corpus":
        """The rows ``indices`` (integers, a boolean mask [N] or a slice), in that order."""
        if isinstance(indices, slice):
            try:
                r = range(len(self))[indices]
            except (TypeError, ValueError) as exc:  # step 0, non-integer bounds
                raise value_error("indices", f"expected a slice with integer bounds and a non-zero step, "
                                             f"got {indices!r}") from exc
            rows = np.arange(r.start, r.stop, r.step, dtype=np.int64)
        elif indices is None or isinstance(indices, (str, bytes)) or np.ndim(indices) == 0:
            raise type_error("indices", f"expected a 1-D sequence of integers, a boolean mask or a slice, "
                                        f"got {type(indices).__name__}")
        else:
            rows = np.asarray(indices)
            if rows.dtype == bool:
                if rows.shape != (len(self),):
                    raise value_error("indices", f"a boolean mask must have shape [{len(self)}], got {list(rows.shape)}")
                rows = np.flatnonzero(rows)
            elif rows.size == 0:
                rows = rows.astype(np.int64)
            elif rows.ndim != 1 or not np.issubdtype(rows.dtype, np.integer):
                raise type_error("indices", "expected a 1-D sequence of integers, a boolean mask or a slice")
            if rows.size and (rows.min() < 0 or rows.max() >= len(self)):
                raise value_error("indices", f"expected rows in [0, {len(self)}), got values in "
                                             f"[{int(rows.min())}, {int(rows.max())}]")
        return Corpus([self.sentences[i] for i in rows.tolist()],
                      {k: v[rows] for k, v in self.attributes.items()},
                      {k: list(v) for k, v in self.attribute_names.items()})

    def labels(self, attribute: str) -> list[str]:
        """Each row's label of ``attribute``."""
        if not isinstance(attribute, str) or attribute not in self.attributes:
            raise value_error("attribute", f"expected one of {sorted(self.attributes)}, got {attribute!r}")
        names = self.attribute_names[attribute]
        return [names[c] for c in self.attributes[attribute].tolist()]


# ----------------------------------------------------------------------------------- lexicon
def _noun(spec: str) -> tuple[str, str]:
    """``"chef"`` → (chef, chefs); ``"dish"`` → (dish, dishes); ``"city"`` → (city, cities);
    ``"a/b"`` gives the plural explicitly."""
    if "/" in spec:
        sg, pl = spec.split("/")
        return sg, pl
    if spec.endswith(("s", "sh", "ch", "x")):
        return spec, spec + "es"
    if spec.endswith("y") and spec[-2] not in "aeiou":
        return spec, spec[:-1] + "ies"
    return spec, spec + "s"


def _verb(spec: str) -> tuple[str, str, str]:
    """``"cook"`` → (cook, cooks, cooked); ``"bake"`` → (bake, bakes, baked); ``"try"`` →
    (try, tries, tried); ``"a/b"`` gives the past explicitly and ``"a/b/c"`` the 3rd person
    singular and the past."""
    parts = spec.split("/")
    base = parts[0]
    if base.endswith(("s", "sh", "ch", "x")):
        third = base + "es"
    elif base.endswith("y") and base[-2] not in "aeiou":
        third = base[:-1] + "ies"
    else:
        third = base + "s"
    if len(parts) == 3:
        return base, parts[1], parts[2]
    if len(parts) == 2:
        return base, third, parts[1]
    if base.endswith("e"):
        past = base + "d"
    elif base.endswith("y") and base[-2] not in "aeiou":
        past = base[:-1] + "ied"
    else:
        past = base + "ed"
    return base, third, past


def _topic(agents, things, places, verbs, intransitive, adjectives, positive, negative):
    return {"agents": [_noun(s) for s in agents.split()], "things": [_noun(s) for s in things.split()],
            "places": [tuple(p.split(":")) for p in places.split()], "verbs": [_verb(s) for s in verbs.split()],
            "intransitive": [_verb(s) for s in intransitive.split()], "adjectives": adjectives.split(),
            "positive": positive.split(), "negative": negative.split()}


_TOPIC_LEXICON = {
    "food": _topic("chef baker waiter customer diner guest critic caterer",
                   "soup pizza salad cake sandwich pie dessert dish meal",
                   "in:kitchen at:restaurant at:bakery at:cafe at:market in:canteen",
                   "cook bake serve order taste prepare eat/ate share",
                   "dine snack feast", "spicy sweet salty homemade vegetarian warm crispy",
                   "delicious tasty flavorful mouthwatering", "bland stale greasy soggy"),
    "sports": _topic("player coach runner athlete referee fan captain swimmer goalkeeper",
                     "match game race tournament season championship workout marathon",
                     "at:stadium in:gym at:arena in:pool on:court",
                     "play watch finish join enter organize schedule",
                     "train compete practice", "annual indoor outdoor national weekly regional",
                     "thrilling exciting memorable spectacular", "sloppy tedious chaotic lackluster"),
    "travel": _topic("traveler tourist pilot guide passenger backpacker driver sailor",
                     "trip flight hotel journey tour ticket cruise suitcase",
                     "at:airport at:station in:harbor on:beach on:island in:village",
                     "book visit plan/plans/planned explore reserve pack take/takes/took",
                     "travel arrive wander depart", "overnight international guided coastal domestic daily",
                     "scenic relaxing charming breathtaking", "exhausting overpriced cramped stressful"),
    "technology": _topic("engineer developer programmer user scientist designer tester technician",
                         "laptop phone app computer robot website gadget server camera",
                         "in:lab at:office in:factory in:garage at:conference",
                         "build/built design test install repair upgrade launch debug/debugs/debugged",
                         "collaborate innovate experiment", "digital wireless portable electric automatic mobile",
                         "powerful reliable sleek intuitive", "buggy sluggish unreliable glitchy"),
    "music": _topic("singer drummer guitarist pianist composer musician violinist conductor",
                    "song album concert melody ballad symphony chorus playlist",
                    "in:studio at:theater at:club at:festival in:hall",
                    "perform record compose rehearse sing/sang write/wrote",
                    "dance improvise jam/jams/jammed", "acoustic classical instrumental electronic orchestral",
                    "catchy soulful melodic uplifting", "off-key noisy repetitive shrill"),
    "weather": _topic("forecaster farmer hiker gardener fisherman/fishermen meteorologist villager shepherd",
                      "storm cloud breeze sunset temperature snowfall heatwave forecast",
                      "in:valley on:mountain in:meadow on:hillside at:lake",
                      "observe predict measure photograph study monitor",
                      "hike shelter camp", "windy humid tropical seasonal icy foggy",
                      "refreshing mild glorious balmy", "gloomy freezing dreary harsh"),
    "movies": _topic("director actor actress reviewer viewer filmmaker producer screenwriter",
                     "film movie sequel documentary scene plot trailer comedy",
                     "at:cinema at:multiplex at:premiere at:screening",
                     "direct produce edit review stream rewatch",
                     "act audition", "animated silent foreign historical independent biographical",
                     "gripping hilarious touching captivating", "predictable forgettable confusing clumsy"),
    "animals": _topic("cat dog puppy kitten horse rabbit fox owl parrot",
                      "toy bone nest blanket ball basket carrot",
                      "in:barn in:garden in:forest in:yard at:pond",
                      "chase fetch bury catch/catches/caught carry sniff",
                      "sleep/slept jump swim/swam nap/naps/napped", "wooden squeaky round soft woolen",
                      "adorable cozy cute lovable", "filthy smelly ragged shabby"),
}

_GENERIC = {
    # evaluative adjectives of things, by polarity; descriptive ones for neutral sentences
    "thing_adjectives": {"positive": "wonderful excellent great amazing lovely brilliant fantastic superb "
                                     "delightful pleasant perfect impressive".split(),
                         "negative": "terrible awful horrible dreadful poor disappointing boring mediocre "
                                     "unpleasant pathetic lousy dismal".split(),
                         "neutral": "new old small large ordinary simple typical recent usual".split()},
    # character adjectives of agents
    "agent_adjectives": {"positive": "friendly talented kind cheerful generous clever".split(),
                         "negative": "rude lazy careless arrogant selfish impatient".split(),
                         "neutral": "young local tall quiet".split()},
    # feeling adjectives: "the fans were excited about the match"
    "feelings": {"positive": "happy proud grateful excited delighted thrilled".split(),
                 "negative": "sad angry upset frustrated disappointed annoyed".split(),
                 "neutral": "busy calm curious serious".split()},
    # experiencer verbs: "the fans loved the match"
    "experiencer": {"positive": [_verb(s) for s in "love enjoy admire adore appreciate praise".split()],
                    "negative": [_verb(s) for s in "hate dislike despise resent criticize dread".split()],
                    "neutral": [_verb(s) for s in "notice remember inspect examine mention describe".split()]},
    "manner": {"positive": "happily proudly gladly cheerfully eagerly joyfully".split(),
               "negative": "sadly angrily reluctantly grudgingly bitterly nervously".split(),
               "neutral": "quietly quickly slowly carefully calmly patiently".split()},
    "degree": "very really quite extremely truly rather".split(),
    "time": {"past": ["yesterday", "last week", "last night", "last summer", "last year", "two days ago"],
             "present": ["every day", "every weekend", "these days", "nowadays", "every morning", "most evenings"],
             "future": ["tomorrow", "next week", "next summer", "next year", "soon", "later this month"]},
    "company": ["friends", "colleagues", "neighbors", "relatives", "strangers"],
    "determiners": {"singular": "the the the the a a this that every".split(),
                    "plural": "the the the the these those some many two three several".split()},
    "feel": _verb("feel/felt"),
}

#: The grammar's word lists (read-only by convention): ``LEXICON["topics"][topic]`` has
#: ``agents``/``things`` (lists of (singular, plural)), ``places``, ``verbs``/``intransitive``
#: (lists of (base, 3rd person singular, past)), ``adjectives`` (descriptive), ``positive`` and
#: ``negative`` (evaluative); ``LEXICON["generic"]`` holds the shared, topic-free lists.
LEXICON = {"topics": _TOPIC_LEXICON, "generic": _GENERIC}

_VOWEL_SOUND_EXCEPTIONS = ("user", "users", "uni", "use", "one")  # "a user", "a unique", "a one-sided"


def _article(word: str) -> str:
    if word.startswith(_VOWEL_SOUND_EXCEPTIONS):
        return "a"
    return "an" if word[0] in "aeiou" else "a"


# ----------------------------------------------------------------------------------- sampler
class _Draw:
    """Uniform draws from one numpy PCG64 stream, buffered (a scalar numpy draw costs microseconds)."""

    __slots__ = ("_gen", "_buf", "_pos")

    def __init__(self, seed: int, variant: int, index: int):
        self._gen = np.random.Generator(np.random.PCG64(np.random.SeedSequence((seed, variant, index))))
        self._buf = self._gen.random(96).tolist()
        self._pos = 0

    def u(self) -> float:
        if self._pos == len(self._buf):
            self._buf = self._gen.random(96).tolist()
            self._pos = 0
        self._pos += 1
        return self._buf[self._pos - 1]

    def index(self, n: int) -> int:
        return min(int(self.u() * n), n - 1)

    def pick(self, seq):
        return seq[self.index(len(seq))]

    def chance(self, p: float) -> bool:
        return self.u() < p

    def sample(self, seq, k: int) -> list:
        """k distinct elements of seq (k ≤ len(seq)), in random order."""
        pool = list(seq)
        out = []
        for _ in range(min(k, len(pool))):
            out.append(pool.pop(self.index(len(pool))))
        return out


# Optional modifiers each frame can take (the length classes draw how many, a time adverbial for
# the whole sentence included).
_FRAME_SLOTS = {
    "transitive": ("subject_adjective", "object_adjective", "manner", "place", "benefactive", "relative"),
    "experiencer": ("subject_adjective", "object_adjective", "manner", "place", "relative"),
    "intransitive": ("subject_adjective", "manner", "company", "relative"),
    "feeling": ("subject_adjective", "object_adjective", "degree", "place", "relative"),
    "copular": ("subject_adjective", "degree", "place", "relative"),
}
_SENTENCE_MODIFIERS = {"short": (0, 1), "medium": (1, 3), "long": (0, 1)}   # inclusive ranges
_DOCUMENT_SENTENCES = {"short": (2, 4), "medium": (4, 6), "long": (6, 8)}


class _Sentence:
    """One sentence of fixed topic, sentiment, tense and number."""

    def __init__(self, r: _Draw, topic: str, sentiment: str, tense: str, number: str):
        self.r, self.lex, self.sentiment, self.tense, self.number = r, _TOPIC_LEXICON[topic], sentiment, tense, number
        self.plural = number == "plural"

    # words ----------------------------------------------------------------------------------
    def finite(self, verb: tuple[str, str, str]) -> list[str]:
        """A finite form of ``verb`` in the sentence's tense, agreeing with its number."""
        if self.tense == "past":
            return [verb[2]]
        if self.tense == "present":
            return [verb[0] if self.plural else verb[1]]
        return ["will", verb[0]]

    def be(self) -> list[str]:
        if self.tense == "past":
            return ["were" if self.plural else "was"]
        if self.tense == "present":
            return ["are" if self.plural else "is"]
        return ["will", "be"]

    def polar(self, table: dict) -> list:
        return table[self.sentiment]

    def noun_phrase(self, nouns, plural: bool, adjective: str | None = None, subject: bool = False,
                    definite: bool = False) -> list[str]:
        noun = self.r.pick(nouns)[1 if plural else 0]
        words = [adjective, noun] if adjective else [noun]
        det = "the" if definite else self.r.pick(_GENERIC["determiners"]["plural" if plural else "singular"])
        if det == "a":
            det = _article(words[0])
        if det == "every" and not subject:
            det = "the"
        return [det] + words

    def thing_adjective(self, evaluative: bool) -> str:
        """An adjective for a thing: evaluative (of the sentence's polarity; for neutral sentences
        a descriptive one) or descriptive (topic or generic)."""
        r = self.r
        if evaluative and self.sentiment != "neutral":
            table = self.lex[self.sentiment] if r.chance(0.5) else _GENERIC["thing_adjectives"][self.sentiment]
            return r.pick(table)
        return r.pick(self.lex["adjectives"]) if r.chance(0.6) else r.pick(_GENERIC["thing_adjectives"]["neutral"])

    def agent_adjective(self) -> str:
        r = self.r
        polarity = self.sentiment if r.chance(0.5) else "neutral"
        return r.pick(_GENERIC["agent_adjectives"][polarity])

    def place(self) -> list[str]:
        preposition, place = self.r.pick(self.lex["places"])
        return [preposition if self.r.chance(0.75) else "near", "the", place]

    def time(self) -> list[str]:
        return self.r.pick(_GENERIC["time"][self.tense]).split()

    def object_phrase(self, adjective: bool, evaluative: bool = False) -> list[str]:
        adj = self.thing_adjective(evaluative) if adjective else None
        return self.noun_phrase(self.lex["things"], self.r.chance(0.4), adj)

    # clauses --------------------------------------------------------------------------------
    def subject(self, kind: str, slots: set[str], pronoun: str | None) -> list[str]:
        if pronoun is not None:
            return [pronoun]
        r = self.r
        if kind == "agent":
            adj = self.agent_adjective() if "subject_adjective" in slots else None
            words = self.noun_phrase(self.lex["agents"], self.plural, adj, subject=True)
            if "relative" in slots:
                if r.chance(0.5):
                    words += ["who"] + self.finite(r.pick(self.lex["intransitive"])) + self.place()
                else:
                    words += ["who"] + self.finite(r.pick(self.lex["verbs"])) + self.object_phrase(False)
        else:
            adj = self.thing_adjective(False) if "subject_adjective" in slots else None
            words = self.noun_phrase(self.lex["things"], self.plural, adj, subject=True)
            if "relative" in slots:  # the relative clause's subject shares the sentence's number
                words += ["that"] + self.noun_phrase(self.lex["agents"], self.plural, definite=True)
                words += self.finite(r.pick(self.lex["verbs"]))
        return words

    def clause(self, frame: str, slots: set[str], pronoun: str | None = None) -> list[str]:
        """One clause of ``frame`` with the optional modifiers ``slots``; a non-neutral clause
        always carries at least one word of its polarity."""
        r = self.r
        polar = self.sentiment != "neutral"
        kind = "thing" if frame == "copular" else "agent"
        words = self.subject(kind, slots, pronoun)
        subject_is_polar = polar and any(w in _POLAR_WORDS[self.sentiment] for w in words)
        if frame == "transitive":
            # carries polarity through the manner adverb or the object's adjective
            manner = "manner" in slots
            obj_adj = "object_adjective" in slots
            if polar and not subject_is_polar and not manner and not obj_adj:
                manner, obj_adj = (True, False) if r.chance(0.5) else (False, True)
            adverb = r.pick(self.polar(_GENERIC["manner"])) if manner else None
            verb = self.finite(r.pick(self.lex["verbs"]))
            if adverb and r.chance(0.5):
                verb = verb[:-1] + [adverb] + verb[-1:]  # "happily cooked", "will happily cook"
                adverb = None
            words += verb + self.object_phrase(obj_adj, evaluative=True)
            if "benefactive" in slots:
                words += ["for"] + self.noun_phrase(self.lex["agents"], r.chance(0.5))
            if "place" in slots:
                words += self.place()
            if adverb:
                words.append(adverb)
        elif frame == "experiencer":
            words += self.finite(r.pick(self.polar(_GENERIC["experiencer"])))
            words += self.object_phrase("object_adjective" in slots, evaluative=True)
            if "place" in slots:
                words += self.place()
            if "manner" in slots:
                manner = _GENERIC["manner"]["neutral"] if r.chance(0.5) else self.polar(_GENERIC["manner"])
                words.append(r.pick(manner))
        elif frame == "intransitive":
            words += self.finite(r.pick(self.lex["intransitive"]))
            if "company" in slots:
                words += ["with", r.pick(_GENERIC["company"])]
            words += self.place()
            if polar or "manner" in slots:
                words.append(r.pick(self.polar(_GENERIC["manner"])))
        elif frame == "feeling":
            verb = self.finite(_GENERIC["feel"]) if r.chance(0.3) else self.be()
            words += verb
            if "degree" in slots:
                words.append(r.pick(_GENERIC["degree"]))
            words.append(r.pick(self.polar(_GENERIC["feelings"])))
            words += [r.pick(("about", "with"))] + self.object_phrase("object_adjective" in slots)
            if "place" in slots:
                words += self.place()
        else:  # copular: "the soups were (very) delicious (at the cafe)"
            words += self.be()
            if "degree" in slots:
                words.append(r.pick(_GENERIC["degree"]))
            words.append(self.thing_adjective(evaluative=True))
            if "place" in slots:
                words += self.place()
        return words

    def frame_and_slots(self, budget: int, pronoun_kind: str | None = None) -> tuple[str, str, set[str]]:
        r = self.r
        if pronoun_kind == "thing":
            frame = "copular"
        elif pronoun_kind == "agent":
            frame = r.pick(("transitive", "experiencer", "intransitive", "feeling"))
        else:
            frame = r.pick(("transitive", "transitive", "experiencer", "intransitive", "feeling", "copular"))
        # a pronoun subject takes neither an adjective nor a relative clause
        allowed = [s for s in _FRAME_SLOTS[frame] if not (pronoun_kind and s in ("subject_adjective", "relative"))]
        return frame, ("thing" if frame == "copular" else "agent"), set(r.sample(allowed, budget))

    def pronoun(self, kind: str) -> str:
        if self.plural:
            return "they"
        return "it" if kind == "thing" else self.r.pick(("he", "she"))

    def build(self, length_class: str) -> str:
        r = self.r
        lo, hi = _SENTENCE_MODIFIERS[length_class]
        budget = lo + r.index(hi - lo + 1)
        time = budget > 0 and r.chance(0.3)
        budget -= int(time)
        if length_class != "long":
            frame, _, slots = self.frame_and_slots(budget)
            words = self.clause(frame, slots)
        else:
            first = r.index(budget + 1)
            frame, kind, slots = self.frame_and_slots(first)
            words = self.clause(frame, slots)
            conjunction = r.pick(("and", "so", "because"))
            if r.chance(0.6):  # a pronoun for the first subject
                frame2, _, slots2 = self.frame_and_slots(budget - first, pronoun_kind=kind)
                second = self.clause(frame2, slots2, pronoun=self.pronoun(kind))
            else:
                frame2, _, slots2 = self.frame_and_slots(budget - first)
                second = self.clause(frame2, slots2)
            words += ([","] if conjunction == "so" else []) + [conjunction] + second
        if time:
            adverbial = self.time()
            words = adverbial + [","] + words if r.chance(0.5) else words + adverbial
        return " ".join(words + ["."])


_POLAR_WORDS = {
    polarity: frozenset(
        [w for t in _TOPIC_LEXICON.values() for w in t[polarity]]
        + [w for key in ("thing_adjectives", "agent_adjectives", "feelings", "manner")
           for w in _GENERIC[key][polarity]]
        + [f for v in _GENERIC["experiencer"][polarity] for f in v])
    for polarity in ("positive", "negative")}


def _row(seed: int, variant: str, index: int) -> tuple[str, tuple[int, ...]]:
    r = _Draw(seed, VARIANTS.index(variant), index)
    codes = tuple(r.index(len(labels)) for labels in ATTRIBUTES.values())
    topic, sentiment, tense, number, length_class = (labels[c] for labels, c in zip(ATTRIBUTES.values(), codes))
    gen = _Sentence(r, topic, sentiment, tense, number)
    if variant == "short":
        return gen.build(length_class), codes
    lo, hi = _DOCUMENT_SENTENCES[length_class]
    count = lo + r.index(hi - lo + 1)
    return " ".join(gen.build(r.pick(LENGTH_CLASSES)) for _ in range(count)), codes


def _check_variant(variant) -> str:
    if variant not in VARIANTS:
        raise value_error("variant", f"expected one of {list(VARIANTS)}, got {variant!r}")
    return variant


def _generate_rows(start: int, stop: int, variant: str, seed: int) -> tuple[list[str], np.ndarray]:
    sentences, codes = [], []
    for i in range(start, stop):
        s, c = _row(seed, variant, i)
        sentences.append(s)
        codes.append(c)
    return sentences, np.asarray(codes, dtype=np.int64).reshape(-1, len(ATTRIBUTES))


def _corpus(sentences: list[str], codes: np.ndarray) -> Corpus:
    return Corpus(sentences, {name: codes[:, j].copy() for j, name in enumerate(ATTRIBUTES)},
                  {name: list(labels) for name, labels in ATTRIBUTES.items()})


def generate(n: int, *, variant: str = "short", seed: int = 0) -> Corpus:
    """``n`` rows of the built-in corpus: sentences (``variant="short"``, about 10 words) or
    documents (``"long"``, about 50 words), with the attributes :data:`ATTRIBUTES` (int64 [n]
    each). Deterministic in (n, variant, seed); the first k rows equal ``generate(k, ...)``."""
    n = check_int(n, "n", 0)
    sentences, codes = _generate_rows(0, n, _check_variant(variant), check_seed(seed))
    return _corpus(sentences, codes)


def splits(*, variant: str = "short", n_train: int = 20000, n_valid: int = 2000, n_test: int = 2000,
           seed: int = 0) -> dict[str, Corpus]:
    """Train/valid/test corpora of ``n_train``/``n_valid``/``n_test`` rows with no sentence in
    two splits and none twice in a split: the rows of ``generate(·, variant=variant, seed=seed)``
    in order, each kept only at its first occurrence, cut into train, then valid, then test."""
    variant, seed = _check_variant(variant), check_seed(seed)
    sizes = [check_int(n_train, "n_train", 1), check_int(n_valid, "n_valid", 0), check_int(n_test, "n_test", 0)]
    total = sum(sizes)
    seen: set[str] = set()
    keep_sentences: list[str] = []
    keep_codes: list[np.ndarray] = []
    start, attempts = 0, 0
    while len(keep_sentences) < total:
        need = total - len(keep_sentences)
        stop = start + need + need // 8 + 16
        sentences, codes = _generate_rows(start, stop, variant, seed)
        before = len(keep_sentences)
        for s, c in zip(sentences, codes):
            if s not in seen and len(keep_sentences) < total:
                seen.add(s)
                keep_sentences.append(s)
                keep_codes.append(c)
        start = stop
        attempts = attempts + 1 if len(keep_sentences) - before < need // 100 + 1 else 0
        if attempts >= 5:  # the grammar cannot produce that many distinct rows
            raise value_error("n_train", f"the {variant!r} grammar gave only {len(keep_sentences)} distinct rows "
                                         f"of the {total} requested")
    codes = np.asarray(keep_codes, dtype=np.int64).reshape(-1, len(ATTRIBUTES))
    out, offset = {}, 0
    for name, size in zip(SPLITS, sizes):
        out[name] = _corpus(keep_sentences[offset:offset + size], codes[offset:offset + size])
        offset += size
    return out


def vocabulary() -> list[str]:
    """Every token the grammar can produce (words and the punctuation ``,`` and ``.``), sorted."""
    words: set[str] = {",", ".", "will", "be", "was", "were", "is", "are", "who", "that", "for", "with", "about",
                       "in", "at", "near", "and", "so", "because", "he", "she", "it", "they", "a", "an"}
    for t in _TOPIC_LEXICON.values():
        for key in ("agents", "things", "verbs", "intransitive"):
            words.update(w for forms in t[key] for w in forms)
        words.update(p for _, p in t["places"])
        words.update(p for p, _ in t["places"])
        for key in ("adjectives", "positive", "negative"):
            words.update(t[key])
    for key in ("thing_adjectives", "agent_adjectives", "feelings", "manner"):
        words.update(w for ws in _GENERIC[key].values() for w in ws)
    words.update(f for vs in _GENERIC["experiencer"].values() for v in vs for f in v)
    words.update(_GENERIC["feel"])
    words.update(_GENERIC["degree"], _GENERIC["company"])
    words.update(w for phrases in _GENERIC["time"].values() for p in phrases for w in p.split())
    words.update(w for ds in _GENERIC["determiners"].values() for w in ds)
    return sorted(words)


# ----------------------------------------------------------------------------------- loaders
def _check_path(path, argument: str) -> Path:
    if not isinstance(path, (str, os.PathLike)):
        raise type_error(argument, f"expected a path, got {type(path).__name__}")
    return Path(path)


def _read_text(path: Path, argument: str) -> str:
    if not path.exists():
        exc = FileNotFoundError(f"argument '{argument}': no such file: {str(path)!r}")
        exc.argument = argument
        raise exc
    if not path.is_file():
        raise value_error(argument, f"not a file: {str(path)!r}")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise value_error(argument, f"{str(path)!r} is not UTF-8 text ({exc})") from exc


def _lines(path: Path, argument: str) -> list[tuple[int, str]]:
    """(line number from 1, line with whitespace collapsed) of the non-blank lines; a ValueError
    if there is none."""
    out = [(i + 1, " ".join(line.split())) for i, line in enumerate(_read_text(path, argument).splitlines())]
    out = [(i, s) for i, s in out if s]
    if not out:
        raise value_error(argument, f"{str(path)!r} has no non-blank line")
    return out


def load_lines(path: str | os.PathLike, *, labelled: bool = False) -> Corpus:
    """One sentence or document per line (the Yahoo and Yelp files of the paper, PTB's files,
    or :func:`write_lines`' output), UTF-8. Runs of whitespace become one space, the ends are
    stripped and blank lines skipped; everything else, ``<unk>`` included, is kept as it is.

    ``labelled``: each line is ``label<TAB>text`` (the labelled Yahoo/Yelp files); the labels
    become the attribute ``label``, coded in the order of their sorted strings (integers by
    value). Without it, the corpus has no attributes."""
    path = _check_path(path, "path")
    if not labelled:
        return Corpus([s for _, s in _lines(path, "path")])
    raw = [(i + 1, line) for i, line in enumerate(_read_text(path, "path").splitlines()) if line.strip()]
    if not raw:
        raise value_error("path", f"{str(path)!r} has no non-blank line")
    labels, sentences = [], []
    for number, line in raw:
        label, tab, text = line.partition("\t")
        text = " ".join(text.split())
        if not tab or not label.strip() or not text:
            raise value_error("path", f"{str(path)!r} line {number}: expected 'label<TAB>text', got {line[:80]!r}")
        labels.append(label.strip())
        sentences.append(text)
    names = sorted(set(labels), key=lambda s: (0, int(s), s) if s.lstrip("-").isdigit() else (1, 0, s))
    index = {name: k for k, name in enumerate(names)}
    return Corpus(sentences, {"label": np.asarray([index[x] for x in labels], dtype=np.int64)}, {"label": names})


def load_lines_folder(folder: str | os.PathLike, *, pattern: str = "{split}.txt",
                      labelled: bool = False) -> dict[str, Corpus]:
    """The splits ``train``/``valid``/``test`` of a folder of :func:`load_lines` files, named
    ``pattern.format(split=...)`` (``"{split}.txt"``; the paper's Yahoo/Yelp folders:
    ``"yahoo.{split}.txt"``, ``"yelp.{split}.txt"``)."""
    folder = _check_path(folder, "folder")
    if not folder.is_dir():
        exc = FileNotFoundError(f"argument 'folder': no such folder: {str(folder)!r}")
        exc.argument = "folder"
        raise exc
    if not isinstance(pattern, str) or "{split}" not in pattern:
        raise value_error("pattern", f"expected a file name containing '{{split}}', got {pattern!r}")
    try:
        pattern.format(split="train")
    except (KeyError, IndexError, ValueError) as exc:
        raise value_error("pattern", f"expected a file name whose only field is '{{split}}', got {pattern!r}") from exc
    out = {}
    for split in SPLITS:
        path = folder / pattern.format(split=split)
        try:
            out[split] = load_lines(path, labelled=labelled)
        except FileNotFoundError as exc:
            err = FileNotFoundError(f"argument 'folder': no {split} file {str(path)!r}")
            err.argument = "folder"
            raise err from exc
    return out


def load_ptb(folder: str | os.PathLike) -> dict[str, Corpus]:
    """The Penn Treebank as in Mikolov's language-modelling files: ``ptb.train.txt``,
    ``ptb.valid.txt``, ``ptb.test.txt`` in ``folder``, one whitespace-tokenised sentence per line
    (``<unk>`` and ``N`` kept as they are, blank lines skipped) → ``{"train", "valid", "test"}``."""
    return load_lines_folder(folder, pattern="ptb.{split}.txt")


def load_snli(path: str | os.PathLike, *, which: str = "both") -> Corpus:
    """SNLI's ``.jsonl`` (one JSON object per line with ``sentence1``, ``sentence2``,
    ``gold_label``). Rows whose gold label is ``"-"`` (no annotator majority) are skipped.

    ``which``: ``"both"`` (each pair gives its premise, then its hypothesis; the attribute
    ``part`` is 0 for ``sentence1`` and 1 for ``sentence2``), ``"sentence1"`` or
    ``"sentence2"``. Every row has the attribute ``label`` (:data:`SNLI_LABELS`): the pair's gold
    label. A premise occurs once per hypothesis written for it (about 3 times in SNLI's train
    set); nothing is de-duplicated. Sentences are kept as written (case and punctuation), with
    whitespace collapsed."""
    path = _check_path(path, "path")
    if which not in ("both", "sentence1", "sentence2"):
        raise value_error("which", f"expected 'both', 'sentence1' or 'sentence2', got {which!r}")
    text = _read_text(path, "path")
    sentences: list[str] = []
    labels: list[int] = []
    parts: list[int] = []
    rows = 0
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        rows += 1
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise value_error("path", f"{str(path)!r} line {number}: malformed JSON ({exc.msg})") from exc
        if not isinstance(row, dict):
            raise value_error("path", f"{str(path)!r} line {number}: expected a JSON object")
        missing = [k for k in ("sentence1", "sentence2", "gold_label") if not isinstance(row.get(k), str)]
        if missing:
            raise value_error("path", f"{str(path)!r} line {number}: missing string field(s) {missing}")
        label = row["gold_label"]
        if label == "-":
            continue
        if label not in SNLI_LABELS:
            raise value_error("path", f"{str(path)!r} line {number}: gold_label {label!r} is not one of "
                                      f"{list(SNLI_LABELS) + ['-']}")
        keys = ("sentence1", "sentence2") if which == "both" else (which,)
        for part, key in enumerate(keys):
            sentences.append(" ".join(row[key].split()))
            labels.append(SNLI_LABELS.index(label))
            parts.append(part)
    if rows == 0:
        raise value_error("path", f"{str(path)!r} has no non-blank line")
    attributes = {"label": np.asarray(labels, dtype=np.int64)}
    names = {"label": list(SNLI_LABELS)}
    if which == "both":
        attributes["part"] = np.asarray(parts, dtype=np.int64)
        names["part"] = ["sentence1", "sentence2"]
    return Corpus(sentences, attributes, names)


def write_lines(corpus: Corpus | Iterable[str], path: str | os.PathLike) -> None:
    """Writes the sentences one per line (UTF-8, ``\\n`` after each; atomically). The attributes
    are not written. A sentence containing a line break is refused."""
    path = _check_path(path, "path")
    if not isinstance(corpus, Corpus) and (isinstance(corpus, (str, bytes)) or not isinstance(corpus, Iterable)):
        raise type_error("corpus", f"expected a Corpus or an iterable of sentences, got {type(corpus).__name__}")
    sentences = corpus.sentences if isinstance(corpus, Corpus) else list(corpus)
    for i, s in enumerate(sentences):
        if not isinstance(s, str):
            raise type_error("corpus", f"row {i}: expected str, got {type(s).__name__}")
        if len(s.splitlines()) > 1 or s.endswith(("\n", "\r")):
            raise value_error("corpus", f"row {i} contains a line break")
    with atomic_path(path) as tmp:
        tmp.write_text("".join(s + "\n" for s in sentences), encoding="utf-8")
