"""The GEMM facts a proof reads from a trace: which input dtypes the GEMMs that ran had."""
from __future__ import annotations

from bench_core.measure.gemms import gemm_trace
from bench_core.measure.trace import DeviceActivity, ShapedOp, Source, Trace

BF16_KERNEL = "nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coopB_TNT"


def _autocast_addmm(kernel_launched_by: int) -> Trace:
    """torch.addmm called under autocast, as Hugging Face GPT-2's Conv1D calls it: the op as called (float inputs,
    correlation 1) and the op autocast dispatches (bf16 inputs, correlation 2)."""
    outer = ShapedOp("aten::addmm", 1, ((768,), (8192, 768), (768, 768)), ("float", "float", "float"))
    inner = ShapedOp("aten::addmm", 2, ((768,), (8192, 768), (768, 768)),
                     ("c10::BFloat16", "c10::BFloat16", "c10::BFloat16"))
    kernel = DeviceActivity(BF16_KERNEL, 0.0, 1000.0, kernel_launched_by, 7, 99)
    return Trace(Source.KINETO, activities=(kernel,), shaped_ops=(outer, inner))


def test_only_the_op_that_launched_the_gemm_gives_its_dtype():
    """The outer float addmm launched nothing: counting it read as an FP32 GEMM under BF16 on the H100
    (docs/data/h100_2026-12-07_call49_seed_gpt2_1.json)."""
    assert gemm_trace(_autocast_addmm(kernel_launched_by=2)).dtypes == {"c10::BFloat16"}


def test_without_kernels_tied_to_ops_every_gemm_op_counts():
    """A CUDA graph replay or a CPU run ties no kernel to an op: every op's dtype is all there is to read."""
    assert gemm_trace(_autocast_addmm(kernel_launched_by=0)).dtypes == {"float", "c10::BFloat16"}


def test_an_outer_product_is_no_fp32_gemm():
    """Hugging Face Llama's rotary embedding: inv_freq (b, 32, 1) x positions (b, 1, seq) in float32, autocast off
    around it by design; a K = 1 product has no reduction for BF16 to speed up."""
    rope = ShapedOp("aten::bmm", 5, ((8, 32, 1), (8, 1, 1024)), ("float", "float"))
    gemm = ShapedOp("aten::mm", 6, ((8192, 2048), (2048, 2048)), ("c10::BFloat16", "c10::BFloat16"))
    kernels = tuple(DeviceActivity(BF16_KERNEL, 0.0, 10.0, corr, 7, corr) for corr in (5, 6))
    assert gemm_trace(Trace(Source.KINETO, activities=kernels, shaped_ops=(rope, gemm))).dtypes == {"c10::BFloat16"}
