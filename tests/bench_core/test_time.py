"""Time you can believe: a compile phase with its own cached estimate, the ETA counting it, a CPU's first ladder
without compile, and BF16 estimated as emulated on a CPU without BF16 instructions."""
import dataclasses

import pytest

from bench_core.config.bench_config import BenchConfig
from bench_core.levers.presets import PRESETS, default_preset, preset
from bench_core.levers.stage import Stage
from bench_core.machine import stage_costs
from bench_core.machine.probe import Probe
from bench_core.machine.stage_costs import StageCosts
from bench_core.measure.estimate import STEP_EFFICIENCY, bf16_note, process_overhead_s, step_estimate, step_seconds
from bench_core.results.eta import eta, run_estimate
from bench_core.results.phase import Phase, cold_compile_s, compile_text, phase, save_costs
from bench_core.results.records import Status
from bench_core.run.runner import new_run, run_stage

CFG = BenchConfig(depth=2, width=128, heads=4, seq_len=64, batch_size=4, vocab_size=512, warmup=3, iters=10,
                  device="cpu")
EAGER, COMPILED = Stage("adam-fused", "layernorm", "fp32"), Stage("adam-fused", "layernorm", "fp32", "compile")
AVX2 = {"capability": "AVX2", "bf16_flags": [], "matmul_gflops": 10.0, "bf16_matmul_gflops": 0.8}
PROBE = Probe.from_dict({"cuda": {"available": False}, "cpu": AVX2, "adam_fused": {"cpu": True}, "bf16": {"cpu": True},
                        "compile": {"cpu": {"usable": True, "reason": "c++"}}})
COSTS = StageCosts("cpu", fixed_s=2.0, compile_s=50.0, measured_fixed=True, measured_compile=True)


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path))


def compiling(run, index, started, first_step=None):
    events = {"started": started, **({"first_step": first_step} if first_step is not None else {})}
    return run.with_stage(dataclasses.replace(run.stages[index], status=Status.RUNNING, timelines=(events,)))


def test_a_compiled_stage_shows_its_compile_phase_not_iteration_zero():
    run = compiling(new_run(CFG, [COMPILED, EAGER], PROBE, "custom"), 0, started=1000.0)
    stage = run.stages[0]
    assert phase(stage) is Phase.COMPILING
    text = compile_text(stage, COSTS, now=1012.0, cold_s=None)
    assert text.startswith("compiling") and "12 s of about 50 s" in text and "measured on this machine" in text
    assert phase(compiling(run, 0, 1000.0, first_step=1040.0).stages[0]) is Phase.WARMING_UP
    assert phase(compiling(run, 1, 1000.0).stages[1]) is Phase.WARMING_UP   # an eager first step: no compile


def test_the_eta_counts_compile_before_and_during_it():
    fresh = new_run(CFG, [EAGER, COMPILED], PROBE, "custom")
    eager_only = eta(new_run(CFG, [EAGER, EAGER], PROBE, "custom"), COSTS).seconds
    assert eta(fresh, COSTS).seconds == pytest.approx(eager_only + COSTS.compile_s)
    during = eta(compiling(fresh, 1, started=1000.0), COSTS, now=1030.0)
    assert during.stages[1].compile_s == pytest.approx(20.0)    # 30 s of its 50 s done
    assert run_estimate(fresh, COSTS).compile_s == pytest.approx(50.0)
    assert "50 s of it compiling" in run_estimate(fresh, COSTS).text()


def test_a_stage_not_compiled_yet_expects_at_least_this_runs_longest_first_compile():
    """The machine's figure is assumed or from another model; this run's own first compile is of this model. After
    a 90 s first compile, a compiled stage not yet compiled counts 90 s for its first process (in the ETA and in its
    phase text) and the machine's 50 s for the rest; a stage already past its first compile keeps the 50 s."""
    costs = dataclasses.replace(COSTS, measured_compile=False)
    cfg = dataclasses.replace(CFG, repeats=2)
    run = new_run(cfg, [COMPILED, Stage("adam", "layernorm", "fp32", "compile")], PROBE, "custom")
    assert cold_compile_s(run) is None
    before = eta(run, costs, now=2000.0)
    assert before.stages[1].compile_s == pytest.approx(2 * 50.0)
    first = run.with_stage(dataclasses.replace(run.stages[0], status=Status.RUNNING,
                                               timelines=({"started": 1000.0, "first_step": 1090.0},)))
    assert cold_compile_s(first) == pytest.approx(90.0)
    after = eta(first, costs, now=2000.0)
    assert after.stages[1].compile_s == pytest.approx(90.0 + 50.0)   # its first process 90 s, its second 50 s
    assert after.stages[0].compile_s == pytest.approx(50.0)          # its second process: the machine's figure
    running = first.with_stage(dataclasses.replace(first.stages[1], status=Status.RUNNING,
                                                   timelines=({"started": 1950.0},)))
    during = eta(running, costs, now=2000.0)
    assert during.stages[1].compile_s == pytest.approx(40.0 + 50.0)   # 50 s of its 90 s done, then one more
    text = compile_text(running.stages[1], costs, 2000.0, cold_s=cold_compile_s(running))
    assert "50 s of about 90 s, as long as this run's longest first compile so far" in text
    assert "about 50 s, assumed" in compile_text(running.stages[1], costs, 2000.0, cold_s=None)


def test_a_run_measures_and_caches_the_compile_and_the_process_cost():
    assert not stage_costs.load("cpu").measured_compile       # nothing cached yet: assumed, and said so
    assert "assumed" in stage_costs.load("cpu").compile_label
    run = new_run(CFG, [EAGER, COMPILED], PROBE, "custom")
    step_ms = (100.0,) * 10
    for index, first in ((0, 0.5), (1, 40.1)):
        run = run.with_stage(dataclasses.replace(
            run.stages[index], status=Status.OK, times_ms=step_ms, rounds=(10,), wall_s=1.0 + first + 3.0 + 0.8,
            timelines=({"started": 100.0, "first_step": 100.0 + first},)))
    save_costs(run)
    costs = stage_costs.load("cpu")
    assert costs.measured_compile and costs.compile_s == pytest.approx(40.0)   # its first step less one step
    # wall less its timed steps (1 s), its compile, warm-up (3) and profiled (5) steps at 0.1 s: 3.5 and 3.1
    assert costs.measured_fixed and costs.fixed_s == pytest.approx((3.5 + 3.1) / 2)


def test_the_cpu_default_ladder_leaves_compile_out_and_native_keeps_it():
    default = preset(default_preset("cpu"))
    assert default and not any(s.compile_lever.traces_model for s in default)
    assert any(s.compile_lever.traces_model for s in PRESETS["native"])
    assert {s.precision for s in default} == {"fp32", "bf16"}


@pytest.mark.parametrize(("capability", "flags", "emulated"), [
    ("AVX2", [], True), ("AVX512", ["avx512_bf16"], False), ("AVX512", [], True),
    ("AVX2", ["avx512_bf16", "amx_bf16"], True)])   # ATEN_CPU_CAPABILITY=avx2 on a CPU with the instructions
def test_the_probe_knows_whether_bf16_is_emulated(capability, flags, emulated):
    probe = Probe.from_dict({"cpu": {**AVX2, "capability": capability, "bf16_flags": flags}})
    assert probe.cpu.bf16_emulated is emulated
    assert ("emulated" in probe.cpu.bf16_note) is emulated


def test_bf16_is_estimated_at_this_cpus_bf16_rate_and_the_form_says_so():
    bf16, fp32 = step_estimate(CFG, PROBE, "cpu", "bf16"), step_seconds(CFG, PROBE, "cpu", "fp32")
    # its GEMM flops at the bf16 rate (fp32·eff is flops ÷ the fp32 rate), the rest of the step as long as in fp32
    gemm_fp32 = fp32 * STEP_EFFICIENCY
    assert bf16.seconds == pytest.approx(gemm_fp32 * 10.0 / 0.8 + (fp32 - gemm_fp32))
    assert "bf16 matmul rate" in bf16.label and "emulated" in bf16.label
    note = bf16_note(CFG, PROBE, "cpu", preset(default_preset("cpu")))
    assert note.startswith("BF16 is emulated on this CPU (AVX2") and f"{bf16.seconds:.2f} s a step" in note
    native = Probe.from_dict({"cpu": {**AVX2, "capability": "AVX512", "bf16_flags": ["amx_bf16"]}})
    assert bf16_note(CFG, native, "cpu", preset(default_preset("cpu"))) == ""


def test_a_worker_reports_its_first_step(tiny_cfg, cpu_probe):
    """The real engine: each process's timeline has the end of its first step, after its start."""
    result = run_stage(tiny_cfg, EAGER, cpu_probe)
    assert result.status == Status.OK
    events = result.timelines[-1]
    assert events["started"] <= events["first_step"] <= events["warmup"]
    assert process_overhead_s(tiny_cfg, 0.01, 2.0) > 2.0
