"""The levers of today's alternatives to Apex (Liger, torchao FP8, Transformer Engine), the RMS norms, the loss
head and the family-aware presets: registry, requirements and proof, without a GPU."""
import pytest

from bench_core.config.bench_config import ConfigError
from bench_core.levers.presets import PRESETS, family_errors, preset
from bench_core.levers.registry import LEVERS, twin
from bench_core.levers.stage import Stage
from bench_core.machine.probe import Probe
from bench_core.measure.proof import KEY_KERNELS, classify, verdict
from bench_core.models.families import NormType

H200 = {"cuda": {"available": True, "device_count": 1, "capability": [9, 0]}, "bf16": {"cuda": True},
        "adam_fused": {"cuda": True}, "compile": {"cuda": {"usable": True}},
        "apex": {"status": "genuine", "extensions": {
            "amp_C": {"found": True, "loadable": True, "smoke": {"ok": True}},
            "fused_layer_norm_cuda": {"found": True, "loadable": True, "smoke": {"ok": True}, "rms": True}}},
        "packages": {"liger_kernel": {"version": "0.8.5", "importable": True},
                     "torchao": {"version": "0.18.0", "importable": True},
                     "transformer_engine": {"version": None, "importable": False, "error": "not installed"}}}


def probe(**changes):
    return Probe.from_dict({**H200, **changes})


def test_llama_seed_is_the_seed_ladder_with_rms_norms():
    assert [s.key for s in PRESETS["llama-seed"]] == [
        "adam+rmsnorm+fp32", "apex-fusedadam+rmsnorm+fp32", "apex-fusedadam+apex-fusedrms+fp32",
        "apex-fusedadam+apex-fusedrms+bf16"]
    assert preset("seed", "llama") == preset("llama-seed", "llama")  # any preset takes the family's twins
    with pytest.raises(ConfigError) as info:
        preset("llama-seed", "gpt")
    assert info.value.field == "preset" and "llama family" in str(info.value)


def test_peers_put_each_alternative_against_native_bf16():
    keys = [s.key for s in preset("peers", "gpt")]
    assert keys[0] == "adam-fused+layernorm+bf16"                       # the speedup baseline
    assert {"adam-fused+layernorm+bf16+compile", "apex-fusedadam+apex-fusedln+bf16", "adam-fused+liger-ln+bf16",
            "adam-fused+liger-ln+bf16+liger-flce", "adam-fused+layernorm+fp8-torchao",
            "adam-fused+layernorm+te-fp8"} <= set(keys)
    llama = [s.key for s in preset("peers", "llama")]
    assert "adam-fused+liger-rms+bf16" in llama and "apex-fusedadam+apex-fusedrms+bf16" in llama
    assert not any("layernorm" in k or "-ln" in k for k in llama)


def test_a_norm_of_the_other_family_is_refused_with_its_twin_named():
    errors = family_errors([Stage("adam", "rmsnorm"), Stage("adam", "layernorm")], "gpt")
    assert len(errors) == 1 and errors[0].field == "norm"
    assert "valid only for the llama family" in str(errors[0]) and "use layernorm" in str(errors[0])
    assert "valid only for the gpt family" in Stage(norm="liger-ln").family_error("llama")
    for lever in LEVERS.values():  # every norm has a twin of the other type, from the same source
        if lever.kind == "norm":
            other = NormType.RMSNORM if lever.part_type == NormType.LAYERNORM else NormType.LAYERNORM
            pair = twin(lever, other)
            assert pair is not None and pair.vendor == lever.vendor and twin(pair, lever.part_type) is lever


def test_new_levers_run_on_a_capable_gpu_and_say_why_not_elsewhere():
    good = probe()
    for stage in (Stage("adam-fused", "liger-rms", "bf16", head="liger-flce"), Stage("adam-fused", "liger-ln"),
                  Stage("adam-fused", "layernorm", "fp8-torchao"), Stage("apex-fusedadam", "apex-fusedrms", "bf16")):
        assert stage.unavailable_reason(good, "cuda") is None, stage.key
        assert stage.unavailable_reason(good, "cpu"), stage.key  # CPU: each says why
    assert "Liger-Kernel (Triton) needs a CUDA device" == Stage(norm="liger-ln").unavailable_reason(good, "cpu")
    assert "compute capability >= 8.9" in Stage(precision="fp8-torchao").unavailable_reason(
        probe(cuda={**H200["cuda"], "capability": [8, 0]}), "cuda")
    te = Stage("adam-fused", "layernorm", "te-fp8").unavailable_reason(good, "cuda")
    assert te == "Transformer Engine (see docs/APEX.md: Transformer Engine): not installed"
    broken = probe(packages={**H200["packages"], "torchao": {"importable": False,
                                                             "error": "import torchao.float8 failed: X"}})
    assert Stage(precision="fp8-torchao").unavailable_reason(broken, "cuda").endswith("import torchao.float8 failed: X")
    old_apex = probe(apex={**H200["apex"], "extensions": {**H200["apex"]["extensions"], "fused_layer_norm_cuda": {
        "found": True, "loadable": True, "smoke": {"ok": True}, "rms": False}}})
    assert "rms_forward_affine" in Stage(norm="apex-fusedrms").unavailable_reason(old_apex, "cuda")
    assert "not probed" in Stage(norm="liger-rms").unavailable_reason(Probe.from_dict({**H200, "packages": None}),
                                                                      "cuda")


# Kernel names as the libraries define them: Liger's Triton functions (liger_kernel/ops/*.py, 0.8.5), Apex's
# RMSNorm kernel (csrc/layer_norm_cuda_kernel.cu), torch's op names.
RECORDED = {
    "liger_layernorm": ["_layer_norm_forward_kernel", "_layer_norm_backward_kernel"],
    "liger_rmsnorm": ["_rms_norm_forward_kernel", "_block_rms_norm_backward_kernel"],
    "liger_flce": ["liger_cross_entropy_kernel"],
    "apex_rmsnorm": ["void cuApplyRMSNorm<float, float, float>(float*, float*, float const*, int, int, float, "
                     "float const*)"],
    "aten_rms_norm": ["aten::_fused_rms_norm", "aten::rms_norm"],
    "fp8_gemm": ["aten::_scaled_mm", "sm90_xmma_gemm_e4m3e4m3_e4m3f32_f32_tn_n_tilesize128x128x64"],
}


@pytest.mark.parametrize("key", sorted(RECORDED))
def test_new_key_kernels_match_their_names_and_nothing_else(key):
    for name in RECORDED[key]:
        hits = {k for k, found in classify([name]).items() if found}
        assert key in hits, (name, hits)
    for other, names in RECORDED.items():
        if other != key:
            assert not any(KEY_KERNELS[key].match(n) for n in names), (key, other)


def test_a_liger_stage_without_its_kernels_is_a_fallback():
    stage = Stage("adam-fused", "liger-rms", "bf16", head="liger-flce")
    seen = {"aten_fused_adam": ["x"], "gemm_bf16": ["gemm:bfloat16"], "liger_rmsnorm": ["_rms_norm_forward_kernel"],
            "liger_flce": ["liger_cross_entropy_kernel"]}
    assert verdict(stage, "cuda", seen)[0] == "verified"
    state, warnings = verdict(stage, "cuda", {**seen, "liger_flce": [], "aten_rms_norm": ["aten::rms_norm"]})
    assert state == "fallback"
    assert any("Liger fused linear CE fell back" in w for w in warnings)
    assert any("Liger RMSNorm fell back" in w and "aten::_fused_rms_norm" in w for w in warnings)
    fp8 = Stage("adam-fused", "layernorm", "fp8-torchao")
    assert verdict(fp8, "cuda", {"aten_fused_adam": ["x"], "aten_native_layer_norm": ["x"]})[0] == "fallback"


def test_gemm_dtype_is_read_from_the_operand_not_the_addend():
    """On the H200 the FLCE stage was judged 'unconfirmed: the trace also shows FP32 GEMM' when the dtype was read
    from addmm's first input, which is the fp32 accumulator Liger adds its bf16 products into."""
    from bench_core.measure.proof import gemm_operand_dtype
    assert gemm_operand_dtype("aten::addmm", ["float", "c10::BFloat16", "c10::BFloat16"]) == "c10::BFloat16"
    assert gemm_operand_dtype("aten::mm", ["float", "float"]) == "float"
    assert gemm_operand_dtype("aten::baddbmm", ["c10::Half", "c10::Half", "c10::Half"]) == "c10::Half"
    assert gemm_operand_dtype("aten::add", ["float"]) is None
    assert gemm_operand_dtype("aten::addmm", ["float"]) is None  # too few inputs recorded: no guess
