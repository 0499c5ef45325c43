"""The T5 pretraining study's config and presets: those of the reusable pretraining step
(:mod:`vaetransfer.studies.kit.t5_pretraining`), which the ``t5_vae`` study runs at one of these
presets as its first stage."""
from __future__ import annotations

from ..kit.t5_pretraining import PRESETS, PretrainConfig as Config

__all__ = ["Config", "PRESETS"]
