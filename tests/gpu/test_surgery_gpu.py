"""Each lever's surgery on a Hugging Face model, on a real GPU, through the worker's own build, profile and
judgement: the swap or entry point acted, and its kernels ran (the stage is verified); the Apex norm under compile
falls back to torch, so that pairing is refused before a run. Marked gpu: skipped without CUDA; a lever the probe
says is unavailable skips itself with the probe's reason."""
import pytest

from bench_core.config.bench_config import BenchConfig
from bench_core.levers.stage import Stage
from bench_core.run.processes import StageJob
from helpers import tiny_hf

pytestmark = pytest.mark.gpu
CFG = BenchConfig(family="llama", depth=2, width=256, heads=16, seq_len=256, batch_size=4, vocab_size=4096,
                  warmup=2, iters=3, device="cuda")


def judged(stage: Stage, kind: str, monkeypatch, **over):
    """The worker's build (the model: a tiny HF one), profile and judgement, in this process."""
    import torch

    from bench_core.measure.proof import Facts, judge_trace
    from bench_core.run import step
    monkeypatch.setattr(step, "build_model", lambda cfg, parts: tiny_hf(kind, depth=cfg.depth, width=cfg.width,
                                                                        vocab=cfg.vocab_size, **over))
    built = step.build_stage(StageJob(CFG, stage, "cuda"), stage, torch)
    for _ in range(2):
        built.step()
    seen = step.profile(built, torch)
    facts = Facts(optimizer_class=built.optimizer_class, norm_modules=built.norm_modules, surgery=built.surgery,
                  own_parts=built.own_parts, logits_returned=built.logits_returned)
    out = judge_trace(stage, "cuda", seen.trace, facts, built.tf32, CFG.batch_size * CFG.seq_len,
                CFG.vocab_size, step.PROFILE_STEPS)
    return built, out


def test_apex_rms_swap_runs_apex_kernels_on_a_hf_llama(runnable, monkeypatch):
    """Fails on the fallback: a FusedRMSNorm that ran torch's manual norm shows no cuApplyRMSNorm."""
    stage = runnable(Stage("adam-fused", "apex-fusedrms", "fp32"))
    built, out = judged(stage, "llama", monkeypatch)
    change = built.surgery.of("apex-fusedrms")
    assert change.changed and sum(s.count for s in change.swaps) == 2 * CFG.depth + 1, change.text
    assert out.seen["apex_rmsnorm"], out.warnings
    assert out.verdict == "verified", out.warnings


def test_apex_norm_under_compile_is_refused_with_its_reason(probe):
    stage = Stage("adam-fused", "apex-fusedrms", "bf16", compile="compile")
    assert stage.unavailable_reason(probe, "cuda") == \
        "Apex FusedRMSNorm falls back to its Python manual_rms_norm under torch.compile"


def test_liger_entry_points_run_their_kernels_and_the_fused_loss_gives_no_logits(runnable, monkeypatch):
    stage = runnable(Stage("adam-fused", "liger-rms", "bf16", head="liger-flce", mlp="liger-swiglu"))
    built, out = judged(stage, "llama", monkeypatch)
    assert all(built.surgery.of(n).changed for n in ("liger-rms", "liger-swiglu", "liger-flce")), built.surgery.text
    assert built.logits_returned is False   # training, labels passed: FLCE computed the loss, no logits
    assert out.seen["liger_rmsnorm"] and out.seen["liger_swiglu"] and out.seen["liger_flce"], out.warnings
    assert out.verdict == "verified", out.warnings


def test_liger_on_gpt2_is_unavailable(runnable, monkeypatch):
    from bench_core.levers.surgery import SurgeryUnavailable
    stage = runnable(Stage("adam-fused", "layernorm", "bf16", head="liger-flce"))
    with pytest.raises(SurgeryUnavailable, match="Liger has no kernels for model_type gpt2"):
        judged(stage, "gpt2", monkeypatch)


def test_torchao_float8_on_a_hf_llama_converts_every_block_linear(runnable, monkeypatch):
    stage = runnable(Stage("adam-fused", "rmsnorm", "fp8-torchao"))
    built, out = judged(stage, "llama", monkeypatch)
    change = built.surgery.of("fp8-torchao")
    assert (change.converted, change.candidates) == (7 * CFG.depth, 7 * CFG.depth), change.text
    assert out.seen["fp8_gemm"] and out.verdict == "verified", out.warnings


def test_gpt2_float8_is_unavailable_conv1d(runnable, monkeypatch):
    from bench_core.levers.surgery import SurgeryUnavailable
    stage = runnable(Stage("adam-fused", "layernorm", "fp8-torchao"))
    with pytest.raises(SurgeryUnavailable, match=f"0 of {4 * CFG.depth} layers convertible: {4 * CFG.depth} Conv1D"):
        judged(stage, "gpt2", monkeypatch)
