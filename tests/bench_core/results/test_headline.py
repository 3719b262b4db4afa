from dataclasses import replace

from bench_core.measure import stats
from bench_core.results.contributions import vendor_effects
from bench_core.results.headline import headline
from bench_core.results.summary import summarize
from helpers import ROOT, sample_runs

gpu_run = sample_runs().gpu_run


def test_gpu_run_headline_names_fastest_apex_twin_launch_bound_and_failure():
    summary = summarize(gpu_run())
    lines = headline(summary).lines
    text = "\n".join(lines)
    assert "Fastest: **apex-fusedadam+apex-fusedln+bf16** at 20.00 ms a step, ×5.00" in text
    # a launch-bound stage says each process's median, not one median alone
    bound = summary.stages[3]
    per_process = ", ".join(f"{m:.1f}" for m in bound.round_medians)
    assert len(bound.round_medians) == 2
    assert "Launch-bound" in text
    assert f"apex-fusedadam+apex-fusedln+bf16 (GPU idle 50% of the step, per process {per_process} ms)" in text
    assert "Failed: apex-fusedadam+apex-fusedln+fp32 (failed" in text


def test_a_fallback_stage_is_never_the_fastest():
    run = gpu_run()
    run = run.with_stage(replace(run.stages[3], verdict="fallback"))
    text = "\n".join(headline(summarize(run)).lines)
    assert "Fastest: **apex-fusedadam+layernorm+fp32**" in text
    assert "Not counted as Apex" in text and "apex-fusedadam+apex-fusedln+bf16" in text


def test_one_liner_for_history():
    assert headline(summarize(gpu_run())).one_liner.startswith("apex-fusedadam+apex-fusedln+bf16 ×5.00")


def test_the_history_one_liner_leads_with_each_vendor_against_its_native_twin():
    """The seed ladder with its twins, measured on an H200: the one-liner leads with Apex against its native twin
    (×0.66 here), never with the Apex stage against the baseline, which would credit BF16's gain to Apex."""

    from bench_core.results import formats
    run = formats.parse_json((ROOT / "docs/data/h200_2026-12-03_call12_seed_small_after_apex"
                              ".json").read_bytes())[0]
    summary = summarize(run)
    [apex] = vendor_effects(summary)
    one = headline(summary).one_liner
    d = apex.decimals   # as many as the engine gives this ratio near ×1.00 (results.near_one)
    assert one.startswith(f"Apex vs its native twin ×{apex.ratio:.{d}f} (95% CI ×{apex.interval[0]:.{d}f}–")
    assert " · fastest: adam-fused+layernorm+bf16 ×" in one   # here native BF16, Apex launch-bound


def test_a_fastest_baseline_is_not_the_only_result():
    run = gpu_run()
    run = run.with_stage(replace(run.stages[1], times_ms=(200.0,) * 8))   # x0.5
    run = run.with_stage(replace(run.stages[3], times_ms=(150.0,) * 8))   # x0.67
    assert [s.ok for s in summarize(run).stages] == [True, True, False, True]
    first = headline(summarize(run)).lines[0]
    assert "Only the baseline" not in first and "nothing to compare" not in first, first


def _vendor_stages_run(cases):
    from bench_core.levers.stage import Stage
    from bench_core.results.records import initial_stage
    run = gpu_run()
    ok = run.stages[3]
    stages = tuple(replace(initial_stage(i, Stage(*st[:3], **st[3]), 4), status=ok.status, verdict=ok.verdict,
                           rounds=ok.rounds, times_ms=times) for i, (st, times) in enumerate(cases))
    return summarize(replace(run, stages=stages))


def test_each_vendor_is_set_against_its_native_twin_with_its_interval_for_either_family():
    """The twin comes from the registry (Lever.native): Apex FusedRMSNorm's is torch's RMSNorm, FLCE's the plain
    head, torchao FP8's BF16. The headline reads those sentences from contributions (with the interval), once: no
    plain twin ratio of its own."""
    summary = _vendor_stages_run(((("adam-fused", "rmsnorm", "bf16", {}), (20.0,) * 8),
                                  (("apex-fusedadam", "apex-fusedrms", "bf16", {}), (16.0,) * 8),
                                  (("adam-fused", "rmsnorm", "fp8-torchao", {}), (25.0,) * 8),
                                  (("adam-fused", "liger-rms", "bf16", {"head": "liger-flce"}), (40.0,) * 8)))
    lines = headline(summary).lines
    text = "\n".join(lines)
    assert ("Apex adds about 25% here (×1.25; 95% CI ×1.25–1.25; apex-fusedadam+apex-fusedrms+bf16 vs "
            "adam-fused+rmsnorm+bf16)." in lines)
    assert "torchao costs about 20% here (×0.80; 95% CI ×0.80–0.80;" in text
    assert "Liger-Kernel costs about 50% here (×0.50; 95% CI ×0.50–0.50;" in text
    # every sentence that names a native twin carries its interval; none is the old bare ratio
    twin_lines = [line for line in lines if "native twin" in line or " here (" in line]
    assert len(twin_lines) == 4 and all("95% CI" in line or "no measurable effect" in line for line in twin_lines)
    assert "against its native twin adam-fused" not in text and " ms)." not in text


def test_a_vendor_within_noise_of_its_twin_says_no_measurable_effect_not_a_ratio():
    base = (20.0, 20.2, 19.8, 20.0, 20.8, 19.2, 20.0, 20.0)
    summary = _vendor_stages_run(((("adam-fused", "rmsnorm", "bf16", {}), base),
                                  (("apex-fusedadam", "apex-fusedrms", "bf16", {}),
                                   (19.8, 20.0, 19.6, 19.8, 20.0, 20.6, 19.0, 19.8))))
    text = "\n".join(headline(summary).lines)
    [apex] = vendor_effects(summary)
    assert apex.paired.effect == stats.effect_of(*apex.interval) == stats.Effect.INCONCLUSIVE
    assert "Apex against its native twin: inconclusive: ×" in text and "±" not in text
    assert "×1.01 against" not in text and "adds about" not in text and "Fastest" not in text
