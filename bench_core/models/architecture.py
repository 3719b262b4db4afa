"""A model's architecture as facts: the norm and MLP types, the parts a stage builds, the linears of a block, the
attention shape with its KV heads, and the model contract. Torch-free; read by the family registry (families) and by
the family sources that build their facts from a config (hf_config, factory).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol


class NormType(StrEnum):
    LAYERNORM = "layernorm"
    RMSNORM = "rmsnorm"


class MlpType(StrEnum):
    GELU = "gelu"
    SWIGLU = "swiglu"


# How a message names a part type ("rmsnorm is an RMS norm, valid only for the llama family").
PART_NOUNS: dict[str, str] = {NormType.LAYERNORM: "a LayerNorm", NormType.RMSNORM: "an RMS norm",
                              MlpType.GELU: "a GELU MLP", MlpType.SWIGLU: "a SwiGLU MLP"}


class LanguageModel(Protocol):
    """The contract a family's model keeps: step.py, FP8 conversion and the loss heads rely on nothing else."""
    @property
    def blocks(self) -> Any: ...      # the repeated blocks (FP8 converts their modules; torchao filters on "blocks.")

    @property
    def lm_head(self) -> Any: ...     # its .weight is what a loss head multiplies the final hidden states with

    def forward(self, idx: Any, targets: Any = None) -> tuple[Any, Any]: ...   # (logits | None, loss | None)

    def parameters(self) -> Any: ...


@dataclass(frozen=True)
class ModelParts:
    """The stage's pieces of the model, each a lever's build: kind -> class or callable (norm, mlp, head)."""
    parts: Mapping[str, Any] = field(default_factory=dict)

    def get(self, kind: str, default: Any = None) -> Any:
        return self.parts.get(kind, default)


@dataclass(frozen=True)
class Linear:
    """One linear layer of a block: (fan_in, fan_out), and whether it has a bias."""
    name: str
    fan_in: int
    fan_out: int
    bias: bool

    @property
    def params(self) -> int:
        return self.fan_in * self.fan_out + (self.fan_out if self.bias else 0)


@dataclass(frozen=True)
class AttentionShape:
    """Query heads, key/value heads (fewer under grouped-query attention, one under multi-query) and head size."""
    heads: int
    kv_heads: int
    head_dim: int

    @property
    def q_width(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_width(self) -> int:
        return self.kv_heads * self.head_dim


@dataclass(frozen=True)
class Architecture:
    """A model's facts, from which its parameter count, FLOPs and GEMM shapes are derived (and which the
    dashboard shows). Every family states them; the tests check them against the built model."""
    layers: int
    hidden: int
    attention: AttentionShape
    mlp_width: int
    vocab: int
    norm: NormType
    activation: str
    gated_mlp: bool                       # SwiGLU/GeGLU: gate and up projections
    tied_embeddings: bool
    block_linears: tuple[Linear, ...]
    positions: int = 0                    # rows of a learned position table; 0 with rotary embeddings
    block_extra_params: int = 0           # per block, beyond its linears and two norms (Qwen3's q/k norms)
    # A module the tool did not build from these facts (a factory's): its parameters as counted on it
    counted_params: int = 0
    counted_lookup_params: int = 0

    @property
    def norm_params(self) -> int:
        return self.hidden * (2 if self.norm is NormType.LAYERNORM else 1)

    @property
    def lookup_params(self) -> int:
        """Weights only looked up, never in a matmul: positions, and the token embedding unless it is the head."""
        if self.counted_params:
            return self.counted_lookup_params
        return self.positions * self.hidden + (0 if self.tied_embeddings else self.vocab * self.hidden)

    @property
    def params(self) -> int:
        if self.counted_params:
            return self.counted_params
        block = sum(linear.params for linear in self.block_linears) + 2 * self.norm_params + self.block_extra_params
        head = self.vocab * self.hidden
        return head + self.layers * block + self.norm_params + self.lookup_params


def block_linears(d: int, attn: AttentionShape, mlp: int, gated: bool, fused_qkv: bool,
                  qkv_bias: bool = False, out_bias: bool = False, mlp_bias: bool = False) -> tuple[Linear, ...]:
    """A decoder block's linears: attention (fused QKV, or q, k, v), its output, then the MLP."""
    if fused_qkv:
        qkv = [Linear("qkv", d, attn.q_width + 2 * attn.kv_width, qkv_bias)]
    else:
        qkv = [Linear("q", d, attn.q_width, qkv_bias), Linear("k", d, attn.kv_width, qkv_bias),
               Linear("v", d, attn.kv_width, qkv_bias)]
    inner = [Linear("gate", d, mlp, mlp_bias)] if gated else []
    return (*qkv, Linear("o", attn.q_width, d, out_bias), *inner, Linear("up", d, mlp, mlp_bias),
            Linear("down", mlp, d, mlp_bias))
