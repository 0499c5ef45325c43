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
import os
from collections import OrderedDict
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Sequence

import torch

from .. import _C
from .._checks import type_error, value_error
from ..io import atomic_path
from ..nn import Model, ModelConfig

__all__ = ["T5Config", "T5", "pad_pair"]

# Tensors Hugging Face keeps beside ours: copies of `shared` (tied) and a table its code never uses.
_TIED_COPIES = ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight")
_UNUSED = ("decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.weight",)


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
    def from_hf(cls, d: dict) -> "T5Config":
        """From a Hugging Face ``config.json`` dict (keys this model does not use are ignored)."""
        if d.get("model_type", "t5") not in ("t5", "mt5"):  # mT5 is the T5 v1.1 layout
            raise value_error("config", f"expected a T5 config (model_type 't5' or 'mt5'), got model_type "
                                        f"{d.get('model_type')!r}")
        ff = d.get("feed_forward_proj", "relu")
        if ff not in ("relu", "gated-gelu"):
            raise value_error("config", f"feed_forward_proj {ff!r} is not supported; expected 'relu' or 'gated-gelu'")
        known = {f.name for f in fields(cls)}
        out = cls(**{k: v for k, v in d.items() if k in known and v is not None})
        eos = d.get("eos_token_id", 1)
        if isinstance(eos, list):  # some configs list several; the first ends generation
            out.eos_token_id = int(eos[0])
        if out.num_decoder_layers is None:
            out.num_decoder_layers = out.num_layers
        return out

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
        return self._impl.generate(_ids(input_ids, "input_ids"), attention_mask, int(max_new_tokens), bool(do_sample),
                                   float(temperature), int(top_k), int(seed))

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
        model's dtype (float32 unless ``dtype``). A missing, unexpected or misshapen tensor is a
        ``ValueError`` naming it."""
        folder = Path(folder)
        if not folder.is_dir():
            raise FileNotFoundError(f"folder: no such directory {str(folder)!r}")
        config_path = folder / "config.json"
        if not config_path.is_file():
            raise FileNotFoundError(f"folder: {str(folder)!r} has no config.json")
        try:
            hf = json.loads(config_path.read_text())
        except json.JSONDecodeError as e:
            raise value_error("folder", f"{config_path} is not valid JSON ({e})") from None
        config = T5Config.from_hf(hf)
        state = _read_weights(folder)
        shared = state.get("shared.weight")
        if shared is None:
            raise value_error("folder", f"{folder}: the checkpoint has no 'shared.weight' (the token embedding)")
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
        expected = set(model.parameter_names)
        missing = sorted(expected - set(state))
        unexpected = sorted(set(state) - expected)
        if missing or unexpected:
            raise value_error("folder", f"{folder}: the checkpoint does not fit its config"
                                        + (f"; missing tensors: {missing}" if missing else "")
                                        + (f"; unexpected tensors: {unexpected}" if unexpected else ""))
        params = model.named_parameters()
        for name, t in state.items():
            if tuple(t.shape) != tuple(params[name].shape):
                raise value_error("folder", f"{folder}: tensor '{name}' has shape {tuple(t.shape)}, the config "
                                            f"implies {tuple(params[name].shape)}")
            if not t.is_floating_point():
                raise value_error("folder", f"{folder}: tensor '{name}' has dtype {t.dtype}, expected floating point")
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


def _read_weights(folder: Path) -> dict[str, torch.Tensor]:
    """Tensors of a Hugging Face folder, by name."""
    single, index, bin_path = folder / "model.safetensors", folder / "model.safetensors.index.json", folder / "pytorch_model.bin"
    if single.is_file():
        files = [single]
    elif index.is_file():
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
        except (json.JSONDecodeError, KeyError) as e:
            raise value_error("folder", f"{index} is not a safetensors index ({e})") from None
        files = [folder / f for f in sorted(set(weight_map.values()))]
    elif bin_path.is_file():
        try:
            state = torch.load(bin_path, map_location="cpu", weights_only=True)
        except Exception as e:  # noqa: BLE001 - any unreadable pickle is the same user error
            raise value_error("folder", f"{bin_path} is not a readable PyTorch state dict ({e})") from None
        if not isinstance(state, dict):
            raise value_error("folder", f"{bin_path} holds a {type(state).__name__}, expected a state dict")
        return dict(state)
    else:
        raise FileNotFoundError(f"folder: {str(folder)!r} has no model.safetensors, model.safetensors.index.json "
                                "or pytorch_model.bin")
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    state = {}
    for f in files:
        if not f.is_file():
            raise FileNotFoundError(f"folder: the index names {f.name}, which is missing")
        try:
            state.update(load_file(str(f)))
        except (SafetensorError, OSError, ValueError) as e:
            raise value_error("folder", f"{f} is not a readable safetensors file ({e})") from None
    return state
