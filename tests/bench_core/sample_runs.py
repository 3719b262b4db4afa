"""Hand-made runs with known figures, shared by the summary, formats, figures and page tests."""
from __future__ import annotations

from dataclasses import replace

from bench_core.components.rows import ComponentRow, ComponentsReport
from bench_core.config.bench_config import BenchConfig
from bench_core.levers.presets import PRESETS
from bench_core.machine.probe import Probe
from bench_core.measure.breakdown import StageProfile
from bench_core.results.records import RunResult, Status, initial_stage

H200 = Probe.from_dict({"torch": "2.11.0+cu130", "cuda_runtime": "13.0", "driver": "580.159.04",
                        "cuda": {"available": True, "device_count": 1, "name": "NVIDIA H200", "capability": [9, 0]},
                        "apex": {"status": "genuine", "distribution": {"version": "0.1"}}})


def profile(gemm: float, norm: float, cast: float, kernels: float, total: float, busy: float) -> StageProfile:
    return StageProfile(source="cuda", steps=5, gpu_kernel_ms=total, trace_busy=busy, kernels_per_step=kernels,
                        breakdown_ms={"gemm": gemm, "normalization": norm, "cast/copy": cast,
                                      "elementwise/other": total - gemm - norm - cast}, top=())


def gpu_run() -> RunResult:
    """The seed ladder with round figures: baseline 100 ms, Apex Adam 50 ms (×2), a failed stage with partial
    timings, and an Apex BF16 stage at 20 ms (×5) that is launch-bound (10 ms of kernels in a 20 ms step)."""
    cfg = BenchConfig(depth=2, width=64, heads=4, seq_len=32, batch_size=2, vocab_size=256, iters=4, repeats=2,
                      device="cuda")
    stages = [initial_stage(i, s, 4) for i, s in enumerate(PRESETS["seed"])]
    ok = dict(status=Status.OK, verdict="verified", rounds=(4, 4), peak_allocated_mib=100.0, peak_reserved_mib=120.0)
    stages[0] = replace(stages[0], times_ms=(100.0,) * 8, losses=(5.5, 5.4, 5.3, 5.2) * 2,
                        host_ms=(30.0,) * 8, profile=profile(60.0, 2.0, 1.0, 700, 99.0, 0.97),
                        kernels={"aten_foreach": ["aten::_foreach_add_"], "gemm_fp32": ["gemm:float"]}, **ok)
    stages[1] = replace(stages[1], times_ms=(50.0,) * 8, losses=(5.5, 5.4, 5.3, 5.2) * 2, host_ms=(20.0,) * 8,
                        profile=profile(40.0, 2.0, 1.0, 650, 49.0, 0.98),
                        kernels={"apex_adam": ["multi_tensor_apply_kernel<AdamFunctor>"], "gemm_fp32": ["gemm:float"]},
                        **ok)
    stages[2] = replace(stages[2], status=Status.FAILED, reason="=HYPERLINK(\"x\") worker exited with code 1",
                        times_ms=(1.0, 1.0), losses=(5.5, 5.4))
    stages[3] = replace(stages[3], times_ms=(20.0,) * 8, losses=(5.5, 5.4, 5.3, 5.2) * 2, host_ms=(19.5,) * 8,
                        profile=profile(6.0, 1.0, 2.0, 870, 10.0, 0.35), autocast_dtype="bfloat16",
                        kernels={"apex_adam": ["multi_tensor_apply_kernel<AdamFunctor>"],
                                 "apex_layernorm": ["cuApplyLayerNorm"], "gemm_bf16": ["gemm:bfloat16"]}, **ok)
    return RunResult(config=cfg, machine=H200, device="cuda", preset="seed", stages=tuple(stages),
                     status=Status.DONE, run_id="abc123def456", created_at="2026-12-02T10:00:00+00:00")


def in_progress_run() -> RunResult:
    """`gpu_run()` as `run --json` leaves it mid-run: stage 2 running (two steps in), stage 3 not started."""
    run = gpu_run()
    stages = list(run.stages)
    stages[2] = replace(stages[2], status=Status.RUNNING, reason="", times_ms=(1.0, 1.0))
    stages[3] = replace(stages[3], status=Status.PENDING, reason="", times_ms=(), losses=(), profile=None)
    return replace(run, stages=tuple(stages), status=Status.RUNNING)


APEX_ADAM_REASON = "Apex FusedAdam runs CUDA kernels only (amp_C); no CPU path"


def cpu_components_report() -> ComponentsReport:
    """A CPU report's rows as `components --device cpu` measured them (kernel names from the profiled call)."""
    ok = dict(status="ok", p10_ms=0.9, p90_ms=1.1, bytes_moved=13_174_784, proof="verified")
    rows = (
        ComponentRow("optimizer", "adam", "fp32", median_ms=0.959, gb_per_s=13.7, title="Adam",
                     kernel_names=("Optimizer.step#Adam.step", "aten::sqrt", "aten::div", "aten::lerp_"), **ok),
        ComponentRow("optimizer", "adam-loop", "fp32", median_ms=0.978, gb_per_s=13.5, title="Adam (for-loop)",
                     kernel_names=("Optimizer.step#Adam.step", "aten::sqrt", "aten::add_"), **ok),
        ComponentRow("optimizer", "adam-fused", "fp32", median_ms=0.268, gb_per_s=49.2, title="Adam fused",
                     kernel_names=("aten::_foreach_add_", "aten::_fused_adam_", "Optimizer.step#Adam.step"), **ok),
        ComponentRow("optimizer", "apex-fusedadam", "fp32", "unavailable", reason=APEX_ADAM_REASON,
                     title="Apex FusedAdam"),
        ComponentRow("norm", "layernorm", "bf16-autocast", median_ms=0.084, gb_per_s=7.9, title="LayerNorm",
                     kernel_names=("aten::native_layer_norm",), **ok),
        ComponentRow("norm", "apex-fusedln", "fp32", "unavailable", reason="falls back on CPU",
                     title="Apex FusedLayerNorm"),
        ComponentRow("norm", "apex-fusedln", "bf16-autocast", "unavailable", reason="falls back on CPU",
                     title="Apex FusedLayerNorm"))
    return ComponentsReport(model="tiny", device="cpu", config={}, rows=rows, ceilings=None, params=470_528,
                            rows_x_width=(256, 128), env={}, created_at="2026-12-06T00:00:00+00:00")


def cpu_run() -> RunResult:
    """The native ladder's first three stages on a CPU, three processes each: Adam fused and BF16 ×1.05 each, within
    their pair's noise, the BF16 stage ×1.10 clear of ×1.00; its profiled ops took 35.1 ms a step (summed over
    threads, on the profiler's slower steps) against its 12.37 ms median."""
    from bench_core.levers.stage import Stage
    cfg = BenchConfig(depth=2, width=64, heads=4, seq_len=32, batch_size=2, vocab_size=256, iters=4, repeats=3,
                      device="cpu")
    cases = ((Stage("adam", "layernorm", "fp32"), (13.6, 13.6, 13.6), 12.0, 412.0),
             (Stage("adam-fused", "layernorm", "fp32"), (12.9, 13.6, 12.5), 12.0, 415.0),
             (Stage("adam-fused", "layernorm", "bf16"), (12.37, 12.37, 12.37 * 1.01), 35.1, 468.0))
    stages = tuple(replace(initial_stage(i, stage, 4), status=Status.OK, verdict="verified", rounds=(4, 4, 4),
                           peak_rss_mib=rss,
                           times_ms=tuple(m for m in medians for _ in range(4)), losses=(5.5, 5.4, 5.3, 5.2) * 3,
                           profile=StageProfile("cpu", 5, None, None, None,
                                                {"gemm": ops * 0.6, "optimizer": ops * 0.1,
                                                 "elementwise/other": ops * 0.3}))
                   for i, (stage, medians, ops, rss) in enumerate(cases))
    return RunResult(config=cfg, machine=Probe.from_dict({"torch": "2.13.0+cpu", "cuda": {"available": False}}),
                     device="cpu", preset="native", stages=stages, status=Status.DONE, run_id="cpu0run0abcd",
                     created_at="2026-12-06T10:00:00+00:00")


def gpu_ladder_on_cpu() -> RunResult:
    """The same ladder measured on a CPU: RSS, not GPU memory; no MFU, no launch/GPU split."""
    run = gpu_run()
    stages = tuple(replace(s, peak_allocated_mib=None, peak_reserved_mib=None,
                           peak_rss_mib=300.0 + s.index if s.peak_allocated_mib else None, host_ms=(), profile=None)
                   for s in run.stages)
    return replace(run, device="cpu", machine=Probe.from_dict({"torch": "2.13.0+cpu"}), stages=stages,
                   config=replace(run.config, device="cpu"))
