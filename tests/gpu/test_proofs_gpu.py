"""Proofs without gaps on a real GPU (issue 19, item 5): each lever verified as built, and the fallback each proof
guards against, built in this process by the worker's own code, NOT verified. Marked gpu: skipped without CUDA; a
lever the probe says is unavailable skips itself with the probe's reason."""
from dataclasses import replace

import pytest

from bench_core.config.bench_config import BenchConfig
from bench_core.levers.registry import LEVERS
from bench_core.levers.stage import Stage
from bench_core.run.processes import StageJob

pytestmark = pytest.mark.gpu
# vocab 4096 is no other dimension of the model (width 256, MLP 1024/683): the LM head is told by its shapes
GPT = BenchConfig(family="gpt", depth=2, width=256, heads=4, seq_len=256, batch_size=4, vocab_size=4096, warmup=2,
                  iters=3, device="cuda")
LLAMA = replace(GPT, family="llama")


def judged(cfg: BenchConfig, stage: Stage):
    """The worker's build, (graph capture,) profile and judgement, in this process, so a test can swap a builder."""
    import torch

    from bench_core.measure.proof import Facts, judge_trace
    from bench_core.run.step import PROFILE_STEPS, build_stage, profile
    built = build_stage(StageJob(cfg, stage, "cuda"), stage, torch)
    if built.capture is not None:
        built.capture()
    for _ in range(2):
        built.step()
    seen = profile(built, torch)
    facts = Facts(optimizer_class=built.optimizer_class, norm_modules=built.norm_modules)
    return judge_trace(stage, "cuda", seen.trace, facts, built.tf32, cfg.batch_size * cfg.seq_len,
                 cfg.vocab_size, PROFILE_STEPS)


def patched(stage: Stage) -> Stage:
    """The stage built again from its key, so it holds the levers as patched now (a Stage keeps the lever objects
    it was made with: the first H200 run of these tests patched the registry after, and ran the honest levers)."""
    return Stage.from_key(stage.key)


# --- FP8: the share of GEMM time, and a block Linear left in BF16 ---------------------------------------------------
FP8 = Stage("adam-fused", "layernorm", "fp8-torchao")


def test_torchao_fp8_is_verified_with_only_the_lm_head_outside_fp8(probe, runnable):
    out = judged(GPT, runnable(FP8))
    assert out.verdict == "verified", out.warnings
    assert out.gemm_share is not None and 0 < out.gemm_share.share < 1
    assert out.gemm_share.unexpected == () and {g.expected for g in out.gemm_share.others} == {"lm_head"}


def test_torchao_fp8_with_a_block_left_in_bf16_is_not_verified(probe, runnable, monkeypatch):
    """One `aten::_scaled_mm` is no proof of the stage: leave block 0's Linears in BF16 and it must fail."""
    runnable(FP8)
    from torchao.float8 import convert_to_float8_training

    def most(model):
        return convert_to_float8_training(model, module_filter_fn=lambda m, fqn: fqn.startswith("blocks.")
                                          and not fqn.startswith("blocks.0."))
    honest = judged(GPT, FP8).gemm_share
    lever = LEVERS["fp8-torchao"]
    # its own conversion instead of the lever's surgery (levers.surgery.Float8Convert)
    monkeypatch.setitem(LEVERS, "fp8-torchao", replace(lever, surgery=None, plan=replace(lever.plan, convert=most)))
    out = judged(GPT, patched(FP8))
    assert out.verdict == "fallback" and out.gemm_share.unexpected, out.warnings
    assert out.gemm_share.share < honest.share
    assert any("aten::" in g.op for g in out.gemm_share.unexpected)   # named by the op that launched it


# --- Liger FLCE: a fallback over the full logits ---------------------------------------------------------------------
FLCE = Stage("adam-fused", "layernorm", "bf16", head="liger-flce")


def test_liger_flce_is_verified(probe, runnable):
    out = judged(GPT, runnable(FLCE))
    assert out.verdict == "verified", out.warnings
    assert not out.seen["full_logits"] and not out.seen["log_softmax"]


def test_liger_cross_entropy_over_full_logits_is_not_verified(probe, runnable, monkeypatch):
    """Liger's plain cross-entropy launches liger_cross_entropy_kernel too: that kernel alone must not pass it."""
    runnable(FLCE)

    def full_logits_head():
        import torch.nn.functional as F
        from liger_kernel.transformers import LigerCrossEntropyLoss
        loss_fn = LigerCrossEntropyLoss()

        def head(hidden, weight, targets):
            logits = F.linear(hidden, weight)
            return logits, None if targets is None else loss_fn(logits.view(-1, logits.size(-1)), targets.view(-1))
        return head
    monkeypatch.setitem(LEVERS, "liger-flce", replace(LEVERS["liger-flce"], factory=full_logits_head))
    out = judged(GPT, patched(FLCE))
    assert out.seen["liger_flce"] and out.seen["full_logits"]
    assert out.verdict == "fallback", out.warnings


def test_liger_flce_replaced_by_torch_cross_entropy_is_not_verified(probe, runnable, monkeypatch):
    from bench_core.levers import builders
    runnable(FLCE)
    monkeypatch.setitem(LEVERS, "liger-flce", replace(LEVERS["liger-flce"], factory=builders.cross_entropy_head))
    out = judged(GPT, patched(FLCE))
    assert out.seen["log_softmax"] and out.verdict == "fallback"


# --- RMSNorm under CUDA graphs, and a model holding a mix of norms --------------------------------------------------
def test_native_rmsnorm_under_graphs_is_verified(probe, runnable):
    out = judged(LLAMA, runnable(Stage("adam-fused", "rmsnorm", "bf16", compile="graphs")))
    assert out.seen["aten_rms_norm"] and out.verdict == "verified", out.warnings


def _mixed_rms():
    """Apex FusedRMSNorm for every norm but the first, which is torch's: the fallback a factory's class hid."""
    import torch
    from apex.normalization import FusedRMSNorm
    made = []

    def build(width, *args, **kwargs):
        made.append(width)
        return (torch.nn.RMSNorm if len(made) == 1 else FusedRMSNorm)(width, *args, **kwargs)
    return build


@pytest.mark.parametrize("compile_", ["eager", "graphs"])
def test_apex_rmsnorm_is_verified_and_a_mix_with_torch_is_not(probe, runnable, monkeypatch, compile_):
    stage = runnable(Stage("adam-fused", "apex-fusedrms", "bf16", compile=compile_))
    assert judged(LLAMA, stage).verdict == "verified"
    monkeypatch.setitem(LEVERS, "apex-fusedrms", replace(LEVERS["apex-fusedrms"], factory=_mixed_rms))
    out = judged(LLAMA, patched(stage))
    assert out.verdict == "fallback", out.warnings
    assert any("torch.nn.modules.normalization.RMSNorm" in w for w in out.warnings)   # the module check
    assert out.seen["aten_rms_norm"]           # and the kernel check, which also holds in a graph replay
