"""A step's peak memory read by phase (forward, backward, optimizer) and extrapolated in depth phase by phase: the
training step calls its phase hook in order, the reader turns it into one peak a phase, and the predictor takes the
highest phase at full depth. The real engine on a tiny CPU config; the allocator's figures are hand-set."""
import json
from dataclasses import replace
from types import SimpleNamespace

import pytest

from bench_core.levers.stage import Stage
from bench_core.run.phases import StepPhase
from bench_core.sweep.core.predict import peak_in_depth
from bench_core.sweep.timing.timings import KernelTime, Part


def _built(tiny_cfg):
    import torch

    from bench_core.run.processes import StageJob
    from bench_core.run.step import build_stage
    stage = Stage("adam", "layernorm", "fp32")
    return build_stage(StageJob(tiny_cfg, stage, "cpu"), stage, torch)


def test_the_eager_step_calls_its_phase_hook_at_the_end_of_each_phase_in_order(tiny_cfg):
    built = _built(tiny_cfg)
    seen = []
    built.on_phase = seen.append
    built.step()
    assert seen == list(StepPhase)
    built.on_phase = None
    built.step()   # no hook: the step runs as before
    assert len(seen) == 3


def test_the_phase_reader_counts_each_phase_from_what_it_began_with(tiny_cfg):
    """A fake allocator whose peak is set per phase: the reader resets it at the start and after each phase, and
    takes each phase's peak less the baseline."""
    from bench_core.sweep.timing.builders import StepCall
    from bench_core.sweep.timing.process import phase_peaks_mib
    mib = 2**20
    peaks = iter([900 * mib, 700 * mib, 800 * mib])
    resets = []
    fake = SimpleNamespace(cuda=SimpleNamespace(max_memory_allocated=lambda: next(peaks),
                                                reset_peak_memory_stats=lambda: resets.append(1)))
    call = StepCall(_built(tiny_cfg))
    assert phase_peaks_mib(fake, call, 100 * mib) == (800.0, 600.0, 700.0)
    assert len(resets) == 4 and call.built.on_phase is None
    # a replayed CUDA graph never calls the hook: no phases, the whole step's peak stands alone
    replayed = StepCall(SimpleNamespace(step=lambda: None, on_phase=None))
    assert phase_peaks_mib(fake, replayed, 0) == ()


def _step(part, whole, phases=()):
    return KernelTime(part, "k", 1.0, 1.0, 1.0, 1, 1, peak_mib=whole, phase_peaks_mib=phases)


def test_each_phase_is_extrapolated_on_its_own_and_the_highest_is_the_peak():
    """Hand-set: the forward phase leads at one and two blocks (a large fixed logits buffer, +50 MiB a block), the
    optimizer phase grows faster (+100 MiB a block). At 11 more blocks: forward 1,550, optimizer 1,700. The whole
    step's peak extrapolated as one (the rule before) says 1,550: 150 MiB low, the fault this mends."""
    one = _step(Part.STEP_1, 1000.0, (1000.0, 500.0, 600.0))
    two = _step(Part.STEP_2, 1050.0, (1050.0, 600.0, 700.0))
    assert peak_in_depth(one, two, 11) == pytest.approx(1700.0)
    assert peak_in_depth(replace(one, phase_peaks_mib=()), replace(two, phase_peaks_mib=()), 11) == \
        pytest.approx(1550.0)
    # phases missing on one side, or a phase read lower with two blocks (noise): the whole step's rule
    assert peak_in_depth(one, replace(two, phase_peaks_mib=()), 11) == pytest.approx(1550.0)
    assert peak_in_depth(one, replace(two, phase_peaks_mib=(1050.0, 400.0, 700.0)), 11) == pytest.approx(1550.0)


def test_phase_peaks_survive_a_sweep_file():
    t = _step(Part.STEP_2, 1050.0, (1050.0, 600.0, 700.0))
    assert KernelTime.from_dict(json.loads(json.dumps(t.to_dict()))) == t
    older = {k: v for k, v in t.to_dict().items() if k != "phase_peaks_mib"}   # a file from before phases
    assert KernelTime.from_dict(older).phase_peaks_mib == ()


def test_a_library_buffer_made_by_the_first_step_is_not_extrapolated_by_the_block():
    """The H100's figures (docs/data/h100_2026-12-06_call36_peak_timeline.json, native BF16 on gpt2-small at batch
    1): the one-block step, a process's first, read 1,407.2 MiB with 67.5 MiB of cuBLAS workspace that outlived it;
    the two-block step 1,463.7 with none (by then in its baseline); the twelve-block step 2,703.8. Taken as read,
    the extrapolation says 2,028.7 (25% low, as the sweep's depth check found); net of what was kept, 2,703.7."""
    from bench_core.sweep.timing.process import net_of_kept
    peak, phases = net_of_kept(1407.2, (1000.0, 1407.2, 900.0), 67.5)
    assert peak == pytest.approx(1339.7) and phases == pytest.approx((932.5, 1339.7, 832.5))
    one = _step(Part.STEP_1, peak)
    two = _step(Part.STEP_2, net_of_kept(1463.7, (), 0.0)[0])
    assert peak_in_depth(one, two, 11) == pytest.approx(2703.7)
    assert peak_in_depth(_step(Part.STEP_1, 1407.2), two, 11) == pytest.approx(2028.7)   # the figure as read
    assert net_of_kept(500.0, (), -3.0) == (500.0, ())   # freed below the baseline: nothing kept, nothing added
