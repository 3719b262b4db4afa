"""The Benchmark page's result of a CPU run, as a new user read it: every lever 'no measurable effect' beside a
verdict of ×1.10, and a CPU-op bar (35.1 ms) longer than its 12.37 ms step, neither explained. Each lever now reads
inconclusive (its interval holds ×1.00 but reaches past 3%), never "no measurable effect" nor a ±."""
import re
from dataclasses import replace

from test_pages import CFG, figure, verdict_lines

from bench_core.measure import stats
from bench_core.measure.stats import Effect
from bench_core.results.answer import answer
from bench_core.results.contributions import contributions
from bench_core.results.records import Status
from bench_core.results.summary import summarize
from helpers import sample_runs, wait


def replay_cpu_run(run, probe, hooks):
    """Stands in for the runner: the job's stages end as sample_runs.cpu_run() measured them."""
    for stage in sample_runs().cpu_run().stages:
        run = run.with_stage(stage)
        hooks.on_stage_done(run, stage)
    return replace(run, status=Status.DONE)


def test_a_cpu_runs_result_explains_its_verdict_and_its_longer_bars(app, manager, monkeypatch):
    monkeypatch.setattr(manager, "_run_all", replay_cpu_run)
    stages = [s.stage for s in sample_runs().cpu_run().stages]
    done = wait(manager, manager.submit(CFG, stages, "native", session_id="s").job_id)
    assert [s.status for s in done.run.stages] == [Status.OK] * 3
    at = app()
    lines = verdict_lines(at)
    summary = summarize(sample_runs().cpu_run())
    found = contributions(summary)
    assert [c.effect for c in found] == [stats.effect_of(*c.interval) for c in found] == [Effect.INCONCLUSIVE] * 2
    # each lever a row of the answer card's table, in the statistics' own word
    rows = at.dataframe[0].value
    assert list(rows["effect"]) == [r.effect for r in answer(summary).rows]
    assert all(e.endswith(" inconclusive") for e in rows["effect"]) and not any("±" in line for line in lines), lines
    # the noisy stage's processes, each with its own median
    [noisy] = [s for s in summary.stages if s.noisy]
    assert noisy.process_medians_text.startswith("per process ")
    assert any(f"{noisy.key} — {noisy.noise_reason}; {noisy.process_medians_text}" in line for line in lines), lines
    [together] = [line for line in lines if "No single lever's effect is measurable here" in line]
    assert "together Adam fused and BF16 measure ×1.10 (95% CI ×1.08–1.11, across 3 processes; " \
           "adam-fused+layernorm+bf16 vs adam+layernorm+fp32)" in together
    assert any(line.startswith("- Fastest: **adam-fused+layernorm+bf16** at 12.37 ms a step, ×1.10") for line in lines)
    title = re.sub(r"<[^>]+>", " ", figure(at, "Where the time goes")["layout"]["title"]["text"])
    assert "no contradiction" in title and "35.1 ms of ops in a 12.37 ms step" in " ".join(title.split()), title


def test_a_cpu_runs_peak_rss_is_charted_as_the_cli_shows_it(app, manager, monkeypatch):
    """The CLI's Peak RSS column on a CPU run, charted on the page under its own name (never as GPU memory)."""
    monkeypatch.setattr(manager, "_run_all", replay_cpu_run)
    stages = [s.stage for s in sample_runs().cpu_run().stages]
    wait(manager, manager.submit(CFG, stages, "native", session_id="s").job_id)
    chart = figure(app(), "Peak RSS per stage")
    [bars] = chart["data"]
    expected = {s.key: s.peak_rss_mib for s in sample_runs().cpu_run().stages}
    assert dict(zip(bars["y"], bars["x"], strict=True)) == expected
