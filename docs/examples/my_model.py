"""An example for `--model-factory docs.examples.my_model:build` (docs/MODELS.md): your own module, on the
engine's contract. Run from the repository root: python -m bench_core run --model-factory
docs.examples.my_model:build --depth 2 --width 64 --heads 4 --seq-len 32 --vocab-size 256 --device cpu"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, width: int, heads: int):
        super().__init__()
        self.norm1, self.norm2 = nn.RMSNorm(width), nn.RMSNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True, bias=False)
        self.up = nn.Linear(width, 4 * width, bias=False)
        self.down = nn.Linear(4 * width, width, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x)
        mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1], device=x.device)
        x = x + self.attn(h, h, h, attn_mask=mask, is_causal=True, need_weights=False)[0]
        return x + self.down(F.gelu(self.up(self.norm2(x))))


class MyModel(nn.Module):
    def __init__(self, depth: int, width: int, heads: int, vocab: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(depth))   # optional: levers find blocks
        self.norm = nn.RMSNorm(width)
        self.lm_head = nn.Linear(width, vocab, bias=False)                       # optional: the output projection

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.norm(x))
        loss = None if targets is None else F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())
        return logits, loss


def build(cfg) -> nn.Module:
    """The factory: receives the run's BenchConfig, returns the module (float32, on the current device)."""
    return MyModel(cfg.depth, cfg.width, cfg.heads, cfg.vocab_size)
