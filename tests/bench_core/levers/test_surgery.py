"""Each lever's surgery on Hugging Face models built from tiny configs (nothing downloaded): the norm swap with a
stand-in class registered as Apex's is (Apex is not installed here), Liger's refusal and its counts, float8's filter
counts and GPT-2's Conv1D, and how the proof reads what a lever changed."""
from __future__ import annotations

import pytest
import torch

from bench_core.levers import builders
from bench_core.levers.changes import LeverChange, SurgeryReport, Swap
from bench_core.levers.registry import LEVERS
from bench_core.levers.stage import Stage
from bench_core.levers.surgery import (
    FP32_UNIT_ROUNDOFF,
    Float8Convert,
    LigerEntryPoint,
    NormSwap,
    apply_levers,
    apply_liger,
    convert_float8,
    liger_entry,
    norm_swap_bound,
    swap_norms,
)
from bench_core.measure.proof import Facts, Verdict, lever_verdict
from bench_core.models.families import NormType
from helpers import tiny_hf

transformers = pytest.importorskip("transformers")
DEPTH = 2


def hf_model(kind: str, **over):
    return tiny_hf(kind, depth=DEPTH, **over)


class StandInRMSNorm(torch.nn.Module):
    """Built as Apex's FusedRMSNorm is (normalized_shape, eps, elementwise_affine), computed another way."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(normalized_shape))

    def forward(self, x):
        return self.weight * (x / torch.sqrt(x.pow(2).sum(-1, keepdim=True) / x.shape[-1] + self.eps))


class StandInLayerNorm(torch.nn.Module):
    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(normalized_shape))
        self.bias = torch.nn.Parameter(torch.zeros(normalized_shape))

    def forward(self, x):
        centred = x - x.mean(-1, keepdim=True)
        return centred / torch.sqrt(centred.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight + self.bias


def _batch(model):
    gen = torch.Generator().manual_seed(3)
    idx = torch.randint(0, 256, (2, 16), generator=gen)
    return idx, torch.roll(idx, -1, 1)


# ---------------------------------------------------------------- norm swap
@pytest.mark.parametrize("kind, source, cls", [("llama", NormType.RMSNORM, StandInRMSNorm),
                                               ("gpt2", NormType.LAYERNORM, StandInLayerNorm)])
def test_norm_swap_replaces_every_norm_reusing_its_parameters(kind, source, cls):
    model = hf_model(kind)
    idx, y = _batch(model)
    model.eval()
    with torch.no_grad():
        before = model(idx, y)[1]
    weights = {id(m.weight) for m in model.modules() if type(m).__name__.endswith(("RMSNorm", "LayerNorm"))}
    change = swap_norms(model, "apex", NormSwap(source, lambda: cls), torch)
    assert change.unavailable is None and change.changed
    assert sum(s.count for s in change.swaps) == 2 * DEPTH + 1 == sum(isinstance(m, cls) for m in model.modules())
    assert {id(m.weight) for m in model.modules() if isinstance(m, cls)} == weights   # the same Parameters
    with torch.no_grad():
        after = model(idx, y)[1]
    assert after.item() == pytest.approx(before.item(), rel=1e-5)


def test_norm_swap_probes_on_the_cpu_inside_another_devices_context():
    """The worker builds and swaps under `with torch.device("cuda")`: the probe input must still come from its CPU
    generator on the CPU (on the GPU it failed: "Expected a 'cuda' device type for generator"). A meta context
    stands in for CUDA here: a probe drawn there has no data to copy back to the CPU model."""
    model = hf_model("llama")
    with torch.device("meta"):
        change = swap_norms(model, "apex", NormSwap(NormType.RMSNORM, lambda: StandInRMSNorm), torch)
    assert change.unavailable is None and change.changed, change


def test_norm_swap_refuses_a_norm_that_is_another_function():
    """Gemma's RMSNorm scales by (1 + weight): Apex's FusedRMSNorm with the same weight is not that function, and
    the probe check must say so before the run starts, not after."""
    model = hf_model("gemma")
    change = swap_norms(model, "apex-fusedrms", NormSwap(NormType.RMSNORM, lambda: StandInRMSNorm), torch)
    assert change.unavailable and "GemmaRMSNorm" in change.unavailable and "not the same function" in change.unavailable
    assert not any(isinstance(m, StandInRMSNorm) for m in model.modules())


def test_norm_swap_without_apex_is_unavailable():
    try:
        import apex  # noqa: F401
        pytest.skip("Apex is installed here")
    except ImportError:
        pass
    change = swap_norms(hf_model("llama"), "apex-fusedrms", NormSwap(NormType.RMSNORM, builders.apex_fused_rms),
                        torch)
    assert change.unavailable and change.unavailable.startswith("Apex not installed")


def test_the_norm_bound_admits_rounding_and_rejects_a_changed_eps():
    """The bound is the float32 worst case: torch's RMSNorm and Hugging Face's compute the same function and stay
    within it; an eps of 1e-2 instead of 1e-6 changes the function by ~0.5% of the output, far beyond it."""
    from transformers.models.llama.modeling_llama import LlamaRMSNorm
    n = 2048
    x = torch.randn(16, n, generator=torch.Generator().manual_seed(0))
    ours, theirs = torch.nn.RMSNorm(n, eps=1e-6), LlamaRMSNorm(n, eps=1e-6)
    bound = norm_swap_bound(x, ours.weight, None, False, torch)
    x_hat = (x / x.pow(2).mean(-1, keepdim=True).sqrt()).abs().max().item()
    assert bound == pytest.approx(2 * (n + 8) * FP32_UNIT_ROUNDOFF * x_hat, rel=1e-6)   # c (n + K) u max|w x_hat|
    assert (ours(x) - theirs(x)).abs().max().item() <= bound
    assert (torch.nn.RMSNorm(n, eps=1e-2)(x) - theirs(x)).abs().max().item() > bound


# ---------------------------------------------------------------- Liger
def test_liger_refuses_a_model_type_it_has_no_kernels_for():
    change = apply_liger(hf_model("gpt2"), "liger-flce", LigerEntryPoint(("fused_linear_cross_entropy",)))
    assert change.unavailable == "Liger has no kernels for model_type gpt2"


def test_liger_entry_point_decision_from_the_model_type_table():
    def apply_to_x(rope=True, rms_norm=True, swiglu=True, fused_linear_cross_entropy=True, model=None):
        pass
    table = {"x": apply_to_x}
    assert liger_entry("gpt2", ("rms_norm",), table) == "Liger has no kernels for model_type gpt2"
    fn, kwargs = liger_entry("x", ("rms_norm",), table)
    assert fn is apply_to_x and kwargs == {"rope": False, "fused_linear_cross_entropy": False, "rms_norm": True,
                                           "swiglu": False}   # every other part off: rope is not silently on
    assert "has no layer_norm" in liger_entry("x", ("layer_norm",), table)


@pytest.mark.parametrize("part, count, source", [("rms_norm", 2 * DEPTH + 1, "LlamaRMSNorm"),
                                                 ("swiglu", DEPTH, "LlamaMLP"),
                                                 ("fused_linear_cross_entropy", 1, "LlamaForCausalLM")])
def test_liger_counts_what_its_entry_point_rebound_and_leaves_the_classes(part, count, source):
    from transformers.models.llama import modeling_llama
    classes = (modeling_llama.LlamaRMSNorm, modeling_llama.LlamaMLP)
    change = apply_liger(hf_model("llama"), f"liger-{part}", LigerEntryPoint((part,)))
    assert change.changed and [(s.source, s.count) for s in change.swaps] == [(source, count)]
    assert change.entry_points == (f"apply_liger_kernel_to_llama({part})",)
    assert (modeling_llama.LlamaRMSNorm, modeling_llama.LlamaMLP) == classes   # models built later are unpatched


# ---------------------------------------------------------------- torchao float8
def test_float8_converts_only_linears_with_dims_divisible_by_16_and_never_the_head():
    pytest.importorskip("torchao.float8")
    model = hf_model("llama", intermediate_size=120)   # gate, up (out 120) and down (in 120) are not divisible
    change = convert_float8(model, "fp8-torchao", Float8Convert(), torch)
    assert (change.converted, change.candidates) == (4 * DEPTH, 7 * DEPTH)
    assert change.not_converted == {"dims not divisible by 16": 3 * DEPTH}
    assert type(model.lm_head).__name__ == "Linear"


def test_gpt2_conv1d_makes_float8_unavailable():
    change = convert_float8(hf_model("gpt2"), "fp8-torchao", Float8Convert(), torch)
    assert change.unavailable == f"0 of {4 * DEPTH} layers convertible: {4 * DEPTH} Conv1D"


def test_apply_levers_stops_at_the_first_lever_that_cannot_act():
    report = apply_levers(hf_model("gpt2"), Stage("adam", "layernorm", "fp8-torchao", head="liger-flce"), torch)
    assert report.unavailable == f"0 of {4 * DEPTH} layers convertible: {4 * DEPTH} Conv1D"
    assert [c.lever for c in report.changes] == ["fp8-torchao"]


def test_build_stage_refuses_a_stage_whose_surgery_cannot_act(monkeypatch):
    from bench_core.config.bench_config import BenchConfig
    from bench_core.levers.surgery import SurgeryUnavailable
    from bench_core.run import step
    from bench_core.run.processes import StageJob
    monkeypatch.setattr(step, "build_model", lambda cfg, parts: hf_model("gpt2"))
    stage = Stage("adam", "layernorm", "fp8-torchao")
    cfg = BenchConfig(depth=DEPTH, width=64, heads=4, seq_len=16, batch_size=2, vocab_size=256, device="cpu")
    with pytest.raises(SurgeryUnavailable, match=rf"^FP8 \(torchao\): 0 of {4 * DEPTH} layers convertible"):
        step.build_stage(StageJob(cfg, stage, "cpu"), stage, torch)


# ---------------------------------------------------------------- applied is not active
def test_a_lever_that_changed_nothing_is_not_verified():
    stage = Stage("adam", "apex-fusedrms", "fp32")
    lever = LEVERS["apex-fusedrms"]
    seen = {"apex_rmsnorm": ["cuApplyRMSNorm"]}
    nothing = SurgeryReport((LeverChange("apex-fusedrms", note="no rmsnorm module in the model"),))
    state, warnings = lever_verdict((lever,), stage, "cuda", seen, Facts(surgery=nothing, own_parts=False))
    assert state == Verdict.FALLBACK and "changed nothing" in warnings[0]
    swapped = SurgeryReport((LeverChange("apex-fusedrms", swaps=(Swap("LlamaRMSNorm", "FusedRMSNorm", 5),)),))
    assert lever_verdict((lever,), stage, "cuda", seen, Facts(surgery=swapped, own_parts=False))[0] == \
        Verdict.VERIFIED


def test_a_fused_loss_head_that_returned_logits_did_not_run():
    stage = Stage("adam", "rmsnorm", "bf16", head="liger-flce")
    lever = LEVERS["liger-flce"]
    seen = {"liger_flce": ["liger_fused_linear_cross_entropy"]}
    assert lever_verdict((lever,), stage, "cuda", seen, Facts(logits_returned=False))[0] == Verdict.VERIFIED
    state, warnings = lever_verdict((lever,), stage, "cuda", seen, Facts(logits_returned=True))
    assert state == Verdict.FALLBACK and "returned logits" in warnings[0]


def test_a_models_own_parts_are_no_levers_to_prove():
    """A Hugging Face model keeps its own norm (LlamaRMSNorm, no aten::rms_norm): the native norm lever did not act,
    so it expects no kernel; a model built with parts still must show it."""
    stage = Stage("adam", "rmsnorm", "fp32")
    lever = LEVERS["rmsnorm"]
    assert lever_verdict((lever,), stage, "cpu", {}, Facts(own_parts=False))[0] == Verdict.VERIFIED
    assert lever_verdict((lever,), stage, "cpu", {}, Facts(own_parts=True))[0] == Verdict.UNCONFIRMED


def test_the_report_survives_the_stage_file():
    from bench_core.results.records import StageResult
    report = SurgeryReport((LeverChange("fp8-torchao", converted=8, candidates=14,
                                        not_converted={"dims not divisible by 16": 6}),
                            LeverChange("liger-rms", swaps=(Swap("LlamaRMSNorm", "LigerRMSNorm", 5),),
                                        entry_points=("apply_liger_kernel_to_llama(rms_norm)",))))
    result = StageResult(index=0, stage=Stage("adam", "rmsnorm", "fp8-torchao"), surgery=report)
    assert StageResult.from_dict(result.to_dict()).surgery == report
    assert "8 of 14 layers converted" in report.text and "5 LlamaRMSNorm → LigerRMSNorm" in report.text


def test_the_worker_reports_a_refused_surgery_as_unavailable_before_any_step(monkeypatch):
    from bench_core.config.bench_config import BenchConfig
    from bench_core.run import events as ev
    from bench_core.run import step, worker
    from bench_core.run.processes import StageJob
    monkeypatch.setattr(step, "build_model", lambda cfg, parts: hf_model("gpt2"))
    monkeypatch.setattr(worker, "wait_for_line", lambda: None)
    monkeypatch.setattr(worker, "wait_for_go", lambda: None)
    stage = Stage("adam", "layernorm", "fp32", head="liger-flce")
    cfg = BenchConfig(depth=DEPTH, width=64, heads=4, seq_len=16, batch_size=2, vocab_size=256, device="cpu")
    emitted: list = []
    worker.run(StageJob(cfg, stage, "cpu"), emitted.append, torch)
    assert emitted == [ev.Unavailable(reason="Liger fused linear CE: Liger has no kernels for model_type gpt2")]


def test_every_vendor_part_lever_declares_how_it_acts_on_a_model_of_its_own():
    """A model not built with parts gets a vendor's norm, MLP or loss head only through the surgery its registry
    entry declares: one missing would be a lever applied to nothing, silently."""
    from bench_core.levers.lever_types import PartLever
    for lever in LEVERS.values():
        if isinstance(lever, PartLever) and lever.vendor is not None:
            assert lever.surgery is not None, lever.name
    assert isinstance(LEVERS["fp8-torchao"].surgery, Float8Convert)
    assert LEVERS["fp8-torchao"].plan.convert is None   # one conversion: the surgery's, for every model
