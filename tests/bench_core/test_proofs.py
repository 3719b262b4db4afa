"""Proofs without gaps (issue 19, item 5): the FP8 share of GEMM time and the GEMMs outside it, FLCE betrayed by a
log-softmax or a full-logits GEMM, torch's and Apex's RMSNorm kernels told apart under CUDA graphs, and the norm
check reading the model's own modules. Kernel names are read from the H200 results in docs/data, never typed."""
import csv
import io
import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from sample_runs import gpu_run

from bench_core.levers import kernels as kk
from bench_core.levers.registry import APEX_RMS_CLASS, LEVERS
from bench_core.levers.stage import Stage
from bench_core.measure.gemms import GemmKernel, GemmShare, GemmTrace, gemm_share
from bench_core.measure.proof import Facts, classify, judge, verdict

DATA = Path(__file__).resolve().parents[2] / "docs" / "data"
TORCH_RMS = "torch.nn.modules.normalization.RMSNorm"
NATIVE = "void at::native::(anonymous namespace)::"


def h200_name(file: str, stage: str, start: str, contains: str = "") -> str:
    """A kernel or op name exactly as an H200 run recorded it: the stage's top kernels or its key-kernel lists."""
    doc = json.loads((DATA / file).read_text())
    found = next(s for s in doc["stages"] if s["key"] == stage)
    names = [row[0] for row in (found.get("profile") or {}).get("top", [])]
    names += [n for seen in found["kernels"].values() for n in seen]
    return next(n for n in names if n.startswith(start) and contains in n)


# docs/data/h200_2026-12-03_call8_peers_gpt2-medium_b16_run2.json: torchao FP8 (eager) and the FLCE stage's BF16 GEMMs
FP8_RUN = "h200_2026-12-03_call8_peers_gpt2-medium_b16_run2.json"
FP8_FWD = h200_name(FP8_RUN, "adam-fused+layernorm+fp8-torchao", "nvjet_sm90_qqtst")
FP8_BWD = h200_name(FP8_RUN, "adam-fused+layernorm+fp8-torchao", "nvjet_sm90_qrtst")
BF16_HEAD = h200_name(FP8_RUN, "adam-fused+layernorm+fp8-torchao+compile", "nvjet_sm90_tst")
BF16_LINEAR = h200_name(FP8_RUN, "adam-fused+liger-ln+bf16+liger-flce", "nvjet_sm90_tst", "_bias_")
SDPA = h200_name(FP8_RUN, "adam-fused+layernorm+fp8-torchao", "cudnn_generated_fort_native_sdpa")
# docs/data/h200_2026-12-02_call1_all_gpt2-small_smoke.json: the plain CE head's log-softmax kernel
LOG_SOFTMAX_KERNEL = h200_name("h200_2026-12-02_call1_all_gpt2-small_smoke.json", "adam+layernorm+fp32",
                               NATIVE + "cunn_SoftMaxForward")
LIGER_CE = h200_name(FP8_RUN, "adam-fused+liger-ln+bf16+liger-flce", "liger_cross_entropy_kernel")
# docs/data/h200_2026-12-03_call12_swiglu_llama-small_1.json: torch's RMSNorm kernels (eager, BF16)
LLAMA_RUN = "h200_2026-12-03_call12_swiglu_llama-small_1.json"
TORCH_RMS_FWD = h200_name(LLAMA_RUN, "adam-fused+rmsnorm+bf16", NATIVE + "vectorized_")
TORCH_RMS_BWD = h200_name(LLAMA_RUN, "adam-fused+rmsnorm+bf16", NATIVE + "layer_norm_grad")
FUSED_ADAM = h200_name(LLAMA_RUN, "adam-fused+rmsnorm+bf16", "void at::native::", "FusedAdamMathFunctor")
# docs/data/h200_2026-12-02_call2_native_gpt2-small_repeats2.json: torch's LayerNorm kernels and a graph launch
LN_RUN = "h200_2026-12-02_call2_native_gpt2-small_repeats2.json"
TORCH_LN_FWD = h200_name(LN_RUN, "adam-fused+layernorm+bf16+graphs", NATIVE + "vectorized_")
GRAPH_LAUNCH = h200_name(LN_RUN, "adam-fused+layernorm+bf16+graphs", "cudaGraphLaunch")
# docs/data/h200_2026-12-03_call5_peers_llama-small_run1.json: Apex's RMSNorm forward kernel;
# docs/data/h200_2026-12-02_call1_all_gpt2-small_smoke.json: Apex's capturable Adam, replayed in a CUDA graph
APEX_RMS_FWD = h200_name("h200_2026-12-03_call5_peers_llama-small_run1.json", "apex-fusedadam+apex-fusedrms+bf16",
                         "void cuApplyRMSNorm")
APEX_ADAM_GRAPHED = h200_name("h200_2026-12-02_call1_all_gpt2-small_smoke.json",
                              "apex-fusedadam+apex-fusedln+bf16+graphs", "void multi_tensor_apply_kernel",
                              "AdamCapturableFunctor")

VOCAB, TOKENS = 50257, 4 * 1024
HEAD_MM = kk.GemmOp("aten::mm", ((TOKENS, 1024), (1024, VOCAB)))        # the LM head's forward
HEAD_GRAD = kk.GemmOp("aten::mm", ((VOCAB, TOKENS), (TOKENS, 1024)))    # its weight gradient
SCALED = kk.GemmOp("aten::_scaled_mm", ((TOKENS, 1024), (1024, 4096)))
BLOCK_ADDMM = kk.GemmOp("aten::addmm", ((4096,), (TOKENS, 1024), (1024, 4096)))


def fp8_kernels(extra=()):
    """One step of an FP8 stage: 6 + 2 ms of FP8 GEMMs, 2 ms of the BF16 LM head (fwd + weight grad), 5 ms of
    attention (not a GEMM: SDPA's kernels are the attention category)."""
    return [GemmKernel(FP8_FWD, 6000.0, SCALED), GemmKernel(FP8_BWD, 2000.0, SCALED),
            GemmKernel(BF16_HEAD, 1500.0, HEAD_MM), GemmKernel(BF16_HEAD, 500.0, HEAD_GRAD),
            GemmKernel(SDPA, 5000.0, None), *extra]


FP8_STAGE = Stage("adam-fused", "layernorm", "fp8-torchao")
FP8_SEEN = classify(["aten::_fused_adam_", "aten::native_layer_norm", "aten::_scaled_mm", "gemm:bfloat16"])


def test_the_fp8_gemm_classes_read_the_nvjet_operand_types():
    assert kk.is_fp8_gemm_kernel(FP8_FWD) and kk.is_fp8_gemm_kernel(FP8_BWD)
    assert not kk.is_fp8_gemm_kernel(BF16_HEAD) and not kk.is_fp8_gemm_kernel(BF16_LINEAR)
    assert kk.FP8_GEMM.match(FP8_FWD) and not kk.FP8_GEMM.match(BF16_HEAD)


def test_fp8_share_is_fp8_gemm_time_over_all_gemm_time_and_names_the_rest():
    share = gemm_share(fp8_kernels(), kk.FP8_SHARE, VOCAB, steps=1)
    assert share.share == pytest.approx(8.0 / 10.0)       # attention's 5 ms are not GEMM time
    assert [(g.kernel, g.expected) for g in share.others] == [(BF16_HEAD, "lm_head"), (BF16_HEAD, "lm_head")]
    assert share.unexpected == ()
    state, warnings = verdict(FP8_STAGE, "cuda", FP8_SEEN, Facts(gemm_share=share))
    assert (state, warnings) == ("verified", [])


def test_a_block_linear_left_in_bf16_lowers_the_share_names_it_and_fails():
    """One `aten::_scaled_mm` is no proof of FP8 whatever else ran: a BF16 GEMM the rule does not expect fails."""
    left = GemmKernel(BF16_LINEAR, 3000.0, BLOCK_ADDMM)
    share = gemm_share(fp8_kernels([left]), kk.FP8_SHARE, VOCAB, steps=1)
    assert share.share == pytest.approx(8.0 / 13.0)
    assert [g.kernel for g in share.unexpected] == [BF16_LINEAR]
    state, warnings = verdict(FP8_STAGE, "cuda", FP8_SEEN, Facts(gemm_share=share))
    assert state == "fallback"
    assert BF16_LINEAR[:80] in warnings[0] and "aten::addmm" in warnings[0] and "62% of GEMM time" in warnings[0]
    # a non-FP8 GEMM with no op to recognise it by is not expected either
    orphan = gemm_share(fp8_kernels([GemmKernel(BF16_LINEAR, 1.0, None)]), kk.FP8_SHARE, VOCAB, steps=1)
    assert [g.op for g in orphan.unexpected] == [""]


def test_an_outer_product_is_expected_beside_fp8_and_named_as_one():
    """Hugging Face Llama's rotary frequencies x positions (K = 1, float32 by design), compiled into an aten::mm:
    call 54 read it as a fallback of torchao FP8 on Llama-3.2-1B. A K = 1 product has no reduction to convert."""
    rotary = GemmKernel("void cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>", 3.1,
                        kk.GemmOp("aten::mm", ((32, 1), (1, 1024))))
    share = gemm_share(fp8_kernels([rotary]), kk.FP8_SHARE, VOCAB, steps=1)
    assert [g.expected for g in share.others if g.kernel == rotary.name] == ["outer product"]
    assert verdict(FP8_STAGE, "cuda", FP8_SEEN, Facts(gemm_share=share))[0] == "verified"
    # a real reduction in float32 beside FP8 is still a fallback
    block = GemmKernel(rotary.name, 3.1, kk.GemmOp("aten::mm", ((32, 2048), (2048, 1024))))
    assert verdict(FP8_STAGE, "cuda", FP8_SEEN, Facts(gemm_share=gemm_share(
        fp8_kernels([block]), kk.FP8_SHARE, VOCAB, steps=1)))[0] == "fallback"
    assert kk.GemmOp("aten::addmm", ((1024,), (32, 1), (1, 1024))).inner() == 1   # the addend first
    assert kk.GemmOp("aten::linear", ((8, 2048), (512, 2048))).inner() == 2048
    assert kk.GemmOp("aten::add", ((8, 1),)).inner() is None


def test_the_worker_judges_the_share_only_where_a_lever_has_a_rule():
    trace = GemmTrace({"c10::BFloat16"}, tuple(fp8_kernels()), ())
    names = ["aten::_fused_adam_", "aten::native_layer_norm", "aten::_scaled_mm"]
    fp8 = judge(FP8_STAGE, "cuda", names, trace, Facts(), False, TOKENS, VOCAB, steps=1)
    assert fp8.verdict == "verified" and fp8.gemm_share.share == pytest.approx(0.8)
    bf16 = judge(Stage("adam-fused", "layernorm", "bf16"), "cuda", names, trace, Facts(), False, TOKENS, VOCAB, 1)
    assert bf16.gemm_share is None


def test_the_share_travels_in_csv_json_and_the_store(tmp_path):
    from bench_core.results.formats import parse_csv, parse_json, to_csv, to_json
    from bench_core.results.records import StageResult
    from bench_core.results.store import Store
    from bench_core.results.summary import summarize
    run = gpu_run()
    share = gemm_share(fp8_kernels([GemmKernel(BF16_LINEAR, 3000.0, BLOCK_ADDMM)]), kk.FP8_SHARE, VOCAB, 1)
    stages = list(run.stages)
    stages[3] = replace(stages[3], stage=FP8_STAGE, gemm_share=share)
    run = replace(run, stages=tuple(stages))
    rows = list(csv.DictReader(io.StringIO(to_csv(run))))
    assert float(rows[3]["gemm_fp8_share"]) == pytest.approx(8 / 13) and rows[0]["gemm_fp8_share"] == ""
    saved = json.loads(to_json(run))
    assert saved["summary"][3]["gemm_fp8_share"] == pytest.approx(8 / 13)
    assert StageResult.from_dict(saved["stages"][3]).gemm_share == share
    assert parse_json(to_json(run).encode())[0].stages[3].gemm_share == share
    assert summarize(parse_csv(to_csv(run).encode())[0]).stages[3].gemm_fp8_share == pytest.approx(8 / 13)
    store = Store(str(tmp_path / "runs.sqlite3"))
    store.save_run(run)
    assert store.load_run(run.run_id).stages[3].gemm_share == share
    # a file written before the share existed still imports, with an empty share
    old = json.loads(to_json(gpu_run()))
    for stage in old["stages"]:
        del stage["gemm_share"], stage["norm_modules"]
    assert summarize(parse_json(json.dumps(old).encode())[0]).stages[3].gemm_fp8_share is None
    assert GemmShare.from_dict(share.to_dict()) == share


# --- Liger FLCE: betrayed by a log-softmax or a GEMM holding every token's logits ------------------------------------
FLCE = Stage("adam-fused", "layernorm", "bf16", head="liger-flce")
FLCE_NAMES = ["aten::_fused_adam_", "aten::native_layer_norm", LIGER_CE]


def test_flce_is_verified_with_chunked_logits_only():
    chunk = kk.GemmOp("aten::mm", ((512, 1024), (1024, VOCAB)))   # Liger's chunk: a part of the tokens
    trace = GemmTrace({"c10::BFloat16"}, (), (chunk,))
    assert judge(FLCE, "cuda", FLCE_NAMES, trace, Facts(), False, TOKENS, VOCAB, 1).verdict == "verified"


@pytest.mark.parametrize("op", [HEAD_MM, kk.GemmOp("aten::linear", ((4, 1024, 1024), (VOCAB, 1024))),
                                kk.GemmOp("aten::addmm", ((VOCAB,), (TOKENS, 1024), (1024, VOCAB)))])
def test_flce_fails_when_a_gemm_builds_the_full_logits(op):
    """Liger's plain cross-entropy over the full logits launches liger_cross_entropy_kernel too: the kernel's name
    alone is no proof of FLCE."""
    trace = GemmTrace({"c10::BFloat16"}, (), (op,))
    judged = judge(FLCE, "cuda", FLCE_NAMES, trace, Facts(), False, TOKENS, VOCAB, 1)
    assert judged.verdict == "fallback" and judged.seen["full_logits"] == [f"logits:{TOKENS}x{VOCAB} {op.name}"]
    assert "full-vocabulary logits GEMM" in judged.warnings[0]


@pytest.mark.parametrize("name", [LOG_SOFTMAX_KERNEL, "aten::_log_softmax", "aten::log_softmax"])
def test_flce_fails_when_a_log_softmax_runs(name):
    state, warnings = verdict(FLCE, "cuda", classify([*FLCE_NAMES, "gemm:bfloat16", name]))
    assert state == "fallback" and "log-softmax over the logits" in warnings[0]


# --- RMSNorm: torch's kernels and Apex's told apart, also in a CUDA graph replay --------------------------------------
def test_torch_norm_kernels_are_told_apart_by_their_rms_flag():
    assert kk.ATEN_RMS_NORM.match(TORCH_RMS_FWD) and kk.ATEN_RMS_NORM.match(TORCH_RMS_BWD)
    assert not kk.ATEN_LAYER_NORM.match(TORCH_RMS_FWD) and not kk.ATEN_LAYER_NORM.match(TORCH_RMS_BWD)
    assert kk.ATEN_LAYER_NORM.match(TORCH_LN_FWD) and not kk.ATEN_RMS_NORM.match(TORCH_LN_FWD)


def test_native_rmsnorm_under_graphs_is_verified_by_its_kernels():
    """A graph replay records no CPU op: torch's RMSNorm is proven by its kernels there, not `unconfirmed`."""
    stage = Stage("adam-fused", "rmsnorm", "bf16", compile="graphs")
    assert verdict(stage, "cuda", classify([GRAPH_LAUNCH, FUSED_ADAM, TORCH_RMS_FWD, TORCH_RMS_BWD])) == \
        ("verified", [])
    assert verdict(stage, "cuda", classify([GRAPH_LAUNCH, FUSED_ADAM]))[0] == "unconfirmed"


def test_apex_rmsnorm_mixed_with_torch_kernels_under_graphs_is_a_fallback():
    stage = Stage("apex-fusedadam", "apex-fusedrms", "bf16", compile="graphs")
    honest = [GRAPH_LAUNCH, APEX_ADAM_GRAPHED, APEX_RMS_FWD]
    assert verdict(stage, "cuda", classify(honest)) == ("verified", [])
    state, warnings = verdict(stage, "cuda", classify([*honest, TORCH_RMS_FWD]))
    assert state == "fallback" and "Apex FusedRMSNorm fell back" in warnings[0]


# --- the norm check reads the model's own modules -------------------------------------------------------------------
def test_one_wrong_norm_module_fails_the_norm_check():
    stage = Stage("apex-fusedadam", "apex-fusedrms", "bf16")
    seen = classify(["apex::fused_rms_norm_affine_fwd", APEX_ADAM_GRAPHED, "gemm:bfloat16"])
    assert verdict(stage, "cuda", seen, Facts(norm_modules={APEX_RMS_CLASS: 5})) == ("verified", [])
    state, warnings = verdict(stage, "cuda", seen, Facts(norm_modules={APEX_RMS_CLASS: 4, TORCH_RMS: 1}))
    assert state == "fallback" and f"the model holds 1 {TORCH_RMS}" in warnings[0]
    # the factory's class alone is no longer what is judged: a stage without modules recorded says so
    assert verdict(stage, "cuda", seen, Facts(norm_modules={}))[0] == "fallback"


def test_the_worker_counts_the_norm_modules_of_the_built_model():
    from bench_core.config.bench_config import BenchConfig
    from bench_core.models.families import build_model
    from bench_core.run.step import model_parts, norm_modules
    cfg = BenchConfig(family="llama", depth=2, width=64, heads=4, seq_len=16, batch_size=2, vocab_size=128,
                      device="cpu")
    stage = Stage("adam", "rmsnorm", "fp32")
    model = build_model(cfg, model_parts(stage, "llama"))
    found = norm_modules(model)
    assert found == {TORCH_RMS: sum(isinstance(m, torch.nn.RMSNorm) for m in model.modules())} and found[TORCH_RMS] > 1
    assert verdict(stage, "cpu", classify(["aten::rms_norm", "gemm:float"]), Facts(norm_modules=found))[0] == \
        "verified"
    name, _ = next((n, m) for n, m in model.named_modules() if isinstance(m, torch.nn.RMSNorm))
    parent, attr = model.get_submodule(name.rpartition(".")[0]) if "." in name else model, name.rpartition(".")[2]
    setattr(parent, attr, torch.nn.LayerNorm(cfg.width))
    state, warnings = verdict(stage, "cpu", classify(["aten::rms_norm", "gemm:float"]),
                              Facts(norm_modules=norm_modules(model)))
    assert state == "unconfirmed" and "1 torch.nn.modules.normalization.LayerNorm" in warnings[0]


def test_te_swapping_the_norms_is_not_judged_against_the_norm_lever():
    stage = Stage("adam-fused", "rmsnorm", "te-fp8")
    assert LEVERS["te-fp8"].swaps_norm
    seen = classify(["aten::_fused_adam_", "transformer_engine::rmsnorm"])
    assert verdict(stage, "cuda", seen, Facts(norm_modules={"transformer_engine.pytorch.RMSNorm": 4}))[0] == "verified"
