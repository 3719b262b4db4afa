"""The sweep's predictor and runner on a real GPU: each stage's shallow steps and every part of its breakdown timed
with their kernels counted, the host's launch cost measured, FP8 GEMMs where the GPU has them, predictions held
to what the H200 measured end to end, and a two-point sweep end to end. Skipped without CUDA."""
from dataclasses import replace

import pytest

from bench_core.config.bench_config import BenchConfig, workload
from bench_core.levers.stage import Stage
from bench_core.sweep.core.predict import predict
from bench_core.sweep.core.spec import Axis, SweepSpec, grid, parse_comparison
from bench_core.sweep.timing.process import time_point, with_full_steps
from bench_core.sweep.timing.timings import Part

pytestmark = pytest.mark.gpu

LLAMA = BenchConfig(family="llama", depth=2, width=1024, heads=16, seq_len=1024, batch_size=4, vocab_size=32000,
                    warmup=3, iters=10, repeats=2, device="cuda")
BF16 = Stage("adam-fused", "rmsnorm", "bf16")


def _as_swept(cfg, stages, least=None):
    """A point's timings as a sweep's timing process takes them: the point's parts, then each stage's full-depth
    step at the sweep's least-work point (`least`; by default the point itself, a one-point sweep)."""
    timings, missing = time_point(cfg, stages, "cuda")
    return with_full_steps(timings, missing, stages, cfg, least or cfg, {})


def test_the_full_depth_step_is_timed_for_its_host_and_replaces_the_shallow_steps_rate():
    """Four blocks: the full step launches more kernels than the two-block one, its host is measured in rounds, and
    the prediction's host is that host scaled by the predicted kernels, not the shallow steps' rate."""
    from bench_core.sweep.core.predict import host_per_kernel_ms
    cfg = replace(LLAMA, depth=4)
    timings, missing = _as_swept(cfg, (BF16,))
    assert missing == ()
    one, two, full = (timings.find(part, BF16.key) for part in (Part.STEP_1, Part.STEP_2, Part.STEP_FULL))
    assert one and two and full and full.kernels > two.kernels and 0 < full.host_low_ms <= full.host_ms
    p = predict(timings, BF16, BF16).a
    assert p.host_ms == pytest.approx(full.host_ms * p.kernels / full.kernels)
    assert p.host_ms != pytest.approx(p.kernels * host_per_kernel_ms(one, two, timings.launch_us)[0])


def test_every_part_is_timed_with_its_kernels_and_the_launch_cost_is_measured():
    timings, missing = time_point(LLAMA, (BF16, BF16.replace(compile="compile")), "cuda", breakdown=True)
    assert missing == ()
    # every part but the full-depth step, which the timing process adds once a sweep (with_full_steps)
    assert {t.part for t in timings.times} == set(Part) - {Part.STEP_FULL}
    assert all(t.ms > 0 and t.kernels >= 1 for t in timings.times), timings.times
    # each part's GPU time is its traced kernel time, and the host's time to issue it is measured on its own
    assert all(t.kernel_ms is not None and 0 < t.kernel_ms and t.host_ms > 0 for t in timings.times), timings.times
    # with its rounds' fastest and slowest kept, the median between them
    assert all(0 < t.host_low_ms <= t.host_ms <= t.host_high_ms for t in timings.times), timings.times
    # a whole step's peak memory, a second block's weights, state and activations on top of the first's; a part's none
    for key in (BF16.key, BF16.replace(compile="compile").key):
        one, two = timings.find(Part.STEP_1, key), timings.find(Part.STEP_2, key)
        assert one is not None and two is not None and 0 < one.peak_mib < two.peak_mib, (one, two)
    assert all(t.peak_mib == 0 for t in timings.times if t.part not in (Part.STEP_1, Part.STEP_2))
    gemm, compiled_gemm = timings.find(Part.GEMM, "bf16"), timings.find(Part.GEMM, "bf16+compile")
    assert gemm is not None and gemm.kernels >= 3 * 5   # fwd, dX, dW for each of the llama block's 5 linears
    # compiled, the products are still all there (a compiled graph drops results nobody uses)
    assert compiled_gemm is not None and compiled_gemm.kernels >= 3 * 5, compiled_gemm
    assert 0.5 < timings.launch_us < 100                 # a host enqueues a kernel in microseconds
    # compiled parts are not always fewer kernels (this step counted 124 compiled against 122 eager on the H200,
    # call 24): the predictor reads the traced counts, it assumes no fusion


def test_a_shallow_step_s_peak_is_read_by_phase_and_its_highest_phase_is_the_step_s_peak():
    """The phases split one step, so the highest phase's peak is the step's own; a replayed CUDA graph has no
    phases (the whole step's peak stands alone). Guards the per-phase depth rule (sweep.core.predict.peak_in_depth)."""
    graphs = BF16.replace(compile="graphs")
    timings, missing = time_point(LLAMA, (BF16, graphs), "cuda")
    assert missing == ()
    for part in (Part.STEP_1, Part.STEP_2):
        eager = timings.find(part, BF16.key)
        assert eager is not None and len(eager.phase_peaks_mib) == 3 and min(eager.phase_peaks_mib) > 0, eager
        # one more step than the timed ones, in the same steady state: the same peak
        assert max(eager.phase_peaks_mib) == pytest.approx(eager.peak_mib, rel=0.01), eager
        replayed = timings.find(part, graphs.key)
        assert replayed is not None and replayed.phase_peaks_mib == () and replayed.peak_mib > 0


def test_fp8_gemms_are_timed_where_the_gpu_has_them():
    import torch
    if torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("FP8 GEMMs need compute capability 8.9")
    fp8 = BF16.replace(precision="fp8-torchao")
    timings, missing = time_point(LLAMA, (BF16, fp8), "cuda", breakdown=True)
    assert not [m for m in missing if m.startswith("gemm")], missing
    fp8_gemm, bf16_gemm = timings.find(Part.GEMM, "fp8"), timings.find(Part.GEMM, "bf16")
    assert fp8_gemm is not None and bf16_gemm is not None and fp8_gemm.ms > 0


def test_compiled_fp8_over_compiled_bf16_on_llama_1b_is_predicted_as_measured():
    """llama-1b (16 x 2048, 4 x 2048 tokens) on the H200, calls 21-22: compiled FP8 x1.585 and x1.578 of eager
    BF16, compiled BF16 x1.358 and x1.379, so FP8 over BF16, both compiled, x1.167 and x1.144; steps of compiled
    BF16 96.90 and 95.65 ms, of compiled FP8 83.12 and 83.50 ms, both GPU-bound
    (docs/data/h200_2026-12-04_call21_peers_llama-1b_agree_1.json, _call22_..._2.json). The issue's target: each
    step time within 10% of the measured one, so the ratio within 10% of its span. Timed eagerly, FP8's casts
    count unfused."""
    import torch
    if torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("FP8 GEMMs need compute capability 8.9")
    bf16 = BF16.replace(compile="compile").for_family("llama")   # with the family's SwiGLU
    fp8 = bf16.replace(precision="fp8-torchao")
    cfg = workload("llama-1b", BenchConfig(device="cuda"))
    band = (1.144 / 1.1, 1.167 * 1.1)
    # the full step at batch 1, as a sweep over batch sizes would take it: the host's time, never queued behind a
    # GPU-bound step
    timings, missing = _as_swept(cfg, (bf16, fp8), replace(cfg, batch_size=1))
    assert missing == ()
    p = predict(timings, bf16, fp8)
    assert p.b.bound.value == "gpu-bound" and band[0] <= p.speedup <= band[1], (p, timings.times)
    assert 95.65 / 1.1 <= p.a.step_ms <= 96.90 * 1.1 and 83.12 / 1.1 <= p.b.step_ms <= 83.50 * 1.1, p
    # the fallback this guards against: the same parts timed eagerly fall outside the band
    eager_bf16, eager_fp8 = bf16.replace(compile="eager"), fp8.replace(compile="eager")
    unfused = predict(_as_swept(cfg, (eager_bf16, eager_fp8), replace(cfg, batch_size=1))[0], eager_bf16,
                      eager_fp8).speedup
    assert not band[0] <= unfused <= band[1], unfused


def test_a_two_point_sweep_runs_end_to_end(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path / "cache"))
    from bench_core.machine.probe import cached_probe
    from bench_core.sweep.core.records import crossovers
    from bench_core.sweep.core.runner import run_sweep
    probe, _ = cached_probe()
    spec = SweepSpec(parse_comparison("adam-fused+rmsnorm+fp32,adam-fused+rmsnorm+bf16", "llama"), LLAMA,
                     (Axis("width", (512, 1024)),), None)
    result = run_sweep(spec, grid(spec.axes, spec.base), probe)
    assert all(p.measured and p.prediction for p in result.points), [p.prediction_note for p in result.points]
    assert all(p.measurement.bound in ("gpu-bound", "launch-bound") for p in result.points)
    assert all(p.measurement.interval_text == "across 2 processes" for p in result.points)
    # BF16 against FP32 on a GPU: faster at both widths, predicted and measured, so no crossing inside them
    assert all(p.prediction.speedup > 1 and p.measurement.speedup > 1 for p in result.points)
    assert crossovers(result) == []
    # each stage's full step taken once, at the narrower point, and kept in both; each stage's host measured too
    full = [{t.variant: t for t in p.prediction.timings.times if t.part == Part.STEP_FULL} for p in result.points]
    assert len(full[0]) == 2 and full[0] == full[1]
    assert all(p.measurement.a_host_ms and p.measurement.b_host_ms and p.host_errors for p in result.points)
    # and where they were taken, the depth extrapolation is checked against them
    from bench_core.sweep.core.errors import error_figures
    assert [p.prediction.timings.full_here for p in result.points] == [True, False]
    assert any(e.label == "depth extrapolation against the full step timed at width=512" and "A: GPU time" in e.text
               for e in error_figures(result))


@pytest.mark.xfail(reason="call 29 predicted this point x0.91, launch-bound, against x1.00 GPU-bound measured three "
                   "times: the shallow steps' host rate overestimated the Apex stage's host (docs/BENCHMARKS.md, "
                   "calls 28-31); the full-depth step's host that replaced it has not run on a GPU yet")
def test_a_host_bound_norm_does_not_count_as_gpu_time(runnable):
    """The H200's Apex map (calls 22-23): Apex FusedAdam + FusedLayerNorm + BF16 against native BF16 on gpt2-small
    at batch 16 measured x1.00 (0.99-1.00 and 0.97-1.02), GPU-bound, while the predictor said x0.69: Apex's
    LayerNorm, host-bound when timed alone, was counted as GPU time. The issue's target for a GPU-bound point is
    the step time within 10%, so the speedup within about 10% of the measured x1.00."""
    native = Stage("adam-fused", "layernorm", "bf16")
    apex = runnable(Stage("apex-fusedadam", "apex-fusedln", "bf16"))
    cfg = BenchConfig(depth=12, width=768, heads=12, seq_len=1024, batch_size=16, vocab_size=50304, device="cuda")
    timings, missing = _as_swept(cfg, (native, apex), replace(cfg, batch_size=1))   # the Apex map's least-work
    assert missing == ()
    p = predict(timings, native, apex)
    assert p.b.bound.value == "gpu-bound" and 0.9 <= p.speedup <= 1.1, (p, timings.times)
