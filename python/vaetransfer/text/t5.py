"""T5 in the C++ core, with Hugging Face folders in and out.

The model is numerically Hugging Face's ``T5ForConditionalGeneration`` (RMS norm, unscaled
attention with a relative position bias held by the first block of each stack, ReLU or gated-GELU
feed-forward, tied output embedding scaled by d_model^-0.5 or an untied ``lm_head``), with the same
parameter names, so a Hugging Face folder (``config.json`` + ``model.safetensors`` or
``pytorch_model.bin``) loads as it is and :meth:`T5.save_pretrained` writes a folder that
``transformers.T5ForConditionalGeneration.from_pretrained`` loads. It is the model "Finetuning
Pretrained Transformers into Variational Autoencoders" (Park & Lee, 2021) starts from (§3).

Layers (for :meth:`T5.activations` and the similarity measures): ``encoder.embeddings``,
``encoder.block.<i>``, ``encoder.final_layer_norm``, ``decoder.embeddings``,
``decoder.block.<i>``, ``decoder.final_layer_norm``, ``logits``.
"""
from __future__ import annotations

import json
import math
import os
import re
from collections import OrderedDict
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Sequence

import torch

from .._checks import check_flag, check_int, check_number, check_seed, type_error, value_error
from ..io import atomic_path, inside, read_json
from ..nn import Model, ModelConfig

__all__ = ["T5Config", "T5", "pad_pair"]

# Tensors Hugging Face keeps beside ours: copies of `shared` (tied) and a table its code never uses.
_TIED_COPIES = ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight")
_UNUSED = ("decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.weight",)
_MAX_JSON_BYTES = 1 << 26  # config.json is a few KB; an index of 100,000 tensors about 10 MB
#: The sane range of each config value that sizes a tensor, checked before a model is built from a
#: file's config.json (the largest public T5s: 24 layers, d_model 4096, d_ff 65536 (t5-11b), 128
#: heads of d_kv 128, a vocabulary of 250,112 (mT5)).
SIZE_RANGES = {"vocab_size": (1, 1 << 22), "d_model": (1, 1 << 16), "d_kv": (1, 1 << 12), "d_ff": (1, 1 << 18),
               "num_layers": (1, 1024), "num_decoder_layers": (1, 1024), "num_heads": (1, 1024),
               "relative_attention_num_buckets": (1, 1 << 12), "relative_attention_max_distance": (1, 1 << 20)}


@dataclass
class T5Config:
    """A T5's shape, with the names (and meanings) of Hugging Face's ``config.json``.

    ``tie_word_embeddings``: the output projection is the shared embedding (T5 v1.0) or an own
    ``lm_head`` (v1.1). ``scale_decoder_outputs`` (default: as ``tie_word_embeddings``): the
    decoder output is multiplied by d_model^-0.5 before the projection.
    """

    vocab_size: int = 32128
    d_model: int = 512
    d_kv: int = 64
    d_ff: int = 2048
    num_layers: int = 6
    num_decoder_layers: int | None = None
    num_heads: int = 8
    relative_attention_num_buckets: int = 32
    relative_attention_max_distance: int = 128
    dropout_rate: float = 0.1
    layer_norm_epsilon: float = 1e-6
    initializer_factor: float = 1.0
    feed_forward_proj: str = "relu"
    tie_word_embeddings: bool = True
    scale_decoder_outputs: bool | None = None
    pad_token_id: int = 0
    eos_token_id: int = 1
    decoder_start_token_id: int = 0

    def model_config(self) -> ModelConfig:
        options = {k: v for k, v in asdict(self).items() if v is not None}
        options["num_decoder_layers"] = self.num_decoder_layers or 0
        return ModelConfig("t5", **options)

    @classmethod
    def from_hf(cls, d: dict, *, argument: str = "config", source: str | os.PathLike | None = None) -> "T5Config":
        """From a Hugging Face ``config.json`` dict (keys this model does not use are ignored).
        Values of the wrong type, or sizes outside :data:`SIZE_RANGES`, are an ArgumentError naming
        ``argument`` (and ``source``, the file the dict came from)."""
        where = f"{str(source)!r}: " if source is not None else ""
        if d.get("model_type", "t5") not in ("t5", "mt5"):  # mT5 is the T5 v1.1 layout
            raise value_error(argument, f"{where}expected a T5 config (model_type 't5' or 'mt5'), got model_type "
                                        f"{d.get('model_type')!r}")
        ff = d.get("feed_forward_proj", "relu")
        if ff not in ("relu", "gated-gelu"):
            raise value_error(argument, f"{where}feed_forward_proj {ff!r} is not supported; expected 'relu' or "
                                        "'gated-gelu'")
        known = {f.name for f in fields(cls)}
        out = cls(**{k: v for k, v in d.items() if k in known and v is not None})
        eos = d.get("eos_token_id", 1)
        if isinstance(eos, list) and eos:  # some configs list several; the first ends generation
            out.eos_token_id = eos[0]
        if out.num_decoder_layers is None:
            out.num_decoder_layers = out.num_layers
        out._check(argument, where)
        return out

    def _check(self, argument: str, where: str) -> None:
        """Types, and sizes within :data:`SIZE_RANGES`: checked before anything is built from them
        (a config of a file may ask for any size)."""
        def is_int(v):
            return isinstance(v, int) and not isinstance(v, bool)

        for name, (low, high) in SIZE_RANGES.items():
            v = getattr(self, name)
            if not is_int(v) or not low <= v <= high:
                raise value_error(argument, f"{where}{name} = {v!r} is not an int in the sane range [{low}, {high}]")
        for name in ("pad_token_id", "eos_token_id", "decoder_start_token_id"):
            v = getattr(self, name)
            if not is_int(v) or not 0 <= v < self.vocab_size:
                raise value_error(argument, f"{where}{name} = {v!r} is not a token id in [0, {self.vocab_size})")
        for name in ("dropout_rate", "layer_norm_epsilon", "initializer_factor"):
            v = getattr(self, name)
            if not (is_int(v) or isinstance(v, float)) or not math.isfinite(v) or v < 0:
                raise value_error(argument, f"{where}{name} = {v!r} is not a finite number >= 0")
        for name in ("tie_word_embeddings", "scale_decoder_outputs"):
            v = getattr(self, name)
            if not (isinstance(v, bool) or (v is None and name == "scale_decoder_outputs")):
                raise value_error(argument, f"{where}{name} = {v!r} is not true or false")

    def parameter_shapes(self) -> dict[str, tuple[int, ...]]:
        """The shape of every parameter this config implies, by Hugging Face's names, computed
        without building the model."""
        v, d, inner, ff, h = self.vocab_size, self.d_model, self.num_heads * self.d_kv, self.d_ff, self.num_heads
        dense = ["wi_0", "wi_1"] if self.feed_forward_proj == "gated-gelu" else ["wi"]
        shapes = {"shared.weight": (v, d)}
        for stack, n in (("encoder", self.num_layers), ("decoder", self.num_decoder_layers or self.num_layers)):
            sublayers = ["SelfAttention"] + (["EncDecAttention"] if stack == "decoder" else [])
            for i in range(n):
                block = f"{stack}.block.{i}.layer"
                for j, attention in enumerate(sublayers):
                    shapes.update({f"{block}.{j}.{attention}.{m}.weight": (inner, d) for m in "qkv"})
                    shapes[f"{block}.{j}.{attention}.o.weight"] = (d, inner)
                    if i == 0 and attention == "SelfAttention":
                        shapes[f"{block}.{j}.{attention}.relative_attention_bias.weight"] = (
                            self.relative_attention_num_buckets, h)
                    shapes[f"{block}.{j}.layer_norm.weight"] = (d,)
                j = len(sublayers)
                shapes.update({f"{block}.{j}.DenseReluDense.{w}.weight": (ff, d) for w in dense})
                shapes[f"{block}.{j}.DenseReluDense.wo.weight"] = (d, ff)
                shapes[f"{block}.{j}.layer_norm.weight"] = (d,)
            shapes[f"{stack}.final_layer_norm.weight"] = (d,)
        if not self.tie_word_embeddings:
            shapes["lm_head.weight"] = (v, d)
        return shapes

    def to_hf(self) -> dict:
        """The ``config.json`` dict Hugging Face reads."""
        d = asdict(self)
        d["num_decoder_layers"] = self.num_decoder_layers or self.num_layers
        if d["scale_decoder_outputs"] is None:
            d["scale_decoder_outputs"] = self.tie_word_embeddings
        gated = self.feed_forward_proj == "gated-gelu"
        d.update(architectures=["T5ForConditionalGeneration"], model_type="t5", is_encoder_decoder=True,
                 dense_act_fn="gelu_new" if gated else "relu", is_gated_act=gated, use_cache=True)
        return dict(sorted(d.items()))


def pad_pair(input_ids: torch.Tensor, decoder_input_ids: torch.Tensor, pad_id: int = 0) -> torch.Tensor:
    """Encoder and decoder ids as the pair [N, 2, L] the generic model interface takes (the shorter
    one padded with ``pad_id``: encoder padding is masked, decoder padding is after the real
    tokens, which a causal decoder never lets influence them)."""
    if input_ids.dim() != 2 or decoder_input_ids.dim() != 2 or input_ids.shape[0] != decoder_input_ids.shape[0]:
        raise value_error("input_ids", f"expected [N, S] and [N, T] ids, got {tuple(input_ids.shape)} and "
                                       f"{tuple(decoder_input_ids.shape)}")
    length = max(input_ids.shape[1], decoder_input_ids.shape[1])
    pad = lambda t: torch.nn.functional.pad(t.long(), (0, length - t.shape[1]), value=pad_id)  # noqa: E731
    return torch.stack([pad(input_ids), pad(decoder_input_ids)], 1)


def _ids(t, name: str) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise type_error(name, f"expected a tensor of token ids, got {type(t).__name__}")
    return t


def check_temperature(temperature, sampling: bool) -> float:
    """A sampling temperature: > 0 when sampling; greedy decoding ignores it (any finite number >= 0)."""
    return check_number(temperature, "temperature", minimum=0.0, exclusive=sampling)


class T5(Model):
    """A T5 encoder-decoder of the C++ core. Token ids are int64 [B, L]; ``attention_mask`` is 1
    on tokens and 0 on padding (None: no padding)."""

    _family = "t5"

    def __init__(self, config: T5Config | ModelConfig | None = None, seed: int = 0, device: str = "cpu"):
        config = T5Config() if config is None else config
        if isinstance(config, T5Config):
            config = config.model_config()
        super().__init__(config, seed, device)
        self.tokenizer = None

    @classmethod
    def _wrap(cls, impl, config: ModelConfig) -> "T5":
        m = super()._wrap(impl, config)
        m.tokenizer = None
        return m

    # -- shape
    @property
    def t5_config(self) -> T5Config:
        return T5Config(**self._impl.config)

    @property
    def pad_id(self) -> int:
        return self._impl.config["pad_token_id"]

    @property
    def eos_id(self) -> int:
        return self._impl.config["eos_token_id"]

    # -- computation
    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Encoder states [B, S, d_model] (after the final norm)."""
        return self._impl.encode(_ids(input_ids, "input_ids"), attention_mask)

    def decode(self, decoder_input_ids: torch.Tensor, memory: torch.Tensor,
               memory_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Logits [B, T, vocab] of the decoder on ``decoder_input_ids``, attending to ``memory``."""
        return self._impl.decode(_ids(decoder_input_ids, "decoder_input_ids"), memory, memory_mask)

    def shift_right(self, labels: torch.Tensor) -> torch.Tensor:
        """Decoder inputs from labels: start token first, shifted right, -100 → pad."""
        return self._impl.shift_right(_ids(labels, "labels"))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                decoder_input_ids: torch.Tensor | None = None, labels: torch.Tensor | None = None) -> torch.Tensor:
        """Logits [B, T, vocab]; the decoder inputs are ``decoder_input_ids`` or the shifted labels."""
        if decoder_input_ids is None:
            if labels is None:
                raise value_error("decoder_input_ids", "give decoder_input_ids or labels")
            decoder_input_ids = self.shift_right(labels)
        return self._impl.forward(_ids(input_ids, "input_ids"), attention_mask, _ids(decoder_input_ids, "decoder_input_ids"))

    __call__ = forward

    def loss(self, input_ids: torch.Tensor, labels: torch.Tensor, attention_mask: torch.Tensor | None = None, *,
             reduction: str = "token_mean") -> torch.Tensor:
        """Cross-entropy of ``labels`` [B, T] (-100 ignored) given the inputs, teacher-forced:
        ``"token_mean"`` is Hugging Face's loss, ``"sequence_sum"`` the per-sentence sum averaged
        over the batch."""
        loss, _, _, _ = self._impl.loss(_ids(input_ids, "input_ids"), attention_mask, _ids(labels, "labels"), reduction)
        return loss

    def generate(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, *,
                 max_new_tokens: int = 20, do_sample: bool = False, temperature: float = 1.0, top_k: int = 0,
                 seed: int = 0) -> torch.Tensor:
        """Token ids [B, 1 + n] decoded with a key/value cache: the start token, then greedy
        (argmax) or sampled tokens (softmax(logits / temperature), optionally over the ``top_k``
        most likely, from ``seed``); after eos a sequence is padded, and decoding stops when every
        sequence has produced eos or after ``max_new_tokens``."""
        sample = check_flag(do_sample, "do_sample")
        return self._impl.generate(_ids(input_ids, "input_ids"), attention_mask,
                                   check_int(max_new_tokens, "max_new_tokens", 1), sample,
                                   check_temperature(temperature, sample), check_int(top_k, "top_k", 0), check_seed(seed))

    def pooled_activations(self, input_ids: torch.Tensor, decoder_input_ids: torch.Tensor | None = None,
                           layers: Sequence[str] | str | None = None, *, chunk_size: int = 256
                           ) -> "OrderedDict[str, torch.Tensor]":
        """One vector per sentence and layer: each layer's token states averaged over the real
        tokens ([N, d]; ``logits`` [N, vocab]). Encoder layers average over non-pad input tokens;
        decoder layers over the decoder positions up to the last non-pad one (the start token
        included). ``decoder_input_ids`` defaults to the input shifted right (a reconstruction)."""
        input_ids = _ids(input_ids, "input_ids").long()
        if decoder_input_ids is None:
            decoder_input_ids = self.shift_right(input_ids.masked_fill(input_ids.eq(self.pad_id), -100))
        pair = pad_pair(input_ids, decoder_input_ids, self.pad_id)
        acts = self.activations(pair, layers, chunk_size=chunk_size, flatten=False)
        enc_mask = pair[:, 0].ne(self.pad_id)
        real = pair[:, 1].ne(self.pad_id)
        real[:, 0] = True
        last = torch.where(real, torch.arange(real.shape[1]).expand_as(real), 0).amax(1, keepdim=True)
        dec_mask = torch.arange(real.shape[1]).unsqueeze(0) <= last
        out = OrderedDict()
        for name, a in acts.items():
            if a.dim() == 2:  # one vector per sentence already (a T5-VAE's latent layers)
                out[name] = a
                continue
            mask = (enc_mask if name.startswith("encoder.") else dec_mask).to(a.dtype).unsqueeze(-1)
            out[name] = (a * mask).sum(1) / mask.sum(1).clamp_min(1)
        return out

    # -- Hugging Face folders
    @classmethod
    def from_pretrained(cls, folder: str | os.PathLike, *, device: str = "cpu", dtype: torch.dtype | None = None,
                        load_tokenizer: bool = True) -> "T5":
        """The T5 of a Hugging Face folder: ``config.json`` and ``model.safetensors`` (sharded
        ``model.safetensors.index.json``) or ``pytorch_model.bin``; its tokenizer
        (:class:`vaetransfer.text.Tokenizer`) when the folder has one. Parameters come in the
        model's dtype (float32 unless ``dtype``). Nothing is built before the config's sizes are
        within :data:`SIZE_RANGES` and the checkpoint's tensor names and shapes (read from its
        headers) are those the config implies: a missing, unexpected or misshapen tensor, a corrupt
        ``config.json`` or index, or an index naming a file outside the folder is an
        ``ArgumentError`` (a ``ValueError``) naming ``folder`` and the file or tensor."""
        if not isinstance(folder, (str, os.PathLike)):
            raise type_error("folder", f"expected a folder path, got {type(folder).__name__} {folder!r}")
        folder = Path(folder)
        if not folder.is_dir():  # a missing file is a FileNotFoundError naming it, as everywhere in text/
            raise FileNotFoundError(f"folder: no such directory {str(folder)!r}")
        config_path = folder / "config.json"
        if not config_path.is_file():
            raise FileNotFoundError(f"folder: {str(folder)!r} has no config.json")
        config = T5Config.from_hf(_read_json(config_path), argument="folder", source=config_path)
        # The checkpoint's names and shapes (its headers; no tensor read yet) must be exactly those
        # the config implies before anything is built: the model then costs what the file holds.
        shapes, load = _open_checkpoint(folder)
        for stack, key in (("encoder", "num_layers"), ("decoder", "num_decoder_layers")):
            block_norm = re.compile(rf"{stack}\.block\.\d+\.layer\.0\.layer_norm\.weight")
            blocks = sum(1 for name in shapes if block_norm.fullmatch(name))
            if blocks != getattr(config, key):  # the usual mismatch, said plainly before the tensors it leaves
                raise value_error("folder", f"{folder}: config.json has {key} = {getattr(config, key)}, the checkpoint "
                                            f"{blocks} {stack} blocks")
        optional = {name: (config.vocab_size, config.d_model) for name in (*_TIED_COPIES, "lm_head.weight")}
        optional.update({name: (config.relative_attention_num_buckets, config.num_heads) for name in _UNUSED})
        _check_fits(folder, shapes, config.parameter_shapes(), optional)
        state = load()
        for name, t in state.items():
            if not t.is_floating_point():
                raise value_error("folder", f"{folder}: tensor '{name}' has dtype {t.dtype}, expected floating point")
        shared = state["shared.weight"]
        for name in _TIED_COPIES:
            copy = state.pop(name, None)
            if copy is not None and not torch.equal(copy, shared):
                raise value_error("folder", f"{folder}: '{name}' differs from 'shared.weight'; separate input "
                                            "embeddings are not supported")
        for name in _UNUSED:
            state.pop(name, None)
        lm_head = state.get("lm_head.weight")
        if config.tie_word_embeddings:
            if lm_head is not None and not torch.equal(lm_head, shared):
                # An own output matrix under a tying config: keep it (as Hugging Face does) but
                # keep the config's scaling.
                if config.scale_decoder_outputs is None:
                    config.scale_decoder_outputs = True
                config.tie_word_embeddings = False
            else:
                state.pop("lm_head.weight", None)
        model = cls(config, seed=0, device="cpu")
        # parameter_shapes against the core's own model: the same names and shapes, or a bug here.
        _check_fits(folder, {k: tuple(t.shape) for k, t in state.items()},
                    {k: tuple(t.shape) for k, t in model.named_parameters().items()})
        model.load_state_dict({k: v.to(torch.float32) for k, v in state.items()})
        if dtype is not None:
            model.to_dtype(dtype)
        if str(device) != "cpu":
            model.to(device)
        if load_tokenizer and ((folder / "tokenizer.json").is_file() or (folder / "spiece.model").is_file()):
            from .tokenizer import Tokenizer

            model.tokenizer = Tokenizer.from_pretrained(folder)
        return model

    def to_dtype(self, dtype: torch.dtype) -> "T5":
        """Casts parameters (float64 for exact comparisons)."""
        self._impl.to_dtype(dtype)
        return self

    def save_pretrained(self, folder: str | os.PathLike, *, tokenizer=None) -> Path:
        """Writes ``config.json`` and ``model.safetensors`` (float32, each tensor once; files
        written atomically) and the tokenizer (``tokenizer`` or the model's own), as Hugging Face
        lays a folder out."""
        from safetensors.torch import save_file

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        config = self.t5_config
        with atomic_path(folder / "config.json") as tmp:
            tmp.write_text(json.dumps(config.to_hf(), indent=2) + "\n")
        state = {k: v.detach().to("cpu", torch.float32).contiguous() for k, v in self.named_parameters().items()}
        with atomic_path(folder / "model.safetensors") as tmp:
            save_file(state, str(tmp), metadata={"format": "pt"})
        tokenizer = tokenizer if tokenizer is not None else self.tokenizer
        if tokenizer is not None:
            tokenizer.save_pretrained(folder)
        return folder


def _read_json(path: Path) -> dict:
    """The JSON object of a folder's file (its size checked before it is parsed)."""
    return read_json(path, "folder", expect=dict, limit=_MAX_JSON_BYTES)


def _names(names, limit: int = 10) -> str:
    """At most ``limit`` names of a sorted list, then how many more (a message stays short)."""
    names = sorted(names)
    return str(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _check_fits(folder: Path, have: dict[str, tuple], want: dict[str, tuple],
                optional: dict[str, tuple] | None = None) -> None:
    """Tensor shapes ``have`` (a checkpoint's) against ``want`` (the config's) and the ``optional``
    extras a Hugging Face folder may carry: a missing, unexpected or misshapen tensor is an
    ArgumentError naming it."""
    optional = optional or {}
    missing = set(want) - set(have)
    unexpected = set(have) - set(want) - set(optional)
    if missing or unexpected:
        raise value_error("folder", f"{folder}: the checkpoint does not fit its config.json"
                                    + (f"; missing tensors: {_names(missing)}" if missing else "")
                                    + (f"; unexpected tensors: {_names(unexpected)}" if unexpected else ""))
    for name in sorted(have):
        expected = want.get(name, optional.get(name))
        if tuple(have[name]) != tuple(expected):
            raise value_error("folder", f"{folder}: tensor '{name}' has shape {tuple(have[name])}, config.json "
                                        f"implies {tuple(expected)}")


def _safetensors_files(folder: Path, index: Path) -> dict[Path, set[str]]:
    """The shards of a sharded checkpoint (each inside ``folder``) with the tensors the index
    assigns to each."""
    weight_map = _read_json(index).get("weight_map")
    if not isinstance(weight_map, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                   for k, v in weight_map.items()):
        raise value_error("folder", f"{str(index)!r} is corrupt: expected 'weight_map', an object of tensor names to "
                                    f"file names, got {json.dumps(weight_map)[:60]}")
    files: dict[Path, set[str]] = {}
    for tensor, name in weight_map.items():
        files.setdefault(Path(inside(folder, name, "folder", index)), set()).add(tensor)
    return files


def _open_checkpoint(folder: Path):
    """``(shapes, load)`` of a Hugging Face folder's checkpoint: the tensors' shapes by name, read
    from the files' headers without their data, and a function that reads the tensors."""
    from safetensors import SafetensorError, safe_open
    from safetensors.torch import load_file

    single, index, bin_path = folder / "model.safetensors", folder / "model.safetensors.index.json", folder / "pytorch_model.bin"
    if single.is_file():
        files = {single: None}
    elif index.is_file():
        files = _safetensors_files(folder, index)
    elif bin_path.is_file():
        return _open_bin(bin_path)
    else:
        raise FileNotFoundError(f"folder: {str(folder)!r} has no model.safetensors, model.safetensors.index.json "
                                "or pytorch_model.bin")
    shapes: dict[str, tuple[int, ...]] = {}
    for f, listed in files.items():
        if not f.is_file():
            raise FileNotFoundError(f"folder: the index names {f.name}, which is missing")
        try:
            with safe_open(str(f), framework="pt") as handle:
                here = {name: tuple(handle.get_slice(name).get_shape()) for name in handle.keys()}
        except (SafetensorError, OSError, ValueError) as e:
            raise value_error("folder", f"{f} is not a readable safetensors file ({e})") from None
        if listed is not None and set(here) != listed:
            lacks, unlisted = listed - set(here), set(here) - listed
            raise value_error("folder", f"{str(index)!r} does not match {f.name}:"
                                        + (f" it lists {_names(lacks)} there, which the file lacks" if lacks else "")
                                        + (";" if lacks and unlisted else "")
                                        + (f" the file holds {_names(unlisted)}, which it does not list there"
                                           if unlisted else ""))
        shapes.update(here)

    def load() -> dict[str, torch.Tensor]:
        state = {}
        for f in files:
            try:
                state.update(load_file(str(f)))
            except (SafetensorError, OSError, ValueError) as e:
                raise value_error("folder", f"{f} is not a readable safetensors file ({e})") from None
        return state

    return shapes, load


def _open_bin(path: Path):
    """``(shapes, load)`` of a ``pytorch_model.bin``, memory-mapped (its tensors are not read until
    used): only the zip format of torch >= 1.6 maps, and only plain tensors are unpickled."""
    import zipfile

    if not zipfile.is_zipfile(path):  # the legacy format reads every storage, of any size it declares
        raise value_error("folder", f"{path} is not a PyTorch zip checkpoint (the legacy format of torch < 1.6 is "
                                    "not read); save it again with torch.save")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as e:  # noqa: BLE001 - any unreadable pickle is the same user error
        raise value_error("folder", f"{path} is not a readable PyTorch state dict ({e})") from None
    if not isinstance(state, dict) or not all(isinstance(k, str) and isinstance(v, torch.Tensor)
                                              for k, v in state.items()):
        raise value_error("folder", f"{path} holds a {type(state).__name__}, expected a state dict of named tensors")
    return {k: tuple(v.shape) for k, v in state.items()}, lambda: dict(state)
