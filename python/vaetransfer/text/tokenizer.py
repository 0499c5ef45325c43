"""T5-style tokenizers: a SentencePiece unigram model with T5's special ids, read from and
written to Hugging Face tokenizer folders, and trained on a corpus (:func:`train_tokenizer`).

**Conventions** (those of T5 and of "Finetuning Pretrained Transformers into Variational
Autoencoders" (Park & Lee, 2021), which starts from T5): id 0 is ``<pad>`` (also the decoder's
start token), 1 is ``</s>`` (appended to every encoded text), 2 is ``<unk>``; there is no BOS.
The ``extra_ids`` sentinels ``<extra_id_0>`` … ``<extra_id_{extra_ids-1}>`` of span corruption
are the last ids of the vocabulary: ``<extra_id_i>`` = ``vocab_size - 1 - i``, appended after
the SentencePiece pieces exactly as Hugging Face's ``T5Tokenizer`` does for a ``spiece.model``.

**Backends.** A :class:`Tokenizer` wraps a ``tokenizers.Tokenizer`` (a folder's
``tokenizer.json``) or a ``sentencepiece.SentencePieceProcessor`` (a folder's ``spiece.model``);
:meth:`Tokenizer.from_pretrained` prefers ``tokenizer.json``. Both give the ids of
``transformers.AutoTokenizer.from_pretrained(folder)`` (transformers 5.x, whose ``T5Tokenizer``
is the tokenizers-backed one): the text is cut at the special tokens (``<pad>``, ``</s>``,
``<unk>``, the sentinels; matched as written, before normalisation), and every other piece is
normalised (SentencePiece's ``nmt_nfkc`` character map), split at whitespace, prefixed with ``▁``
and segmented by the unigram model. Decoding joins the pieces, turns ``▁`` into spaces and drops
the first one, as Hugging Face's Metaspace decoder does.

**Round trip.** ``decode(encode(s)) == s`` holds for text whose words are all covered by the
vocabulary's characters and which is already normalised: single spaces, no leading or trailing
space, no characters that NFKC changes (``ﬁ`` → ``fi``, full-width forms, non-breaking space),
no special-token strings. Characters outside the vocabulary become ``<unk>``, which decoding
drops (``skip_special_tokens=True``), as Hugging Face's decode does. The built-in corpus
(:mod:`.corpus`) round-trips exactly.

**Files.** :meth:`Tokenizer.save_pretrained` writes ``spiece.model`` (when the tokenizer has a
SentencePiece model), ``tokenizer.json`` (built with ``tokenizers`` from the SentencePiece model,
as Hugging Face's T5 conversion does), ``tokenizer_config.json`` (``tokenizer_class``
``"T5Tokenizer"``, ``extra_ids``, ``model_max_length``, the special tokens) and
``special_tokens_map.json``.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import torch

from .._C import ArgumentError
from .._checks import bare_message, type_error, value_error
from ..io import atomic_path, file_size, read_bounded, read_json

try:
    import sentencepiece as spm
    import tokenizers
    from sentencepiece import sentencepiece_model_pb2 as _spm_pb2
    from tokenizers import decoders as _decoders
    from tokenizers import normalizers as _normalizers
    from tokenizers import pre_tokenizers as _pre_tokenizers
    from tokenizers import processors as _processors
    from tokenizers.models import Unigram as _Unigram
except ImportError as exc:  # pragma: no cover - the "text" extra is missing
    raise ImportError("vaetransfer.text.tokenizer needs sentencepiece and tokenizers "
                      "(pip install 'vaetransfer[text]')") from exc

__all__ = ["Tokenizer", "train_tokenizer", "PAD", "EOS", "UNK", "PAD_ID", "EOS_ID", "UNK_ID", "sentinel_token"]

PAD, EOS, UNK = "<pad>", "</s>", "<unk>"
PAD_ID, EOS_ID, UNK_ID = 0, 1, 2
SPIECE_FILE = "spiece.model"
TOKENIZER_FILE = "tokenizer.json"
CONFIG_FILE = "tokenizer_config.json"
SPECIAL_TOKENS_FILE = "special_tokens_map.json"
_SENTINEL = re.compile(r"<extra_id_(\d+)>")
#: The most bytes a tokenizer file may have (the largest public tokenizer.json files are about
#: 35 MB, mT5's spiece.model 4 MB), checked before it is read.
_MAX_FILE_BYTES = 1 << 27
#: The most sentinels a folder's config may ask for (T5 has 100, ByT5 125): each is a special
#: token built in memory.
_MAX_EXTRA_IDS = 1 << 12


def sentinel_token(i: int) -> str:
    """The string of sentinel i: ``<extra_id_i>``."""
    return f"<extra_id_{i}>"


def _metaspace_decoder():
    return _decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True)


def _tokenizer_json(model_proto: bytes, extra_ids: int) -> "tokenizers.Tokenizer":
    """The ``tokenizers`` form of a SentencePiece unigram model with ``extra_ids`` sentinels
    appended, built as Hugging Face's ``T5Tokenizer`` builds it."""
    proto = _spm_pb2.ModelProto()
    proto.ParseFromString(model_proto)
    if proto.trainer_spec.model_type != _spm_pb2.TrainerSpec.UNIGRAM:
        raise value_error("model", "only SentencePiece unigram models can be written as tokenizer.json")
    vocab = [(p.piece, p.score) for p in proto.pieces]
    vocab += [(sentinel_token(i), 0.0) for i in range(extra_ids - 1, -1, -1)]
    tk = tokenizers.Tokenizer(_Unigram(vocab, unk_id=UNK_ID, byte_fallback=False))
    charsmap = proto.normalizer_spec.precompiled_charsmap
    if charsmap:
        tk.normalizer = _normalizers.Precompiled(charsmap)
    tk.pre_tokenizer = _pre_tokenizers.Sequence([
        _pre_tokenizers.WhitespaceSplit(),
        _pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)])
    tk.decoder = _metaspace_decoder()
    tk.post_processor = _processors.TemplateProcessing(single=["$A", EOS], pair=["$A", EOS, "$B", EOS],
                                                       special_tokens=[(EOS, EOS_ID)])
    tk.add_special_tokens([tokenizers.AddedToken(t, special=True, normalized=False)
                           for t in [PAD, EOS, UNK] + [sentinel_token(i) for i in range(extra_ids)]])
    return tk


class Tokenizer:
    """A T5 tokenizer (see the module's docstring for the conventions).

    Build it with :meth:`from_pretrained`, :func:`train_tokenizer`, :meth:`from_sentencepiece`
    (a ``spiece.model``'s bytes) or :meth:`from_tokenizers` (a ``tokenizers.Tokenizer``).
    ``backend`` says which library encodes: ``"sentencepiece"`` or ``"tokenizers"``.
    """

    def __init__(self, *, sentencepiece_model: bytes | None = None, tokenizer: "tokenizers.Tokenizer | None" = None,
                 extra_ids: int = 100, model_max_length: int | None = 512):
        if (sentencepiece_model is None) == (tokenizer is None):
            raise value_error("sentencepiece_model", "give exactly one of sentencepiece_model and tokenizer")
        if isinstance(extra_ids, bool) or not isinstance(extra_ids, (int, np.integer)):
            raise type_error("extra_ids", f"expected an int, got {type(extra_ids).__name__}")
        if extra_ids < 0:
            raise value_error("extra_ids", f"expected >= 0, got {extra_ids}")
        if model_max_length is not None and (not isinstance(model_max_length, (int, np.integer)) or model_max_length < 1):
            raise value_error("model_max_length", f"expected a positive int or None, got {model_max_length!r}")
        self.extra_ids = int(extra_ids)
        self.model_max_length = None if model_max_length is None else int(model_max_length)
        self._model_proto: bytes | None = None
        self._sp = None
        self._tk = None
        if sentencepiece_model is not None:
            if not isinstance(sentencepiece_model, (bytes, bytearray)):
                raise type_error("sentencepiece_model", f"expected bytes, got {type(sentencepiece_model).__name__}")
            self._model_proto = bytes(sentencepiece_model)
            sp = spm.SentencePieceProcessor()
            try:
                sp.LoadFromSerializedProto(self._model_proto)
            except (RuntimeError, OSError) as exc:
                raise value_error("sentencepiece_model", f"not a SentencePiece model ({exc})") from exc
            self._sp = sp
            self._base = sp.get_piece_size()
            self.vocab_size = self._base + self.extra_ids
            pieces = [sp.id_to_piece(i) for i in range(min(3, self._base))]
            if pieces != [PAD, EOS, UNK] or sp.unk_id() != UNK_ID:
                raise value_error("sentencepiece_model", f"expected pieces 0, 1, 2 = {[PAD, EOS, UNK]} (T5's "
                                                         f"pad, eos, unk), got {pieces}")
        else:
            if not isinstance(tokenizer, tokenizers.Tokenizer):
                raise type_error("tokenizer", f"expected a tokenizers.Tokenizer, got {type(tokenizer).__name__}")
            tk = tokenizers.Tokenizer.from_str(tokenizer.to_str())  # a private copy without truncation/padding
            tk.no_truncation()
            tk.no_padding()
            self._tk = tk
            self.vocab_size = tk.get_vocab_size(with_added_tokens=True)
            ids = [tk.token_to_id(t) for t in (PAD, EOS, UNK)]
            if ids != [PAD_ID, EOS_ID, UNK_ID]:
                raise value_error("tokenizer", f"expected {PAD}, {EOS}, {UNK} at ids 0, 1, 2, got {ids}")
            for i in range(self.extra_ids):
                if tk.token_to_id(sentinel_token(i)) != self.vocab_size - 1 - i:
                    raise value_error("tokenizer", f"expected {sentinel_token(i)} at id {self.vocab_size - 1 - i} "
                                                   f"(vocab_size - 1 - i), got {tk.token_to_id(sentinel_token(i))}")
            self._base = self.vocab_size - self.extra_ids
        if self._base <= UNK_ID:
            raise value_error("tokenizer", f"the vocabulary has only {self._base} pieces besides the sentinels")
        specials = [PAD, EOS, UNK] + [sentinel_token(i) for i in range(self.extra_ids)]
        self._special_pattern = re.compile("|".join(re.escape(s) for s in sorted(specials, key=len, reverse=True)))
        self._special_ids = {PAD: PAD_ID, EOS: EOS_ID, UNK: UNK_ID}
        self._special_ids.update({sentinel_token(i): self.sentinel_id(i) for i in range(self.extra_ids)})
        self._decoder = _metaspace_decoder()

    # ---------------------------------------------------------------------------- building
    @classmethod
    def from_sentencepiece(cls, model: bytes | str | os.PathLike, *, extra_ids: int = 100,
                           model_max_length: int | None = 512) -> "Tokenizer":
        """From a SentencePiece model (its bytes or a ``.model`` file)."""
        if isinstance(model, (str, os.PathLike)):
            model = _read_bytes(Path(model), "model")
        return cls(sentencepiece_model=model, extra_ids=extra_ids, model_max_length=model_max_length)

    @classmethod
    def from_tokenizers(cls, tokenizer: "tokenizers.Tokenizer", *, extra_ids: int | None = None,
                        model_max_length: int | None = 512) -> "Tokenizer":
        """From a ``tokenizers.Tokenizer`` with T5's special tokens; ``extra_ids`` defaults to the
        number of ``<extra_id_i>`` tokens it holds."""
        if extra_ids is None:
            extra_ids = _count_sentinels(tokenizer.get_vocab(with_added_tokens=True)) if isinstance(
                tokenizer, tokenizers.Tokenizer) else 0
        return cls(tokenizer=tokenizer, extra_ids=extra_ids, model_max_length=model_max_length)

    @classmethod
    def from_pretrained(cls, folder: str | os.PathLike, *, backend: str = "auto") -> "Tokenizer":
        """From a Hugging Face T5 tokenizer folder: ``tokenizer.json`` (``backend="tokenizers"``)
        or ``spiece.model`` (``"sentencepiece"``); ``"auto"`` prefers ``tokenizer.json``.
        ``extra_ids`` and ``model_max_length`` come from ``tokenizer_config.json`` (or
        ``special_tokens_map.json``'s sentinels) when present; otherwise ``tokenizer.json``'s
        sentinels, else 100."""
        if not isinstance(folder, (str, os.PathLike)):
            raise type_error("folder", f"expected a path, got {type(folder).__name__}")
        folder = Path(folder)
        if not folder.is_dir():
            exc = FileNotFoundError(f"argument 'folder': no such folder: {str(folder)!r}")
            exc.argument = "folder"
            raise exc
        if backend not in ("auto", "tokenizers", "sentencepiece"):
            raise value_error("backend", f"expected 'auto', 'tokenizers' or 'sentencepiece', got {backend!r}")
        has_json, has_spm = (folder / TOKENIZER_FILE).is_file(), (folder / SPIECE_FILE).is_file()
        use = backend
        if backend == "auto":
            if not (has_json or has_spm):
                exc = FileNotFoundError(f"argument 'folder': {str(folder)!r} has neither {TOKENIZER_FILE} nor "
                                        f"{SPIECE_FILE}")
                exc.argument = "folder"
                raise exc
            use = "tokenizers" if has_json else "sentencepiece"
        wanted = TOKENIZER_FILE if use == "tokenizers" else SPIECE_FILE
        if not (folder / wanted).is_file():
            exc = FileNotFoundError(f"argument 'folder': {str(folder)!r} has no {wanted} (backend={backend!r})")
            exc.argument = "folder"
            raise exc

        config = _read_json(folder / CONFIG_FILE)
        special_map = _read_json(folder / SPECIAL_TOKENS_FILE)
        for key, expected in (("pad_token", PAD), ("eos_token", EOS), ("unk_token", UNK)):
            for source, name in ((config, CONFIG_FILE), (special_map, SPECIAL_TOKENS_FILE)):
                value = source.get(key)
                value = value.get("content") if isinstance(value, dict) else value
                if value is not None and value != expected:
                    raise value_error("folder", f"{name}: {key} is {value!r}; a T5 tokenizer has {expected!r}")
        extra_ids = config.get("extra_ids")
        if extra_ids is None:
            source = CONFIG_FILE if config.get("additional_special_tokens") else SPECIAL_TOKENS_FILE
            listed = config.get("additional_special_tokens") or special_map.get("additional_special_tokens") or []
            if not isinstance(listed, list):
                raise value_error("folder", f"{str(folder / source)!r} is corrupt: additional_special_tokens is a "
                                            f"{type(listed).__name__}, not a list")
            listed = [t.get("content") if isinstance(t, dict) else t for t in listed]
            n = sum(1 for t in listed if isinstance(t, str) and _SENTINEL.fullmatch(t))
            extra_ids = n if n else None
        elif isinstance(extra_ids, bool) or not isinstance(extra_ids, int) or not 0 <= extra_ids <= _MAX_EXTRA_IDS:
            raise value_error("folder", f"{str(folder / CONFIG_FILE)!r}: extra_ids = {extra_ids!r} is not an int in "
                                        f"[0, {_MAX_EXTRA_IDS}]")
        max_length = config.get("model_max_length", 512)
        if not isinstance(max_length, int) or max_length < 1 or max_length > 10**9:  # HF writes 1e30 for "none"
            max_length = None
        path = folder / wanted
        try:  # what the file holds is checked by the constructor: name the file in its errors
            if use == "tokenizers":
                file_size(path, "folder", _MAX_FILE_BYTES)
                try:
                    tk = tokenizers.Tokenizer.from_file(str(path))
                except Exception as exc:  # tokenizers raises its own Exception type
                    raise value_error("folder", f"{str(path)!r} is not a tokenizers file ({exc})") from exc
                return cls.from_tokenizers(tk, extra_ids=extra_ids, model_max_length=max_length)
            model = _read_bytes(path, "folder")
            return cls(sentencepiece_model=model, extra_ids=100 if extra_ids is None else extra_ids,
                       model_max_length=max_length)
        except ArgumentError as exc:
            argument = getattr(exc, "argument", None)
            if argument == "folder":
                raise
            raise value_error("folder", f"{str(path)!r} is corrupt: {bare_message(exc)}") from exc

    def save_pretrained(self, folder: str | os.PathLike) -> Path:
        """Writes the folder (see the module's docstring) so that this class and
        ``transformers.AutoTokenizer.from_pretrained(folder)`` both load it with the same ids.
        Returns the folder."""
        if not isinstance(folder, (str, os.PathLike)):
            raise type_error("folder", f"expected a path, got {type(folder).__name__}")
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        if self._model_proto is not None:
            with atomic_path(folder / SPIECE_FILE) as tmp:
                tmp.write_bytes(self._model_proto)
            tk = _tokenizer_json(self._model_proto, self.extra_ids)
        else:
            tk = self._tk
        with atomic_path(folder / TOKENIZER_FILE) as tmp:
            tmp.write_text(tk.to_str(pretty=True), encoding="utf-8")
        sentinels = [sentinel_token(i) for i in range(self.extra_ids)]
        config = {"tokenizer_class": "T5Tokenizer", "extra_ids": self.extra_ids,
                  "model_max_length": self.model_max_length if self.model_max_length is not None else int(1e30),
                  "pad_token": PAD, "eos_token": EOS, "unk_token": UNK, "additional_special_tokens": sentinels,
                  "clean_up_tokenization_spaces": False}
        special = {"pad_token": PAD, "eos_token": EOS, "unk_token": UNK, "additional_special_tokens": sentinels}
        for name, obj in ((CONFIG_FILE, config), (SPECIAL_TOKENS_FILE, special)):
            with atomic_path(folder / name) as tmp:
                tmp.write_text(json.dumps(obj, indent=2) + "\n", encoding="utf-8")
        return folder

    # ------------------------------------------------------------------------------- ids
    @property
    def backend(self) -> str:
        return "sentencepiece" if self._sp is not None else "tokenizers"

    @property
    def pad_id(self) -> int:
        return PAD_ID

    @property
    def eos_id(self) -> int:
        return EOS_ID

    @property
    def unk_id(self) -> int:
        return UNK_ID

    def __len__(self) -> int:
        return self.vocab_size

    def __repr__(self) -> str:
        return f"Tokenizer(vocab_size={self.vocab_size}, extra_ids={self.extra_ids}, backend={self.backend!r})"

    def sentinel_id(self, i: int) -> int:
        """The id of ``<extra_id_i>``: ``vocab_size - 1 - i``."""
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
            raise type_error("i", f"expected an int, got {type(i).__name__}")
        if not 0 <= i < self.extra_ids:
            raise value_error("i", f"expected 0 <= i < extra_ids = {self.extra_ids}, got {i}")
        return self.vocab_size - 1 - int(i)

    def is_sentinel(self, token_id):
        """Whether an id (an int, or elementwise for a tensor) is a sentinel."""
        if isinstance(token_id, torch.Tensor):
            return (token_id >= self.vocab_size - self.extra_ids) & (token_id < self.vocab_size)
        return self.vocab_size - self.extra_ids <= int(token_id) < self.vocab_size

    def id_to_token(self, token_id: int) -> str:
        """The piece (``▁the``) or special token of an id."""
        token_id = int(token_id)
        if not 0 <= token_id < self.vocab_size:
            raise value_error("token_id", f"expected 0 <= id < {self.vocab_size}, got {token_id}")
        if self._tk is not None:
            return self._tk.id_to_token(token_id)
        if token_id >= self._base:
            return sentinel_token(self.vocab_size - 1 - token_id)
        return self._sp.id_to_piece(token_id)

    def tokens(self, text: str) -> list[str]:
        """The pieces of ``text`` (no eos)."""
        return [self.id_to_token(i) for i in self.encode_one(text, add_eos=False)]

    # -------------------------------------------------------------------------- encoding
    def _split(self, text: str) -> list[str | int]:
        """``text`` cut into plain segments (str) and special tokens (their ids), in order."""
        out: list[str | int] = []
        pos = 0
        for m in self._special_pattern.finditer(text):
            if m.start() > pos:
                out.append(text[pos:m.start()])
            out.append(self._special_ids[m.group()])
            pos = m.end()
        if pos < len(text):
            out.append(text[pos:])
        return out

    def _encode_raw(self, texts: list[str]) -> list[list[int]]:
        if self._tk is not None:
            return [e.ids for e in self._tk.encode_batch(texts, add_special_tokens=False)]
        parts = [self._split(t) for t in texts]
        segments = [p for ps in parts for p in ps if isinstance(p, str)]
        encoded = iter(self._sp.encode(segments) if segments else [])
        out = []
        for ps in parts:
            ids: list[int] = []
            for p in ps:
                if isinstance(p, str):
                    ids.extend(next(encoded))
                else:
                    ids.append(p)
            out.append(ids)
        return out

    def encode_one(self, text: str, *, add_eos: bool = True, max_length: int | None = None) -> list[int]:
        """The ids of one text (with a final eos unless ``add_eos=False``; truncated to
        ``max_length`` ids, the eos included)."""
        if not isinstance(text, str):
            raise type_error("text", f"expected str, got {type(text).__name__}")
        return self._finish(self._encode_raw([text])[0], add_eos, _check_max_length(max_length))

    @staticmethod
    def _finish(ids: list[int], add_eos: bool, max_length: int | None) -> list[int]:
        if max_length is not None:
            ids = ids[:max_length - 1] if add_eos else ids[:max_length]
        return ids + [EOS_ID] if add_eos else ids

    def encode(self, texts: Sequence[str], *, max_length: int | None = None, add_eos: bool = True,
               padding: bool | str = True) -> tuple[torch.Tensor, torch.Tensor]:
        """Ids and attention mask of a batch: ``(ids, mask)``, int64 [N, L] each.

        Each text becomes its pieces and, unless ``add_eos=False``, eos (1). ``max_length``
        truncates to that many ids, keeping the eos (the text is cut, as Hugging Face's
        ``truncation=True`` does). ``padding``: ``True``/``"longest"`` pads on the right with
        pad (0) to the longest row (L = that length); ``"max_length"`` pads to ``max_length``;
        ``False`` requires rows of equal length. ``mask`` is 1 on real ids (eos included), 0 on
        padding."""
        if isinstance(texts, str) or not isinstance(texts, (list, tuple)):
            raise type_error("texts", f"expected a list of str, got {type(texts).__name__}")
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise type_error("texts", f"item {i}: expected str, got {type(t).__name__}")
        max_length = _check_max_length(max_length)
        if padding not in (True, False, "longest", "max_length"):
            raise value_error("padding", f"expected True, False, 'longest' or 'max_length', got {padding!r}")
        if padding == "max_length" and max_length is None:
            raise value_error("padding", "'max_length' padding needs max_length")
        rows = [self._finish(ids, add_eos, max_length) for ids in self._encode_raw(list(texts))]
        if not rows:
            return torch.zeros(0, 0, dtype=torch.long), torch.zeros(0, 0, dtype=torch.long)
        longest = max(len(r) for r in rows)
        if padding is False:
            if any(len(r) != longest for r in rows):
                raise value_error("padding", "the rows have different lengths; use padding=True")
        width = max_length if padding == "max_length" else longest
        ids = torch.full((len(rows), width), PAD_ID, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):
            if r:
                ids[i, :len(r)] = torch.tensor(r, dtype=torch.long)
                mask[i, :len(r)] = 1
        return ids, mask

    __call__ = encode

    # -------------------------------------------------------------------------- decoding
    def decode(self, ids, *, skip_special_tokens: bool = True, stop_at_eos: bool = True) -> list[str]:
        """Texts of id sequences: a tensor [N, L] or [L], or a list of lists (or one list) of ints.

        ``stop_at_eos``: everything from a sequence's first eos on is ignored (padding after it,
        anything generated after it). ``skip_special_tokens``: pad, eos, unk and the sentinels
        are dropped (as in Hugging Face's decode); otherwise they are written as ``<pad>``,
        ``</s>``, ``<unk>``, ``<extra_id_i>``. Always returns a list of strings."""
        rows = _as_rows(ids)
        out = []
        for row in rows:
            if any(not 0 <= t < self.vocab_size for t in row):
                bad = next(t for t in row if not 0 <= t < self.vocab_size)
                raise value_error("ids", f"id {bad} outside the vocabulary [0, {self.vocab_size})")
            if stop_at_eos and EOS_ID in row:
                row = row[:row.index(EOS_ID)]
            if self._tk is not None:
                out.append(self._tk.decode(row, skip_special_tokens=skip_special_tokens))
                continue
            if skip_special_tokens:
                row = [t for t in row if t > UNK_ID and t < self._base]
            out.append(self._decoder.decode([self.id_to_token(t) for t in row]))
        return out


# -------------------------------------------------------------------------------- training
def train_tokenizer(sentences: Iterable[str], *, folder: str | os.PathLike, vocab_size: int = 1000,
                    extra_ids: int = 100, seed: int = 0, max_sentences: int | None = None,
                    character_coverage: float = 1.0, model_max_length: int | None = 512) -> Tokenizer:
    """Trains a SentencePiece **unigram** model on ``sentences`` (from memory; one thread, so the
    same sentences and settings give a byte-identical ``spiece.model``), writes the folder with
    :meth:`Tokenizer.save_pretrained` and returns ``Tokenizer.from_pretrained(folder)``.

    ``vocab_size`` is the **total** vocabulary, sentinels included: the SentencePiece model has
    ``vocab_size - extra_ids`` pieces (``<pad>`` 0, ``</s>`` 1, ``<unk>`` 2, no BOS), then the
    ``extra_ids`` sentinels. ``max_sentences``: train on a random subset of that many sentences,
    drawn with ``numpy.random.PCG64(seed)`` (the seed has no other use: the trainer itself is
    deterministic). ``character_coverage`` (SentencePiece's): 1.0 keeps every character of the
    training text. Normalisation is SentencePiece's default ``nmt_nfkc`` (T5's).

    Measured on 2 CPU cores: 2,000 built-in short sentences, ``vocab_size=700``: 0.2 s; 20,000
    sentences or 5,000 documents, ``vocab_size=1000``: 1.6–1.9 s (every word of the grammar is
    then one piece). The 20,000 short sentences allow at most ``vocab_size=1026`` (926 pieces);
    a larger one is refused with that bound. (With two threads SentencePiece writes a different
    model than with one, hence one thread.)"""
    if isinstance(sentences, str):
        raise type_error("sentences", "expected an iterable of str, got a single str")
    try:
        sentences = list(sentences)
    except TypeError as exc:
        raise type_error("sentences", f"expected an iterable of str, got {type(sentences).__name__}") from exc
    for i, s in enumerate(sentences):
        if not isinstance(s, str):
            raise type_error("sentences", f"item {i}: expected str, got {type(s).__name__}")
    sentences = [s for s in sentences if s.strip()]
    if not sentences:
        raise value_error("sentences", "no non-blank sentence to train on")
    for name, value in (("vocab_size", vocab_size), ("extra_ids", extra_ids), ("seed", seed)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise type_error(name, f"expected an int, got {type(value).__name__}")
    if extra_ids < 0:
        raise value_error("extra_ids", f"expected >= 0, got {extra_ids}")
    if seed < 0:
        raise value_error("seed", f"expected >= 0, got {seed}")
    pieces = int(vocab_size) - int(extra_ids)
    if pieces < 4:
        raise value_error("vocab_size", f"expected > extra_ids + 3 = {extra_ids + 3} (pad, eos, unk and at least "
                                        f"one piece), got {vocab_size}")
    if not 0.0 < float(character_coverage) <= 1.0:
        raise value_error("character_coverage", f"expected a value in (0, 1], got {character_coverage}")
    if max_sentences is not None:
        if isinstance(max_sentences, bool) or not isinstance(max_sentences, (int, np.integer)) or max_sentences < 1:
            raise value_error("max_sentences", f"expected a positive int or None, got {max_sentences!r}")
        if max_sentences < len(sentences):
            rng = np.random.Generator(np.random.PCG64(int(seed)))
            keep = np.sort(rng.choice(len(sentences), size=int(max_sentences), replace=False))
            sentences = [sentences[i] for i in keep.tolist()]
    if not isinstance(folder, (str, os.PathLike)):
        raise type_error("folder", f"expected a path, got {type(folder).__name__}")

    import io
    writer = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(sentences), model_writer=writer, model_type="unigram", vocab_size=pieces,
            pad_id=PAD_ID, eos_id=EOS_ID, unk_id=UNK_ID, bos_id=-1, pad_piece=PAD, eos_piece=EOS, unk_piece=UNK,
            character_coverage=float(character_coverage), num_threads=1, max_sentence_length=1 << 20,
            input_sentence_size=0, shuffle_input_sentence=False, byte_fallback=False,
            normalization_rule_name="nmt_nfkc", minloglevel=2)
    except RuntimeError as exc:
        message = str(exc)
        m = re.search(r"Please set it to a value <= (\d+)", message)
        if m:
            raise value_error("vocab_size", f"too large for these sentences: at most {int(m.group(1)) + extra_ids} "
                                            f"(= {m.group(1)} pieces + {extra_ids} sentinels), got {vocab_size}") from exc
        raise value_error("vocab_size", f"SentencePiece could not train a {pieces}-piece model: {message}") from exc
    tok = Tokenizer(sentencepiece_model=writer.getvalue(), extra_ids=extra_ids, model_max_length=model_max_length)
    tok.save_pretrained(folder)
    return Tokenizer.from_pretrained(folder)


# --------------------------------------------------------------------------------- helpers
def _check_max_length(max_length) -> int | None:
    if max_length is None:
        return None
    if isinstance(max_length, bool) or not isinstance(max_length, (int, np.integer)):
        raise type_error("max_length", f"expected an int or None, got {type(max_length).__name__}")
    if max_length < 1:
        raise value_error("max_length", f"expected >= 1, got {max_length}")
    return int(max_length)


def _as_rows(ids) -> list[list[int]]:
    if isinstance(ids, torch.Tensor):
        if ids.dim() not in (1, 2) or ids.dtype.is_floating_point or ids.dtype == torch.bool:
            raise type_error("ids", f"expected an integer tensor [N, L] or [L], got {ids.dtype} {list(ids.shape)}")
        return [ids.tolist()] if ids.dim() == 1 else ids.tolist()
    if isinstance(ids, np.ndarray):
        return _as_rows(torch.from_numpy(ids))
    if not isinstance(ids, (list, tuple)):
        raise type_error("ids", f"expected a tensor or a list of lists of ints, got {type(ids).__name__}")
    if all(isinstance(t, (int, np.integer)) and not isinstance(t, bool) for t in ids):
        return [[int(t) for t in ids]]
    rows = []
    for r in ids:
        if isinstance(r, torch.Tensor):
            r = r.tolist()
        if not isinstance(r, (list, tuple)) or not all(isinstance(t, (int, np.integer)) and not isinstance(t, bool)
                                                       for t in r):
            raise type_error("ids", "expected a list of lists of ints")
        rows.append([int(t) for t in r])
    return rows


def _count_sentinels(vocab: dict[str, int]) -> int:
    n = 0
    while sentinel_token(n) in vocab:
        n += 1
    return n


def _read_json(path: Path) -> dict:
    """A folder's JSON object file (its size checked before it is parsed); ``{}`` when absent."""
    if not path.is_file():
        return {}
    return read_json(path, "folder", expect=dict, limit=_MAX_FILE_BYTES)


def _read_bytes(path: Path, argument: str) -> bytes:
    if not path.is_file():
        exc = FileNotFoundError(f"argument '{argument}': no such file: {str(path)!r}")
        exc.argument = argument
        raise exc
    return read_bounded(path, argument, _MAX_FILE_BYTES)
