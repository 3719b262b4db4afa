"""The levers' builders: each imports torch or its third-party package lazily, so the dashboard can import the
registry without either."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

LR = 3e-4


def fp32_moment(n: int) -> int:
    """An fp32 moment: 4 bytes per element (torch and Apex keep fp32 moments for fp32 parameters)."""
    return 4 * n


def adam(**kw: Any) -> Callable[..., Any]:
    def build(params: Any, capturable: bool = False) -> Any:
        import torch
        return torch.optim.Adam(params, lr=LR, **kw, **({"capturable": True} if capturable else {}))  # type: ignore[arg-type]
    return build


# torchao keeps a moment in 8 bits (uint8 codes, one fp32 scale per block) only for a tensor of at least this many
# elements that the block divides (torchao.optim.adam._AdamBase._new_buffer); any other tensor keeps fp32.
INT8_MIN_NUMEL = 4096
INT8_BLOCK = 256   # AdamW8bit's default block_size


def int8_block_moment(n: int) -> int:
    """Bytes of one torchao 8-bit moment of n elements: the codes and the block scales (its shared 256-entry
    lookup table, only read, is not counted)."""
    if n >= INT8_MIN_NUMEL and n % INT8_BLOCK == 0:
        return n + 4 * (n // INT8_BLOCK)
    return fp32_moment(n)


def torchao_adamw_8bit(params: Any, capturable: bool = False) -> Any:
    from torchao.optim import AdamW8bit
    # weight_decay 0: the same update as torch's Adam, so the stage differs from adam-fused only in its state
    return AdamW8bit(params, lr=LR, weight_decay=0.0, block_size=INT8_BLOCK)


def apex_fused_adam(params: Any, capturable: bool = False) -> Any:
    from apex.optimizers import FusedAdam
    return FusedAdam(params, lr=LR, adam_w_mode=False, capturable=capturable)


def zero_adam(params: Any, capturable: bool = False) -> Any:
    import torch
    from torch.distributed.optim import ZeroRedundancyOptimizer
    return ZeroRedundancyOptimizer(params, optimizer_class=torch.optim.Adam, lr=LR)


def apex_dist_adam(params: Any, capturable: bool = False) -> Any:
    from apex.contrib.optimizers.distributed_fused_adam import DistributedFusedAdam
    return DistributedFusedAdam(params, lr=LR, adam_w_mode=False)


def layernorm() -> Any:
    import torch.nn as nn
    return nn.LayerNorm


def rmsnorm() -> Any:
    import torch.nn as nn
    return nn.RMSNorm


def apex_fused_ln() -> Any:
    from apex.normalization import FusedLayerNorm
    return FusedLayerNorm


def apex_fused_rms() -> Any:
    from apex.normalization import FusedRMSNorm
    return FusedRMSNorm


def liger_ln() -> Any:
    from liger_kernel.transformers import LigerLayerNorm

    class LigerLN(LigerLayerNorm):  # torch.nn.LayerNorm's eps, and a (zero-initialised) bias as GPT's has
        def __init__(self, width: int):
            super().__init__(width, eps=1e-5)
    return LigerLN


def liger_rms() -> Any:
    from liger_kernel.transformers import LigerRMSNorm

    class LigerRMS(LigerRMSNorm):  # torch.nn.RMSNorm's default eps (dtype's eps) differs; Llama's is 1e-6 both
        def __init__(self, width: int):
            super().__init__(width, eps=1e-6)
    return LigerRMS


def gelu_mlp() -> Any:
    from bench_core.models.gpt import MLP
    return MLP


def swiglu_mlp() -> Any:
    from bench_core.models.llama import SwiGLU
    return SwiGLU


def liger_swiglu() -> Any:
    """Liger's SwiGLU MLP, built as (width, inner width) like ours; its weights (gate_proj, up_proj, down_proj) have
    our SwiGLU's shapes and order, so the family's init draws the same values (models.llama.RESIDUAL_PROJECTIONS)."""
    from types import SimpleNamespace

    from liger_kernel.transformers import LigerSwiGLUMLP

    class LigerSwiGLU(LigerSwiGLUMLP):
        def __init__(self, width: int, hidden: int):
            super().__init__(SimpleNamespace(hidden_size=width, intermediate_size=hidden, hidden_act="silu"))
    return LigerSwiGLU


def cross_entropy_head() -> Any:
    from bench_core.models.gpt import cross_entropy_head as head
    return head


def liger_flce_head() -> Any:
    """LM head + cross-entropy in chunks: the (tokens x vocab) logits are never materialised."""
    from liger_kernel.transformers import LigerFusedLinearCrossEntropyLoss
    loss_fn = LigerFusedLinearCrossEntropyLoss()

    def head(hidden: Any, weight: Any, targets: Any) -> tuple[Any, Any]:
        if targets is None:
            import torch.nn.functional as F
            return F.linear(hidden, weight), None
        return None, loss_fn(weight, hidden.view(-1, hidden.size(-1)), targets.view(-1))
    return head


def transformer_engine_fp8(model: Any) -> Any:
    """Transformer Engine: each block's Linear and norm become te.Linear / te.LayerNorm / te.RMSNorm, weights
    copied; the step then runs under te.fp8_autocast (see precision lever te-fp8)."""
    import torch
    import transformer_engine.pytorch as te

    def swap(parent: Any) -> None:
        for name, child in parent.named_children():
            if isinstance(child, torch.nn.Linear):
                new = te.Linear(child.in_features, child.out_features, bias=child.bias is not None)
            elif isinstance(child, (torch.nn.LayerNorm, torch.nn.RMSNorm)):
                cls = te.LayerNorm if isinstance(child, torch.nn.LayerNorm) else te.RMSNorm
                new = cls(child.normalized_shape[0], eps=child.eps or 1e-6)
            else:
                swap(child)
                continue
            with torch.no_grad():
                for key, value in child.state_dict().items():
                    getattr(new, key).copy_(value)
            setattr(parent, name, new)
    for block in model.blocks:
        swap(block)
    return model


def te_fp8_context() -> Any:
    import transformer_engine.pytorch as te
    return te.fp8_autocast(enabled=True)
