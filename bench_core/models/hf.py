"""A Hugging Face causal LM behind the engine's model contract (families.LanguageModel): built from its config
with random weights in float32, trained through its own forward and loss.

`from_config` takes an explicit dtype: transformers 5 otherwise takes the checkpoint's (bfloat16 in most
configs), which would make the FP32 baseline silently BF16. The adapter passes the labels as `shift_labels` too:
the engine's targets are already the next tokens, and a fused loss head (Liger's) runs only when labels come.
"""
from __future__ import annotations

from typing import Any

import torch
import torch.nn as nn

from bench_core.config.bench_config import BenchConfig


class HfCausalLM(nn.Module):
    """forward(idx, targets) -> (logits | None, loss | None); `blocks` are the decoder layers, `lm_head` the output
    projection; `.hf` the wrapped model and `.model_type` its config's."""

    def __init__(self, config: Any, attention: str = "sdpa"):
        super().__init__()
        from transformers import AutoModelForCausalLM
        self.hf = AutoModelForCausalLM.from_config(config, dtype=torch.float32, attn_implementation=attention)
        self.model_type: str = config.model_type
        self.attention = attention

    @property
    def blocks(self) -> nn.ModuleList:
        base = self.hf.base_model
        layers = getattr(base, "layers", None)
        return layers if layers is not None else base.h     # GPT-2 names its blocks h

    @property
    def lm_head(self) -> nn.Module:
        return self.hf.get_output_embeddings()

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        out = self.hf(input_ids=idx, labels=targets, shift_labels=targets, use_cache=False)
        return out.logits, out.loss


def build_hf(cfg: BenchConfig) -> HfCausalLM:
    from bench_core.models.hf_config import resolved_config
    if cfg.source is None:
        raise ValueError("the hf family needs a model source")
    return HfCausalLM(resolved_config(cfg), cfg.source.attention)
