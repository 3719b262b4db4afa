"""The GPU's idle time within the profiled steps: host wait against other idle (HTA's rule), the bound on host
wait from the timestamps' resolution, and the launch-bound label it drives."""
from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from bench_core.measure.breakdown import CATEGORIES, StageProfile, bottleneck, profile_from_cpu_ops
from bench_core.measure.idle import (
    KERNEL_WAIT_US,
    Activity,
    IdleBreakdown,
    attribute,
    host_wait_bound_us,
    inputs,
)
from bench_core.measure.trace import from_chrome
from helpers import TESTS, sample_runs

TRACE = TESTS / "data" / "idle_trace.json"


def act(start, end, corr, stream=7):
    return Activity(stream, start, end, corr)


# --- attribution, hand-computed ------------------------------------------------------------------------------
def test_host_late_gap_is_host_wait_whole():
    # A ends at 10; B's launch call starts at 14 (after A ended) and B runs at 20: the whole 10 us gap is host wait
    idle = attribute([act(0, 10, 1), act(20, 30, 2)], {1: -5.0, 2: 14.0}, steps=1)
    assert (idle.host_wait_us, idle.kernel_wait_us, idle.other_idle_us) == (10, 0, 0)
    assert (idle.span_us, idle.busy_us, idle.gaps, idle.unresolved_us) == (30, 20, 1, 0)
    assert idle.host_wait_share == pytest.approx(1 / 3)


def test_sync_gap_is_other_and_a_short_queued_gap_is_kernel_wait():
    # B was launched at 5 (before A ended) but ran only after a gap of KERNEL_WAIT_US: not under HTA's
    # consecutive_kernel_delay, so it waited on something else (an event, a sync); C, queued too, follows after
    # half of it: under the delay, kernel wait. Neither is host wait: each was launched before the GPU went idle.
    short, held = KERNEL_WAIT_US / 2, KERNEL_WAIT_US
    b_start = 10 + held
    c_start = b_start + 10 + short
    idle = attribute([act(0, 10, 1), act(b_start, b_start + 10, 2), act(c_start, c_start + 5, 3)],
                     {1: -5.0, 2: 5.0, 3: 6.0}, steps=1)
    assert idle.host_wait_us == 0
    assert idle.kernel_wait_us == pytest.approx(short) and idle.other_idle_us == pytest.approx(held)
    assert idle.other_idle_share == pytest.approx((short + held) / (c_start + 5))


def test_kernel_wait_is_hta_default_consecutive_kernel_delay():
    """HTA's idle-time breakdown is the rule (see bench_core/measure/idle.py): its own default, read from it."""
    import inspect
    hta = pytest.importorskip("hta.trace_analysis")
    default = inspect.signature(hta.TraceAnalysis.get_idle_time_breakdown).parameters["consecutive_kernel_delay"]
    assert default.default == KERNEL_WAIT_US


def test_back_to_back_kernels_leave_no_gap():
    idle = attribute([act(0, 10, 1), act(10, 20, 2), act(20, 35, 3)], {1: -1.0, 2: 50.0, 3: 60.0}, steps=1)
    assert (idle.gaps, idle.host_wait_us, idle.kernel_wait_us, idle.other_idle_us) == (0, 0, 0, 0)
    assert idle.busy_share == 1.0


def test_two_streams_only_whole_gpu_idle_counts():
    # stream 7: [0, 10], [40, 50]; stream 8: [5, 25]. The GPU is idle only over [25, 40] (not [10, 40], which is
    # stream 7's own gap): judged against the GPU's last end (25) and the activity ending it (corr 2, launched 30)
    acts = [act(0, 10, 1, 7), act(40, 50, 2, 7), act(5, 25, 3, 8)]
    idle = attribute(acts, {1: -1.0, 2: 30.0, 3: 1.0}, steps=1)
    assert (idle.span_us, idle.busy_us, idle.host_wait_us, idle.gaps) == (50, 35, 15, 1)
    # launched at 20 instead: before the GPU's last end, so the 15 us are not host wait, and not under 30 us wait
    queued = attribute(acts, {1: -1.0, 2: 20.0, 3: 1.0}, steps=1)
    assert (queued.host_wait_us, queued.kernel_wait_us) == (0, 15)


def test_unlinked_and_unresolved_gaps():
    # no runtime call for corr 2: never host wait (HTA: no ts_runtime), and counted as unlinked
    idle = attribute([act(0, 10, 1), act(50, 60, 2)], {1: -1.0}, steps=1)
    assert (idle.host_wait_us, idle.other_idle_us, idle.unlinked_gaps) == (0, 40, 1)
    # launch call 0.5 us after the previous end: within one resolution, so its whole gap is unresolved
    near = attribute([act(0, 10, 1), act(50, 60, 2)], {1: -1.0, 2: 10.5}, steps=1)
    assert (near.host_wait_us, near.unresolved_us) == (40, 40)
    assert attribute([], {}, steps=1) is None


def test_round_trip_and_old_files_load():
    idle = attribute([act(0, 10, 1), act(20, 30, 2)], {1: -5.0, 2: 14.0}, steps=2)
    assert IdleBreakdown.from_dict(json.loads(json.dumps(idle.to_dict()))) == idle
    prof = StageProfile("cuda", 2, 0.01, 0.66, 1.0, dict.fromkeys(CATEGORIES, 0.0), (), idle)
    assert StageProfile.from_dict(json.loads(json.dumps(prof.to_dict()))) == prof
    old = prof.to_dict()
    del old["idle"]                               # a file saved before the idle attribution
    assert StageProfile.from_dict(old).idle is None


def test_cpu_profile_has_no_idle_breakdown():
    assert profile_from_cpu_ops([("aten::mm", 10.0)], steps=1).idle is None


# --- a saved trace: hand-computed, and HTA's own answer ----------------------------------------------------------
# tests/data/idle_trace.json: six activities on stream 7 (a memcpy among them), each with its runtime call and
# flow events. Gaps: 5 us queued (kernel wait), 40 us launched late (host wait), 100 us queued but held (other),
# 20 us memcpy launched late (host wait), 1 us queued (kernel wait).
def _saved() -> IdleBreakdown:
    acts, launches = inputs(from_chrome(json.loads(TRACE.read_text())))
    idle = attribute(acts, launches, steps=1)
    assert idle is not None
    return idle


def test_saved_trace_hand_computed():
    idle = _saved()
    assert (idle.span_us, idle.busy_us) == (400, 234)
    assert (idle.host_wait_us, idle.kernel_wait_us, idle.other_idle_us) == (60, 6, 100)
    assert (idle.gaps, idle.unresolved_us, idle.unlinked_gaps) == (5, 0, 0)


def test_saved_trace_equals_hta(tmp_path):
    hta = pytest.importorskip("hta.trace_analysis")
    shutil.copy(TRACE, tmp_path / TRACE.name)
    frame, _ = hta.TraceAnalysis(trace_dir=str(tmp_path)).get_idle_time_breakdown(visualize=False)  # its default
    theirs = dict(zip(frame["idle_category"], frame["idle_time"], strict=True))
    idle = _saved()
    assert theirs == {"host_wait": idle.host_wait_us, "kernel_wait": idle.kernel_wait_us,
                      "other": idle.other_idle_us}


# --- the bound and the label -----------------------------------------------------------------------------------
def test_bound_arithmetic():
    assert host_wait_bound_us(600, 25.0, resolution_us=1.0) == 625.0   # every gap's edges, plus the unresolved
    assert host_wait_bound_us(10, 3.0, resolution_us=0.5) == 8.0
    idle = IdleBreakdown(5, 100_000.0, 90_000.0, 6_000.0, 1_000.0, 3_000.0, gaps=500, unresolved_us=100.0)
    assert idle.bound_share == pytest.approx(idle.bound_us / 100_000.0)


def _hta_rounded(acts, launches):
    """What HTA reads of a trace: every timestamp rounded down to a whole microsecond (its trace parser's
    `round_down_time_stamps`), the resolution the bound must cover."""
    return ([Activity(a.stream, math.floor(a.start_us), math.floor(a.end_us), a.correlation) for a in acts],
            {c: float(math.floor(t)) for c, t in launches.items()})


def test_host_wait_beyond_the_bound_is_there_however_the_timestamps_were_rounded():
    """The bound's promise, from the trace format: host wait measured on whole-microsecond timestamps exceeds the
    true host wait by no more than `bound_us`, in the worst case: rounding down lengthens every gap by almost a
    microsecond."""
    gaps, eps = 200, 1e-3
    # activity i runs over [10 i + eps, 10 i + 6 - eps]: rounded down, each activity ends almost a microsecond
    # early and the next starts only eps early, so each gap grows by 1 - 2 eps
    starts = [10.0 * i + eps for i in range(gaps + 1)]
    ends = [10.0 * i + 6 - eps for i in range(gaps + 1)]
    acts = [act(s, e, i) for i, (s, e) in enumerate(zip(starts, ends, strict=True))]
    # each launched 1.5 us after the GPU went idle: the whole gap is host wait, and its order is resolved
    launches = {0: -3.0} | {i: ends[i - 1] + 1.5 for i in range(1, gaps + 1)}
    true_host = sum(starts[i] - ends[i - 1] for i in range(1, gaps + 1))
    truth = attribute(acts, launches, steps=1)
    assert truth.host_wait_us == pytest.approx(true_host)
    seen = attribute(*_hta_rounded(acts, launches), steps=1)
    assert (seen.gaps, seen.unresolved_us) == (gaps, 0)
    excess = seen.host_wait_us - true_host
    assert excess == pytest.approx(gaps * (1 - 2 * eps))   # every gap lengthened: the case is the worst
    assert excess <= seen.bound_us


def _profile(idle: IdleBreakdown, kernel_ms: float) -> StageProfile:
    return StageProfile("cuda", idle.steps, kernel_ms, idle.busy_share, 100.0, dict.fromkeys(CATEGORIES, 0.0),
                        (), idle)


def test_timed_host_wait_takes_off_what_the_profiler_added():
    # profiled steps of 30 ms each, 8 ms of them host wait; timed steps of 25 ms: at least 3 ms of host wait
    idle = IdleBreakdown(5, 150_000.0, 110_000.0, 40_000.0, 0.0, 0.0, gaps=100, unresolved_us=0.0)
    assert idle.timed_host_wait_ms(25.0) == pytest.approx(3.0)
    assert idle.timed_host_wait_ms(20.0) == pytest.approx(0.0)       # all the trace's host wait was the profiler's
    assert idle.timed_host_wait_ms(40.0) == pytest.approx(8.0)       # a profiled step no longer: all of it stays


def test_label_just_above_and_just_below_the_bound():
    # one step, spans = timed step = 10 ms; 400 gaps, none unresolved: the bound is 400 us (4% of the step, above
    # the equivalence margin, so the resolution alone decides here)
    def idle(host_us):
        return IdleBreakdown(1, 10_000.0, 10_000.0 - host_us, host_us, 0.0, 0.0, gaps=400, unresolved_us=0.0)
    above = bottleneck(_profile(idle(401.0), 9.599), median_ms=10.0)
    below = bottleneck(_profile(idle(399.0), 9.601), median_ms=10.0)
    assert above.verdict == "launch-bound" and above.host_wait_share == pytest.approx(0.0401)
    assert below.verdict == "gpu-bound" and below.host_wait_share == pytest.approx(0.0399)
    # GPU busy 95.99%: the old 90% line would call both gpu-bound; the host wait decides
    assert above.busy == pytest.approx(0.9599)


def test_a_resolved_host_wait_under_the_equivalence_margin_does_not_set_the_pace():
    """A host wait the timestamps resolve, but smaller than stats.EQUIVALENCE of the step: a host of any speed could
    take at most that off the step, no measurable effect. (An 8B stage 99.8% busy with 0.1% host wait was called
    launch-bound: docs/data/h100_2026-12-07_call51_seed_llama-3.1-8b_d4_1.json.)"""
    from bench_core.measure.stats import EQUIVALENCE

    def idle(host_us):   # 10 gaps: a bound of 10 us, 0.1% of the 10 ms step
        return IdleBreakdown(1, 10_000.0, 10_000.0 - host_us, host_us, 0.0, 0.0, gaps=10, unresolved_us=0.0)
    under = bottleneck(_profile(idle(10_000 * EQUIVALENCE - 1), 9.7), median_ms=10.0)
    over = bottleneck(_profile(idle(10_000 * EQUIVALENCE + 1), 9.7), median_ms=10.0)
    assert under.verdict == "gpu-bound" and "resolved, but under the 3%" in under.sentence
    assert over.verdict == "launch-bound"


def test_launch_bound_sentence_shows_the_shares():
    idle = IdleBreakdown(5, 200_000.0, 120_000.0, 76_000.0, 1_000.0, 3_000.0, gaps=1000, unresolved_us=0.0)
    b = bottleneck(_profile(idle, 24.0), median_ms=40.0)
    # per step: profiled 40 ms, host wait 15.2 ms; timed 40 ms: 38% of the step; bound 200 us = 0.5%
    assert b.verdict == "launch-bound" and b.host_wait_share == pytest.approx(0.38)
    assert b.sentence.startswith("launch-bound: the GPU waited for the host 38% of the step (38% of the profiled "
                                 "steps, whose host the profiler slows), other idle 2.0%; more than the 0.5% that "
                                 "1 µs timestamps could make of none. GPU busy 60%.")


def test_profiler_host_wait_alone_is_not_launch_bound():
    # the trace shows 40% host wait, but the timed step (25 ms) is as short as the GPU work: the profiler's own
    idle = IdleBreakdown(5, 210_000.0, 125_000.0, 85_000.0, 0.0, 0.0, gaps=3000, unresolved_us=0.0)
    b = bottleneck(_profile(idle, 25.0), median_ms=25.0)
    assert b.verdict == "gpu-bound" and b.host_wait_share == 0.0


def test_no_linked_launch_is_unknown():
    idle = IdleBreakdown(1, 100.0, 50.0, 0.0, 0.0, 50.0, gaps=2, unresolved_us=0.0, unlinked_gaps=2)
    assert bottleneck(_profile(idle, 0.05), median_ms=0.1).verdict == "unknown"


# --- the share in the files: one column spec owns `host_wait_share` ---------------------------------------------
def test_host_wait_share_in_csv_and_json():
    import csv
    import io
    from dataclasses import replace

    gpu_run = sample_runs().gpu_run

    from bench_core.results.formats import to_csv, to_json
    run = gpu_run()
    stages = list(run.stages)
    # the BF16 stage (20 ms timed): profiled 5 x 30 ms, 5 x 15 ms host wait -> at least 5 ms of a timed 20 ms step
    idle = IdleBreakdown(5, 150_000.0, 50_000.0, 75_000.0, 5_000.0, 20_000.0, gaps=4350, unresolved_us=0.0)
    stages[3] = replace(stages[3], profile=replace(stages[3].profile, idle=idle))
    run = replace(run, stages=tuple(stages))
    rows = list(csv.DictReader(io.StringIO(to_csv(run))))
    assert float(rows[3]["host_wait_share"]) == pytest.approx(0.25) and rows[3]["bottleneck"] == "launch-bound"
    assert rows[0]["host_wait_share"] == ""             # a record without the attribution: empty, never 0
    saved = json.loads(to_json(run))
    assert saved["stages"][3]["profile"]["idle"] == idle.to_dict()
    assert saved["summary"][3]["host_wait_share"] == pytest.approx(0.25)   # the raw JSON keeps what the label needs


def test_cpu_run_has_an_empty_host_wait_share():
    import csv
    import io
    from dataclasses import replace

    gpu_run = sample_runs().gpu_run

    from bench_core.results.formats import to_csv
    run = gpu_run()
    cpu = profile_from_cpu_ops([("aten::mm", 10.0)], steps=1)
    run = replace(run, device="cpu", config=replace(run.config, device="cpu"),
                  stages=tuple(replace(s, profile=cpu) if s.profile else s for s in run.stages))
    rows = list(csv.DictReader(io.StringIO(to_csv(run))))
    assert rows and all(r["host_wait_share"] == "" for r in rows)  # CPU: no launch/GPU split, not applicable


def test_bench_save_trace_saves_a_gzipped_trace(tmp_path, monkeypatch):
    import gzip
    from types import SimpleNamespace

    from bench_core.run.step import _save_trace
    prof = SimpleNamespace(export_chrome_trace=lambda path: Path(path).write_text('{"traceEvents": []}'))
    monkeypatch.delenv("BENCH_SAVE_TRACE", raising=False)
    _save_trace(prof, "apex-fusedadam+apex-fusedln+bf16")
    assert not list(tmp_path.iterdir())                 # off unless asked
    monkeypatch.setenv("BENCH_SAVE_TRACE", str(tmp_path / "traces"))
    _save_trace(prof, "apex-fusedadam+apex-fusedln+bf16")
    saved = tmp_path / "traces" / "trace_apex-fusedadam_apex-fusedln_bf16.json.gz"
    assert json.loads(gzip.decompress(saved.read_bytes())) == {"traceEvents": []}
