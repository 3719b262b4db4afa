"""A Llama-style decoder, as readable as model.py: RMSNorm (class injected by the stage), rotary position
embeddings, SwiGLU MLP, no biases, an LM head of its own (not tied to the embedding)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from bench_core.models.gpt import LossHead, MlpClass, cross_entropy_head

# The weights that write into the residual stream. An MLP part with Hugging Face's names (gate_proj, up_proj,
# down_proj, as fused third-party MLPs have) is drawn in the same order with the same scales as ours.
RESIDUAL_PROJECTIONS = ("attn.proj.weight", "mlp.proj.weight", "mlp.down_proj.weight")


@dataclass(frozen=True)
class LlamaConfig:
    depth: int = 12
    width: int = 768
    heads: int = 12
    seq_len: int = 1024
    vocab_size: int = 32000
    mlp_hidden: int = 2048       # families.mlp_hidden: 8/3 · width, rounded up to a multiple of 256
    rope_base: float = 10000.0


def rotary_tables(head_dim: int, seq_len: int, base: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of position · base^(-2i/head_dim), shape (seq_len, head_dim / 2), in fp32."""
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    angles = torch.outer(torch.arange(seq_len, dtype=torch.float32), inv_freq)
    return angles.cos(), angles.sin()


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each (even, odd) pair of x (B, heads, T, head_dim) by its position's angle."""
    x1, x2 = x[..., 0::2].float(), x[..., 1::2].float()
    out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)
    return out.to(x.dtype)


class Attention(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.heads = cfg.heads
        self.qkv = nn.Linear(cfg.width, 3 * cfg.width, bias=False)
        self.proj = nn.Linear(cfg.width, cfg.width, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).contiguous().view(B, T, C))


class SwiGLU(nn.Module):
    def __init__(self, width: int, hidden: int):
        super().__init__()
        self.gate = nn.Linear(width, hidden, bias=False)
        self.up = nn.Linear(width, hidden, bias=False)
        self.proj = nn.Linear(hidden, width, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(F.silu(self.gate(x)) * self.up(x))


class Block(nn.Module):
    def __init__(self, cfg: LlamaConfig, norm_cls: type[nn.Module], mlp_cls: MlpClass):
        super().__init__()
        self.norm1 = norm_cls(cfg.width)
        self.attn = Attention(cfg)
        self.norm2 = norm_cls(cfg.width)
        self.mlp = mlp_cls(cfg.width, cfg.mlp_hidden)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x), cos, sin)
        return x + self.mlp(self.norm2(x))


class Llama(nn.Module):
    rope_cos: torch.Tensor
    rope_sin: torch.Tensor

    def __init__(self, cfg: LlamaConfig, norm_cls: type[nn.Module] = nn.RMSNorm,
                 head: LossHead = cross_entropy_head, mlp_cls: MlpClass = SwiGLU):
        super().__init__()
        self.cfg = cfg
        self.head = head
        self.wte = nn.Embedding(cfg.vocab_size, cfg.width)
        self.blocks = nn.ModuleList(Block(cfg, norm_cls, mlp_cls) for _ in range(cfg.depth))
        self.norm_f = norm_cls(cfg.width)
        self.lm_head = nn.Linear(cfg.width, cfg.vocab_size, bias=False)
        cos, sin = rotary_tables(cfg.width // cfg.heads, cfg.seq_len, cfg.rope_base)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        for name, p in self.named_parameters():
            if p.dim() == 2:  # GPT-2-style init; residual projections scaled by 1/sqrt(2 * depth)
                std = 0.02 / math.sqrt(2 * cfg.depth) if name.endswith(RESIDUAL_PROJECTIONS) else 0.02
                nn.init.normal_(p, mean=0.0, std=std)

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        T = idx.shape[1]
        cos, sin = self.rope_cos[:T], self.rope_sin[:T]
        x = self.wte(idx)
        for block in self.blocks:
            x = block(x, cos, sin)
        return self.head(self.norm_f(x), self.lm_head.weight, targets)
