import torch
import pytest

from bench_core.kernels import classify, verdict
from bench_core.levers import KINDS, LEVERS, PRESETS, Stage


def params():
    return [torch.nn.Parameter(torch.randn(4, 4))]


def test_every_lever_kind_is_registered():
    assert {lever.kind for lever in LEVERS.values()} == set(KINDS)


def test_optimizer_builds():
    adam = LEVERS["adam"].build(params())
    assert type(adam) is torch.optim.Adam and adam.defaults["foreach"] is None and not adam.defaults["fused"]
    assert LEVERS["adam-loop"].build(params()).defaults["foreach"] is False
    assert LEVERS["adam-fused"].build(params()).defaults["fused"] is True


def test_apex_optimizer_build_needs_apex():
    pytest.importorskip("torch")
    try:
        import apex.optimizers  # noqa: F401
        pytest.skip("apex installed here")
    except ImportError:
        with pytest.raises(ImportError):
            LEVERS["apex-fusedadam"].build(params())


def test_norm_builds():
    assert LEVERS["layernorm"].build() is torch.nn.LayerNorm


@pytest.mark.parametrize("name,dtype,tf32,scaler", [("fp32", None, False, False), ("tf32", None, True, False),
                                                   ("bf16", "bfloat16", False, False),
                                                   ("fp16", "float16", False, True)])
def test_precision_plans(name, dtype, tf32, scaler):
    plan = LEVERS[name].build()
    assert (plan.autocast_dtype, plan.tf32, plan.grad_scaler) == (dtype, tf32, scaler)


def test_compile_lever_wraps_model():
    model = torch.nn.Linear(2, 2)
    assert LEVERS["eager"].build(model) is model
    assert LEVERS["compile"].build(model) is not model


def test_seed_preset_is_the_article_ladder():
    assert [s.key for s in PRESETS["seed"]] == [
        "adam+layernorm+fp32", "apex-fusedadam+layernorm+fp32",
        "apex-fusedadam+apex-fusedln+fp32", "apex-fusedadam+apex-fusedln+bf16"]
    assert [s.key for s in PRESETS["native"]][-1] == "adam-fused+layernorm+bf16+compile"
    assert set(PRESETS["seed"]) | set(PRESETS["native"]) <= set(PRESETS["all"])


def test_stage_snippets_show_the_change():
    assert "FusedAdam" in Stage("apex-fusedadam").snippet()
    assert "torch.compile" in Stage("adam-fused", "layernorm", "bf16", "compile").snippet()
    assert "GradScaler" in Stage(precision="fp16").snippet()
    assert "baseline" in Stage().snippet()


NO_APEX = {"apex": {"status": "missing"}, "adam_fused": {"cpu": True, "cuda": True},
           "bf16": {"cpu": True, "cuda": False}, "compile": {"cuda": {"usable": True}}}
GOOD_APEX = {**NO_APEX, "apex": {"status": "genuine", "extensions": {
    "amp_C": {"found": True, "loadable": True, "smoke": {"ok": True}},
    "fused_layer_norm_cuda": {"found": True, "loadable": True, "smoke": {"ok": True}}}}}


def test_unavailability_reasons_are_specific():
    seed = PRESETS["seed"]
    assert seed[1].unavailable_reason(NO_APEX, "cuda") == "NVIDIA apex is not installed"
    impostor = {**NO_APEX, "apex": {"status": "impostor", "distribution": {"name": "apex", "version": "0.9.10dev"}}}
    assert seed[1].unavailable_reason(impostor, "cuda") == "not NVIDIA apex (found 'apex' 0.9.10dev)"
    python_only = {**NO_APEX, "apex": {"status": "genuine", "extensions": {"amp_C": {"found": False}}}}
    assert seed[1].unavailable_reason(python_only, "cuda").startswith("apex amp_C extension not built")
    broken = {**GOOD_APEX, "apex": {"status": "genuine", "extensions": {
        "amp_C": {"found": True, "loadable": False, "error": "ImportError: undefined symbol: _ZN3c10"}}}}
    assert "fails to load: ImportError: undefined symbol" in seed[1].unavailable_reason(broken, "cuda")
    assert seed[3].unavailable_reason(GOOD_APEX, "cuda") == "bf16 autocast not supported on this GPU"
    assert seed[2].unavailable_reason(GOOD_APEX, "cpu").startswith("Apex FusedAdam runs CUDA kernels only")
    compiled_ln = Stage("adam", "apex-fusedln", "fp32", "compile")
    assert compiled_ln.unavailable_reason(GOOD_APEX, "cuda") == \
        "Apex FusedLayerNorm falls back to F.layer_norm under torch.compile"
    assert Stage(norm="apex-fusedln").unavailable_reason(GOOD_APEX, "cpu") == \
        "Apex FusedLayerNorm falls back to F.layer_norm on CPU"
    assert seed[2].unavailable_reason(GOOD_APEX, "cuda") is None
    assert Stage(precision="tf32").unavailable_reason(GOOD_APEX, "cpu") == "TF32 (a tensor-core mode) needs a CUDA device"


def test_fallback_is_never_counted_as_apex():
    stage = Stage("apex-fusedadam", "apex-fusedln", "fp32")
    honest = classify(["void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float>, float>",
                       "apex::fused_layer_norm_affine_fwd", "void cuApplyLayerNorm<float, float, float>"])
    assert verdict(stage, "cuda", honest) == ("verified", [])
    fallback = classify(["void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float>, float>",
                         "aten::native_layer_norm"])
    state, warnings = verdict(stage, "cuda", fallback)
    assert state == "fallback" and "Apex FusedLN fell back to PyTorch" in warnings[0]
    assert "aten::native_layer_norm" in warnings[0]


def test_torch_multi_tensor_kernels_are_not_mistaken_for_apex():
    seen = classify(["void at::native::(anonymous namespace)::multi_tensor_apply_kernel<"
                     "at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4>>", "aten::_fused_adam_"])
    assert not seen["apex_adam"] and seen["aten_fused_adam"]
