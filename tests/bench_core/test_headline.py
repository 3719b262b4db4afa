from dataclasses import replace

from sample_runs import gpu_run

from bench_core.results.headline import headline
from bench_core.results.summary import summarize


def test_gpu_run_headline_names_fastest_apex_twin_launch_bound_and_failure():
    lines = headline(summarize(gpu_run())).lines
    text = "\n".join(lines)
    assert "Fastest: **apex-fusedadam+apex-fusedln+bf16** at 20.00 ms a step, ×5.00" in text
    assert "Launch-bound" in text and "apex-fusedadam+apex-fusedln+bf16 (50% busy)" in text
    assert "Failed: apex-fusedadam+apex-fusedln+fp32 (failed" in text


def test_a_fallback_stage_is_never_the_fastest():
    run = gpu_run()
    run = run.with_stage(replace(run.stages[3], verdict="fallback"))
    text = "\n".join(headline(summarize(run)).lines)
    assert "Fastest: **apex-fusedadam+layernorm+fp32**" in text
    assert "Not counted as Apex" in text and "apex-fusedadam+apex-fusedln+bf16" in text


def test_one_liner_for_history():
    assert headline(summarize(gpu_run())).one_liner.startswith("apex-fusedadam+apex-fusedln+bf16 ×5.00")


def test_a_fastest_baseline_is_not_the_only_result():
    run = gpu_run()
    run = run.with_stage(replace(run.stages[1], times_ms=(200.0,) * 8))   # x0.5
    run = run.with_stage(replace(run.stages[3], times_ms=(150.0,) * 8))   # x0.67
    assert [s.ok for s in summarize(run).stages] == [True, True, False, True]
    first = headline(summarize(run)).lines[0]
    assert "Only the baseline" not in first and "nothing to compare" not in first, first


def test_each_vendor_stage_is_set_against_its_native_twin_for_either_family():
    """The twin comes from the registry (Lever.native): Apex FusedRMSNorm's is torch's RMSNorm, FLCE's the plain
    head, torchao FP8's BF16, so Llama and peers stages get their line as the seed's Apex stages do."""
    from bench_core.levers.stage import Stage
    from bench_core.results.records import initial_stage
    run = gpu_run()
    ok = run.stages[3]
    cases = ((Stage("adam-fused", "rmsnorm", "bf16"), 20.0), (Stage("apex-fusedadam", "apex-fusedrms", "bf16"), 16.0),
             (Stage("adam-fused", "rmsnorm", "fp8-torchao"), 25.0),
             (Stage("adam-fused", "liger-rms", "bf16", head="liger-flce"), 40.0))
    stages = tuple(replace(initial_stage(i, st, 4), status=ok.status, verdict=ok.verdict, rounds=ok.rounds,
                           times_ms=(ms,) * 8) for i, (st, ms) in enumerate(cases))
    text = "\n".join(headline(summarize(replace(run, stages=stages))).lines)
    assert ("Apex in **apex-fusedadam+apex-fusedrms+bf16**: ×1.25 against its native twin adam-fused+rmsnorm+bf16"
            in text)
    assert ("torchao in **adam-fused+rmsnorm+fp8-torchao**: ×0.80 against its native twin adam-fused+rmsnorm+bf16"
            in text)
    assert "Liger-Kernel in **adam-fused+liger-rms+bf16+liger-flce**: ×0.50" in text
