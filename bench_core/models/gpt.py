"""A GPT-style decoder in the spirit of nanoGPT's model.py. The norm class and the loss head come from the stage."""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

# A loss head: (final hidden states, LM-head weight, targets or None) -> (logits or None, loss or None).
LossHead = Callable[[torch.Tensor, torch.Tensor, "torch.Tensor | None"],
                    tuple["torch.Tensor | None", "torch.Tensor | None"]]
# An MLP part: (width, inner width) -> module; the family's own, or a lever's fused one.
MlpClass = Callable[[int, int], nn.Module]


def cross_entropy_head(hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor | None):
    """The LM head and cross-entropy as two steps: the full (tokens x vocab) logits exist, in fp32 for the loss."""
    logits = F.linear(hidden, weight)
    if targets is None:
        return logits, None
    return logits, F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.view(-1))


@dataclass(frozen=True)
class GPTConfig:
    depth: int = 12
    width: int = 768
    heads: int = 12
    seq_len: int = 1024
    vocab_size: int = 50304


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.heads = cfg.heads
        self.qkv = nn.Linear(cfg.width, 3 * cfg.width)
        self.proj = nn.Linear(cfg.width, cfg.width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).contiguous().view(B, T, C))


class MLP(nn.Module):
    def __init__(self, width: int, hidden: int):
        super().__init__()
        self.fc = nn.Linear(width, hidden)
        self.proj = nn.Linear(hidden, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig, norm_cls: type[nn.Module], mlp_cls: MlpClass):
        super().__init__()
        self.ln1 = norm_cls(cfg.width)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = norm_cls(cfg.width)
        self.mlp = mlp_cls(cfg.width, 4 * cfg.width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig, norm_cls: type[nn.Module] = nn.LayerNorm, head: LossHead = cross_entropy_head,
                 mlp_cls: MlpClass = MLP):
        super().__init__()
        self.cfg = cfg
        self.head = head
        self.wte = nn.Embedding(cfg.vocab_size, cfg.width)
        self.wpe = nn.Embedding(cfg.seq_len, cfg.width)
        self.blocks = nn.ModuleList(Block(cfg, norm_cls, mlp_cls) for _ in range(cfg.depth))
        self.ln_f = norm_cls(cfg.width)
        self.lm_head = nn.Linear(cfg.width, cfg.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # weight tying, as in GPT-2
        self.apply(self._init_weights)
        # GPT-2: scale residual projections by 1/sqrt(2 * depth)
        for name, p in self.named_parameters():
            if name.endswith("proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.depth))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        T = idx.shape[1]
        pos = torch.arange(T, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x), self.lm_head.weight, targets)


def synthetic_batch(vocab_size: int, batch_size: int, seq_len: int, seed: int, device: str):
    """Random tokens from the run's seed: every stage of a run sees identical data."""
    gen = torch.Generator().manual_seed(seed)
    data = torch.randint(0, vocab_size, (batch_size, seq_len + 1), generator=gen)
    return data[:, :-1].contiguous().to(device), data[:, 1:].contiguous().to(device)
