from functools import partial

import pytest
import torch

from bench_core.levers.lever_types import (
    CompileLever,
    GpusLever,
    HeadLever,
    MlpLever,
    NormLever,
    OptimizerLever,
    PrecisionLever,
)
from bench_core.levers.presets import PRESETS
from bench_core.levers.registry import KINDS, LEVERS
from bench_core.levers.stage import Stage
from bench_core.machine.probe import Probe
from bench_core.measure.proof import KEY_KERNELS, Facts, classify, gemm_pseudo_names, verdict


def params():
    return [torch.nn.Parameter(torch.randn(4, 4))]


def test_every_lever_kind_is_registered_with_its_own_class():
    assert {lever.kind for lever in LEVERS.values()} == set(KINDS)
    classes = {"optimizer": OptimizerLever, "norm": NormLever, "precision": PrecisionLever,
               "compile": CompileLever, "gpus": GpusLever, "head": HeadLever, "mlp": MlpLever}
    for lever in LEVERS.values():
        assert type(lever) is classes[lever.kind], lever.name


def test_every_kind_has_a_typed_name_and_lever_on_a_stage():
    # each kind reads as a str (its lever's name) and as its Lever, by an attribute Stage declares: no magic lookup
    classes = {"optimizer": OptimizerLever, "norm": NormLever, "precision": PrecisionLever,
               "compile": CompileLever, "gpus": GpusLever, "head": HeadLever, "mlp": MlpLever}
    stage = Stage()
    for kind in KINDS:
        assert isinstance(Stage.__dict__.get(kind), property), f"Stage declares no {kind} property"
        assert isinstance(Stage.__dict__.get(f"{kind}_lever"), property), f"Stage declares no {kind}_lever property"
        assert getattr(stage, kind) == stage.name_of(kind) == stage.lever(kind).name
        assert type(getattr(stage, f"{kind}_lever")) is classes[kind]
    with pytest.raises(AttributeError):
        stage.no_such_kind  # noqa: B018
    with pytest.raises(KeyError, match="no lever kind"):
        stage.name_of("no_such_kind")


def test_optimizer_builds():
    adam = LEVERS["adam"].build(params())
    assert type(adam) is torch.optim.Adam and adam.defaults["foreach"] is None and not adam.defaults["fused"]
    assert not adam.defaults["capturable"]
    assert LEVERS["adam-loop"].build(params()).defaults["foreach"] is False
    assert LEVERS["adam-fused"].build(params()).defaults["fused"] is True
    # a graphs stage builds its optimizer capturable; the stage's Stage levers say which kinds can be
    assert LEVERS["adam-fused"].build(params(), capturable=True).defaults["capturable"] is True
    assert Stage("adam-fused").optimizer_lever is LEVERS["adam-fused"]


def test_apex_optimizer_build_needs_apex():
    try:
        import apex.optimizers  # noqa: F401
        pytest.skip("apex installed here")
    except ImportError:
        with pytest.raises(ImportError):
            LEVERS["apex-fusedadam"].build(params())


def test_norm_builds():
    assert LEVERS["layernorm"].build() is torch.nn.LayerNorm
    assert Stage().norm_lever.build() is torch.nn.LayerNorm


@pytest.mark.parametrize("name,dtype,tf32,scaler", [("fp32", None, False, False), ("tf32", None, True, False),
                                                   ("bf16", "bfloat16", False, False),
                                                   ("fp16", "float16", False, True)])
def test_precision_plans(name, dtype, tf32, scaler):
    plan = LEVERS[name].build()
    assert (plan.autocast_dtype, plan.tf32, plan.grad_scaler) == (dtype, tf32, scaler)
    assert Stage(precision=name).precision_lever.build() == plan


def test_compile_lever_wraps_the_model_and_eager_does_not():
    from torch._dynamo.eval_frame import OptimizedModule
    model = torch.nn.Linear(2, 2)
    compiled = LEVERS["compile"].build(model)
    assert isinstance(compiled, OptimizedModule) and compiled._orig_mod is model
    assert LEVERS["eager"].build(model) is model
    # graphs: the model stays as it is; the worker captures the whole step after warm-up
    assert LEVERS["graphs"].build(model) is model and LEVERS["graphs"].captures_graph
    assert not LEVERS["compile"].captures_graph and not LEVERS["eager"].captures_graph
    assert Stage(compile="compile").compile_lever.mode == "compile"


def test_gpus_lever_builds_its_world_size():
    assert [LEVERS[n].build() for n in ("1", "2", "4", "8")] == [1, 2, 4, 8]
    assert Stage(gpus=2).world_size == 2 and Stage(gpus="2").gpus == "2"


def test_presets():
    assert [s.key for s in PRESETS["seed"]] == [
        "adam+layernorm+fp32", "apex-fusedadam+layernorm+fp32",
        "apex-fusedadam+apex-fusedln+fp32", "apex-fusedadam+apex-fusedln+bf16"]
    assert [s.key for s in PRESETS["native"]] == [
        "adam+layernorm+fp32", "adam-fused+layernorm+fp32", "adam-fused+layernorm+bf16",
        "adam-fused+layernorm+bf16+compile", "adam-fused+layernorm+bf16+graphs"]
    assert set(PRESETS["seed"]) | set(PRESETS["native"]) <= set(PRESETS["all"])
    assert len(set(PRESETS["all"])) == len(PRESETS["all"])


def test_stage_snippets_show_the_change():
    assert "FusedAdam" in Stage("apex-fusedadam").snippet()
    assert "torch.compile" in Stage("adam-fused", "layernorm", "bf16", "compile").snippet()
    assert "CUDAGraph" in Stage("adam-fused", "layernorm", "bf16", "graphs").snippet()
    assert "GradScaler" in Stage(precision="fp16").snippet()
    assert "baseline" in Stage().snippet()
    assert "baseline" in Stage.from_key("adam+rmsnorm+fp32").snippet()   # a Llama's own baseline


def _line_of(lines: list[str], text: str) -> int:
    return next(i for i, line in enumerate(lines) if text in line)


def test_a_recipe_is_code_in_the_order_it_must_run():
    """Conversions and the compile before the optimizer takes the parameters; the forward inside the precision's
    context and, with CUDA graphs, inside the capture; every snippet still valid Python."""
    import ast
    for key in ("adam-fused+rmsnorm+fp8-torchao+compile+liger-flce", "adam-fused+layernorm+bf16+graphs",
                "adam+layernorm+fp16", "apex-fusedadam+apex-fusedln+bf16", "adam+layernorm+fp32+liger-flce"):
        code = Stage.from_key(key).snippet()
        ast.parse(code)   # a syntax error (a placeholder left, a bad indent) fails here
        lines = code.splitlines()
        at = partial(_line_of, lines)
        if "compile" in key.split("+"):
            assert at("convert_to_float8_training(") < at("torch.compile") < at("opt = ")
        if "liger-flce" in key:
            assert at("hidden = ") < at("loss = flce(") and "logits, loss" not in code
        if "graphs" in key:
            assert at("torch.cuda.graph(g)") < at("torch.autocast") < at("loss.backward()") < at("g.replay()")
            assert lines[at("logits, loss")].startswith(" " * 8)
        if "fp16" in key:
            assert at("GradScaler(") < at("torch.autocast") < at("scaler.scale(")
        if "+rmsnorm+" in key:   # a Llama's own norm is its architecture, not a change
            assert "RMSNorm(" not in code


CPU_PROBE = Probe.from_dict({"apex": {"status": "missing"}, "adam_fused": {"cpu": True},
                             "bf16": {"cpu": True}, "compile": {"cpu": {"usable": True}}})
NO_APEX = {"cuda": {"available": True, "device_count": 1}, "apex": {"status": "missing"},
           "adam_fused": {"cpu": True, "cuda": True}, "bf16": {"cpu": True, "cuda": False},
           "compile": {"cuda": {"usable": True}}}
GOOD_EXTENSIONS = {"amp_C": {"found": True, "loadable": True, "smoke": {"ok": True}},
                   "fused_layer_norm_cuda": {"found": True, "loadable": True, "smoke": {"ok": True}}}
GOOD_APEX = {**NO_APEX, "apex": {"status": "genuine", "extensions": GOOD_EXTENSIONS}}


def apex(**state):
    return Probe.from_dict({**NO_APEX, "apex": state})


def test_apex_absent_is_judged_from_the_probe():
    """The tool, not the test: Stage.unavailable_reason reads Probe.apex_reason for each Apex lever."""
    fused_adam, fused_ln = Stage("apex-fusedadam"), Stage(norm="apex-fusedln")
    missing = apex(status="missing")
    assert fused_adam.unavailable_reason(missing, "cuda") == "NVIDIA apex is not installed"
    assert fused_ln.unavailable_reason(missing, "cuda") == "NVIDIA apex is not installed"
    impostor = apex(status="impostor", distribution={"name": "apex", "version": "0.9.10dev"})
    assert fused_adam.unavailable_reason(impostor, "cuda") == "not NVIDIA apex (found 'apex' 0.9.10dev)"
    no_amp = apex(status="genuine", extensions={**GOOD_EXTENSIONS, "amp_C": {"found": False}})
    assert fused_adam.unavailable_reason(no_amp, "cuda") == \
        "apex amp_C extension not built (FusedAdam needs --cuda_ext)"
    assert fused_ln.unavailable_reason(no_amp, "cuda") is None  # its own extension is fine
    no_ln = apex(status="genuine", extensions={"amp_C": GOOD_EXTENSIONS["amp_C"]})  # not even listed
    assert fused_ln.unavailable_reason(no_ln, "cuda") == \
        "apex fused_layer_norm_cuda extension not built (FusedLayerNorm needs --cuda_ext)"
    undefined = "ImportError: undefined symbol: _ZN3c10"
    broken = apex(status="genuine", extensions={
        **GOOD_EXTENSIONS, "amp_C": {"found": True, "loadable": False, "error": undefined}})
    assert fused_adam.unavailable_reason(broken, "cuda") == \
        "apex amp_C extension fails to load: ImportError: undefined symbol: _ZN3c10"
    smoke = apex(status="genuine", extensions={
        **GOOD_EXTENSIONS, "fused_layer_norm_cuda": {"found": True, "loadable": True,
                                                     "smoke": {"ok": False, "error": "no kernel image"}}})
    assert fused_ln.unavailable_reason(smoke, "cuda") == \
        "apex fused_layer_norm_cuda failed its smoke test on this GPU: no kernel image"
    good = Probe.from_dict(GOOD_APEX)
    assert good.apex_healthy and not missing.apex_healthy and not smoke.apex_healthy
    assert fused_adam.unavailable_reason(good, "cuda") is None and fused_ln.unavailable_reason(good, "cuda") is None


def test_unavailability_reasons_are_specific():
    seed = PRESETS["seed"]
    good = Probe.from_dict(GOOD_APEX)
    assert seed[3].unavailable_reason(good, "cuda") == "bf16 autocast not supported on this GPU"
    assert seed[2].unavailable_reason(good, "cpu").startswith("Apex FusedAdam runs CUDA kernels only")
    compiled_ln = Stage("adam", "apex-fusedln", "fp32", "compile")
    assert compiled_ln.unavailable_reason(good, "cuda") == \
        "Apex FusedLayerNorm falls back to F.layer_norm under torch.compile"
    assert Stage(norm="apex-fusedln").unavailable_reason(good, "cpu") == \
        "Apex FusedLayerNorm falls back to F.layer_norm on CPU"
    assert seed[2].unavailable_reason(good, "cuda") is None
    assert Stage(precision="tf32").unavailable_reason(good, "cpu") == "TF32 (a tensor-core mode) needs a CUDA device"
    no_fused = Probe.from_dict({**GOOD_APEX, "torch": "2.13.0", "adam_fused": {"cuda": False}})
    assert Stage("adam-fused").unavailable_reason(no_fused, "cuda") == \
        "torch.optim.Adam(fused=True) is not supported on cuda in torch 2.13.0"
    no_compile = Probe.from_dict({**GOOD_APEX, "compile": {"cuda": {"usable": False, "reason": "triton is not "
                                                                                               "installed"}}})
    assert Stage(compile="compile").unavailable_reason(no_compile, "cuda") == \
        "torch.compile not usable on cuda: triton is not installed"


def test_graphs_stage_needs_a_gpu_and_a_capturable_step():
    good = Probe.from_dict({**GOOD_APEX, "bf16": {"cuda": True}, "fp16": {"cuda": True}})
    graphs = PRESETS["native"][-1]
    assert graphs.unavailable_reason(CPU_PROBE, "cpu") == "CUDA graphs capture GPU work: needs a CUDA device"
    assert graphs.unavailable_reason(good, "cuda") is None
    assert Stage("adam-fused", precision="fp16", compile="graphs").unavailable_reason(good, "cuda") == \
        "GradScaler's inf checks sync with the host: FP16 + GradScaler cannot be captured in one graph"
    assert Stage("adam-loop", compile="graphs").unavailable_reason(good, "cuda") == \
        "Adam (for-loop) has no capturable mode for CUDA graphs"
    two = Probe.from_dict({**GOOD_APEX, "cuda": {"available": True, "device_count": 2}})
    assert Stage("adam-fused", compile="graphs", gpus=2).unavailable_reason(two, "cuda") == \
        "the graphs stage captures one process's step: gpus must be 1"


def test_fallback_is_never_counted_as_apex():
    stage = Stage("apex-fusedadam", "apex-fusedln", "fp32")
    fp32 = gemm_pseudo_names(["float"], tf32=False)
    honest = classify(["void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float>, float>",
                       "apex::fused_layer_norm_affine_fwd", "void cuApplyLayerNorm<float, float, float>", *fp32])
    assert verdict(stage, "cuda", honest) == ("verified", [])
    fallback = classify(["void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float>, float>",
                         "aten::native_layer_norm", *fp32])
    state, warnings = verdict(stage, "cuda", fallback)
    assert state == "fallback" and "Apex FusedLayerNorm fell back to PyTorch" in warnings[0]
    assert "aten::native_layer_norm" in warnings[0]
    # the right kernels but the wrong class built: still a fallback
    state, warnings = verdict(stage, "cuda", honest, Facts(optimizer_class="torch.optim.adam.Adam"))
    assert state == "fallback"
    assert warnings == ["Apex FusedAdam fell back to PyTorch: the worker built torch.optim.adam.Adam, not "
                        "apex.optimizers.fused_adam.FusedAdam"]


def test_precision_is_proven_by_the_gemm_dtype():
    bf16 = Stage("adam", "layernorm", "bf16")
    base = ["aten::native_layer_norm"]
    assert verdict(bf16, "cpu", classify(base + sorted(gemm_pseudo_names(["c10::BFloat16"], False))))[0] == "verified"
    state, warnings = verdict(bf16, "cpu", classify(base + sorted(gemm_pseudo_names(["float"], False))))
    assert state == "unconfirmed" and "expected BF16 GEMM but the trace did not show it" in warnings[0]
    assert gemm_pseudo_names(["float"], tf32=True) == {"gemm:float+tf32"}
    assert classify(["gemm:float+tf32"])["gemm_tf32"] and not classify(["gemm:float+tf32"])["gemm_fp32"]
    # a switch the stage did not ask for is reported, even with the right kernels
    fp32 = Stage()
    state, warnings = verdict(fp32, "cpu", classify(base + ["gemm:float"]), Facts(tf32_matmul=True))
    assert state == "unconfirmed" and warnings == ["TF32 matmul was on, the stage asked for off"]


def test_torch_multi_tensor_kernels_are_not_mistaken_for_apex():
    seen = classify(["void at::native::(anonymous namespace)::multi_tensor_apply_kernel<"
                     "at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4>>", "aten::_fused_adam_"])
    assert not seen["apex_adam"] and seen["aten_fused_adam"]
    assert {"gemm_fp32", "gemm_tf32", "gemm_bf16", "gemm_fp16", "triton", "compiled_region",
            "graph_launch"} <= set(KEY_KERNELS)


# ---------------------------------------------------------------- the mlp kind: registry entries only
def test_the_mlp_kind_is_derived_everywhere_from_the_registry():
    from bench_core.measure.proof import kernel_cells
    from bench_core.results.file_columns import CSV_COLUMNS
    stage = Stage("adam-fused", "rmsnorm", "bf16", mlp="liger-swiglu")
    assert "mlp" in KINDS and "mlp" in CSV_COLUMNS and stage.as_dict()["mlp"] == stage.mlp == "liger-swiglu"
    assert stage.key == "adam-fused+rmsnorm+bf16+liger-swiglu"       # a non-baseline MLP is named in the key
    assert Stage("adam-fused", "rmsnorm", "bf16", mlp="swiglu").key == "adam-fused+rmsnorm+bf16"  # the native: not
    assert stage.native_twin() == Stage("adam-fused", "rmsnorm", "bf16", mlp="swiglu")
    assert stage.vendors == "Liger-Kernel"
    assert {"liger_swiglu", "aten_silu"} <= set(KEY_KERNELS)           # the kernel grid's columns
    assert "liger_swiglu" in kernel_cells(stage, "ok", "", {"liger_swiglu": ["_swiglu_forward_kernel"]}, "verified",
                                          "cuda", None)


def test_liger_swiglu_is_unavailable_on_cpu_and_refused_for_gpt():
    from bench_core.levers.presets import preset
    stage = Stage("adam-fused", "rmsnorm", "bf16", mlp="liger-swiglu")
    assert stage.unavailable_reason(CPU_PROBE, "cpu") == "Liger-Kernel (Triton) needs a CUDA device"
    assert "valid only for the llama family" in stage.replace(norm="layernorm").family_error("gpt")
    assert stage.family_error("llama") is None
    assert stage in preset("peers", "llama")
    assert not any(s.mlp == "liger-swiglu" for s in preset("peers", "gpt"))   # no Liger GELU MLP: left out


def test_liger_swiglu_is_proven_by_its_kernel_and_betrayed_by_torch_silu():
    stage = Stage("adam-fused", "rmsnorm", "bf16", mlp="liger-swiglu")
    seen = classify({"_swiglu_forward_kernel", "_swiglu_backward_kernel", "gemm:bfloat16", "aten::_fused_adam_",
                     "aten::_fused_rms_norm"})
    assert verdict(stage, "cuda", seen)[0] == "verified"
    fell_back = classify({"aten::silu", "aten::silu_backward", "gemm:bfloat16", "aten::_fused_adam_",
                          "aten::_fused_rms_norm"})
    state, warnings = verdict(stage, "cuda", fell_back)
    assert state == "fallback" and "aten::silu" in warnings[0]
    native = Stage("adam-fused", "rmsnorm", "bf16", mlp="swiglu")
    assert "aten_silu" in LEVERS["swiglu"].expected("cuda", native)
    assert "aten_silu" not in LEVERS["swiglu"].expected("cuda", native.replace(compile="compile"))


def test_liger_swiglu_draws_the_native_swiglu_weights():
    pytest.importorskip("liger_kernel.transformers")
    from bench_core.config.bench_config import WORKLOADS, BenchConfig
    from bench_core.models.families import ModelParts, build_model
    cfg = BenchConfig(**WORKLOADS["llama-tiny"])  # type: ignore[arg-type]
    built = {}
    for name in ("swiglu", "liger-swiglu"):
        torch.manual_seed(0)
        built[name] = build_model(cfg, ModelParts({"mlp": LEVERS[name].build()}))
    native, liger = (dict(m.named_parameters()) for m in built.values())
    for i in range(cfg.depth):
        for ours, theirs in (("gate", "gate_proj"), ("up", "up_proj"), ("proj", "down_proj")):
            assert torch.equal(native[f"blocks.{i}.mlp.{ours}.weight"], liger[f"blocks.{i}.mlp.{theirs}.weight"])
    assert torch.equal(native["lm_head.weight"], liger["lm_head.weight"])


def test_a_stage_asks_the_probe_for_each_package_its_levers_import():
    """A vendor may ship several packages; a lever names those it imports (else its vendor's), and the probe the
    stage asks for checks exactly those, and every vendor's package is in the probe's list."""
    from bench_core.levers.registry import KERNEL_PACKAGES, LEVERS, VENDORS
    assert {p for v in VENDORS for p in v.packages} <= set(KERNEL_PACKAGES)
    for name, lever in LEVERS.items():
        assert set(lever.packages) <= set(lever.vendor.packages if lever.vendor else ()), name
        stage = Stage(**{lever.kind: name}) if lever.kind != "gpus" else Stage()
        assert set(lever.packages) <= set(stage.packages), name
    assert LEVERS["fp8-torchao"].packages == tuple(p for p in KERNEL_PACKAGES if p.module == "torchao.float8")
