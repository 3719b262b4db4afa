"""The contribution verdict: each lever against the stage that differs from it by that lever alone."""
import math
import re
import statistics
from dataclasses import replace

import pytest

from bench_core.levers.presets import TWINS, is_twin, preset
from bench_core.levers.stage import Stage
from bench_core.measure import stats
from bench_core.results import contributions as contributions_module
from bench_core.results import formats
from bench_core.results.contributions import contributions, vendor_effects
from bench_core.results.headline import headline
from bench_core.results.near_one import percent, times
from bench_core.results.records import Status, initial_stage
from bench_core.results.summary import summarize
from helpers import ROOT, sample_runs

gpu_run = sample_runs().gpu_run

H200_SEED = ROOT / "docs/data/h200_2026-12-03_call3_seed_gpt2-medium_run1.json"


def _h200_seed():
    return summarize(formats.parse_json(H200_SEED.read_bytes())[0])


def test_old_seed_ladder_names_each_lever_from_its_one_lever_pair():
    """The imported H200 seed run has no twins: FusedAdam is read against plain Adam, and says so."""
    summary = _h200_seed()
    by = {c.lever: c for c in contributions(summary)}
    assert set(by) == {"Apex FusedAdam", "Apex FusedLayerNorm", "BF16"}
    adam, ln, bf16 = by["Apex FusedAdam"], by["Apex FusedLayerNorm"], by["BF16"]
    assert (adam.stage_key, adam.against_key) == ("apex-fusedadam+layernorm+fp32", "adam+layernorm+fp32")
    assert not adam.native_twin and "this run has no Adam fused twin" in adam.words
    # across processes the ratio is the geometric mean of each round's ratio of medians (paired by round)
    rounds = {s.key: [statistics.median(r) for r in s.result.round_series] for s in summary.stages}
    paired = zip(rounds[adam.against_key], rounds[adam.stage_key], strict=True)
    assert adam.ratio == pytest.approx(math.exp(statistics.fmean(math.log(b / a) for b, a in paired)), rel=1e-12)
    assert (ln.stage_key, ln.against_key) == ("apex-fusedadam+apex-fusedln+fp32", "apex-fusedadam+layernorm+fp32")
    assert ln.native_twin and not ln.measurable and "no measurable effect" in ln.words
    assert "faster" not in ln.words
    assert (bf16.stage_key, bf16.against_key) == ("apex-fusedadam+apex-fusedln+bf16",
                                                  "apex-fusedadam+apex-fusedln+fp32")
    assert bf16.measurable and bf16.launch_bound and "depends on the host CPU" in bf16.words
    kernel = {s.key: s.profile.gpu_kernel_ms for s in summary.stages}
    assert bf16.gpu_time_ratio == kernel[bf16.against_key] / kernel[bf16.stage_key]
    assert f"GPU-time ratio ×{bf16.gpu_time_ratio:.2f}" in bf16.words
    lines = headline(summary).lines
    assert lines[:3] == tuple(c.words for c in contributions(summary))   # the verdict comes first


def _run(cases):
    run = gpu_run()
    stages = tuple(replace(initial_stage(i, stage, 4), status=Status.OK, verdict="verified", rounds=(4, 4),
                           times_ms=times) for i, (stage, times) in enumerate(cases))
    return replace(run, stages=stages)


def test_the_native_twin_is_preferred_over_the_baseline_lever():
    flat = (100.0,) * 8
    run = _run(((Stage("adam", "layernorm", "fp32"), flat),
                (Stage("apex-fusedadam", "layernorm", "fp32"), (80.0,) * 8),
                (Stage("adam-fused", "layernorm", "fp32"), (40.0,) * 8)))
    by = {c.lever: c for c in contributions(summarize(run))}
    apex = by["Apex FusedAdam"]
    assert apex.native_twin and apex.against_key == "adam-fused+layernorm+fp32"
    assert abs(apex.ratio - 0.5) < 1e-9 and "slower" in apex.words and "its native twin Adam fused" in apex.words
    assert by["Adam fused"].against_key == "adam+layernorm+fp32"


def _needed_ok(n: int, sd: float) -> bool:
    """The inequality stats.processes_needed solves, from the t-table: t(n-1) sd / sqrt(n) <= log(1.03)."""
    return stats.t_quantile(0.95, n - 1) * sd / math.sqrt(n) <= math.log1p(stats.EQUIVALENCE)


def test_an_interval_that_holds_one_but_reaches_past_the_margin_is_inconclusive_never_a_plus_minus():
    base = (100.0, 101.0, 99.0, 100.0, 104.0, 96.0, 100.0, 100.0)
    run = _run(((Stage("adam", "layernorm", "fp32"), base),
                (Stage("adam-fused", "layernorm", "fp32"), (99.0, 100.0, 98.0, 99.0, 100.0, 103.0, 95.0, 99.0))))
    summary = summarize(run)
    (c,) = contributions(summary)
    low, high = c.interval
    assert low <= 1.0 <= high and not (1 / 1.03 <= low and high <= 1.03)   # holds ×1.00, reaches past 3%
    assert c.effect == stats.Effect.INCONCLUSIVE and not c.measurable
    assert c.words.startswith(f"Adam fused in FP32 against Adam: inconclusive: ×{c.ratio:.2f} (95% CI "
                              f"×{low:.2f}–{high:.2f}, 2 processes; "), c.words
    assert "±" not in c.words and "no measurable effect" not in c.words and "faster" not in c.words
    # what would settle it: the fewest processes whose interval narrows within 3%, at the pair's own spread
    by = {s.key: s.result.round_series for s in summary.stages}
    d = [math.log(statistics.median(b) / statistics.median(a))
         for b, a in zip(by[c.against_key], by[c.stage_key], strict=True)]
    n = c.paired.settle.needed
    assert _needed_ok(n, statistics.stdev(d)) and (n == 2 or not _needed_ok(n - 1, statistics.stdev(d)))
    assert f"about {n} processes a stage would tell it within 3% either way (--repeats {n})" in c.words
    text = "\n".join(headline(summary).lines)
    assert "Fastest" not in text and "No stage is measurably faster" in text and "±" not in text


def test_no_measurable_effect_only_where_the_interval_lies_within_the_margin():
    """The same contribution rule at the margin's edges: an interval that holds ×1.00 inside [1/1.03, 1.03] is no
    measurable effect; moved just past either edge, inconclusive; clear of ×1.00, measured."""
    e = stats.EQUIVALENCE
    inside, edge = (1 / (1 + e), 1 + e), 1e-9
    assert stats.effect_of(*inside) == stats.Effect.NO_MEASURABLE_EFFECT
    assert stats.effect_of(inside[0] - edge, inside[1]) == stats.Effect.INCONCLUSIVE
    assert stats.effect_of(inside[0], inside[1] + edge) == stats.Effect.INCONCLUSIVE
    assert stats.effect_of(1 + edge, 1 + 2 * e) == stats.Effect.MEASURED
    assert stats.effect_of(1 - 2 * e, 1 - edge) == stats.Effect.MEASURED


def test_a_pair_is_its_two_stages_paired_by_round_not_the_quotient_of_their_baseline_intervals():
    """The baseline drifts from process to process and the two stages share the drift of their round: pairing them
    cancels it, where the quotient of their intervals against the baseline counted its noise twice."""
    run = _run_in_rounds(((Stage("adam", "layernorm", "fp32"), _rounds(100.0, 112.0, 95.0)),
                          (Stage("adam-fused", "layernorm", "fp32"), _rounds(90.0, 99.0, 88.0)),
                          (Stage("adam-fused", "layernorm", "bf16"), _rounds(80.0, 89.0, 77.0))))
    summary = summarize(run)
    by = {s.key: s for s in summary.stages}
    bf16 = next(c for c in contributions(summary) if c.lever == "BF16")
    mine, other = by[bf16.stage_key], by[bf16.against_key]
    paired = stats.speedup_interval(other.result.round_series, mine.result.round_series)
    assert bf16.interval == (paired.low, paired.high) and bf16.ratio == paired.estimate
    assert bf16.interval[0] <= bf16.ratio <= bf16.interval[1]
    quotient = (mine.speedup_ci[0] / other.speedup_ci[1], mine.speedup_ci[1] / other.speedup_ci[0])
    assert quotient[0] < bf16.interval[0] and bf16.interval[1] < quotient[1]


def test_stages_that_differ_by_two_levers_are_no_pair():
    run = _run(((Stage("adam", "layernorm", "fp32"), (100.0,) * 8),
                (Stage("adam-fused", "layernorm", "bf16"), (20.0,) * 8)))
    assert contributions(summarize(run)) == ()


def test_seed_runs_its_native_twins_after_its_own_stages():
    keys = [s.key for s in preset("seed")]
    assert keys[:4] == ["adam+layernorm+fp32", "apex-fusedadam+layernorm+fp32", "apex-fusedadam+apex-fusedln+fp32",
                        "apex-fusedadam+apex-fusedln+bf16"]
    assert keys[4:] == [s.key for s in TWINS["seed"]]
    assert [is_twin("seed", s) for s in preset("seed")] == [False] * 4 + [True] * 3
    assert not is_twin("native", Stage("adam-fused", "layernorm", "fp32"))
    # each Apex lever of the seed ladder has a pair that differs from it by its own PyTorch twin alone
    seed = set(preset("seed"))
    assert Stage("apex-fusedadam", "layernorm", "fp32").replace(optimizer="adam-fused") in seed
    assert Stage("apex-fusedadam", "apex-fusedln", "bf16").replace(norm="layernorm") in seed
    assert Stage("adam-fused", "layernorm", "bf16").replace(precision="fp32") in seed


def test_the_cli_and_the_report_open_with_the_same_answer_card_and_contributions():
    import html
    import io

    from rich.console import Console

    from bench_core.results.answer import answer
    from bench_core.results.report import render_html
    from bench_core.results.table import print_table
    summary = _h200_seed()
    card = answer(summary)
    console = Console(record=True, width=300, file=io.StringIO())
    print_table(summary, console)
    cli = console.export_text()
    assert cli.startswith("Answer:\n  " + card.lines[0].text)
    # each contribution a row, its two stages in a numbered note under the table, before the stages' own table
    assert card.rows and all(cli.index(r.effect) < cli.index(f"{i}. {r.stages}") < cli.index("┃ Stage")
                             for i, r in enumerate(card.rows, 1))
    # the rest of the verdict under its own heading, as in the report: never listed as a lever's contribution
    rest = headline(summary).lines[len(headline(summary).contributions):]
    assert rest and all(cli.index("Verdict:") < cli.index(line.replace("**", "")[:40]) for line in rest)
    page = html.unescape(render_html(summary.run))
    assert page.index("<section id='answer'>") < page.index("<section id='verdict'>") < page.index("<table>")
    assert re.findall(r"<li class='answer-line'>(.*?)</li>", page) == [
        line.markdown.replace("**", "<b>", 1).replace("**", "</b>", 1) for line in card.lines]
    assert re.findall(r"<tr title='(.*?)'>", page) == [r.stages for r in card.rows]


def test_the_report_shows_no_cpu_rss_as_memory_and_scrolls_its_tables_inside_a_phone():

    from bench_core.results.report import render_html
    page = render_html(sample_runs().gpu_ladder_on_cpu())
    assert "Peak RSS" not in page and "Peak memory" not in page
    assert "<div class='scroll'><table>" in page and ".scroll{max-width:100%;overflow-x:auto}" in page


H200_SEED_TWINS = ROOT / "docs/data/h200_2026-12-03_call12_seed_small_after_apex.json"


def test_the_apex_sentence_sets_the_apex_bf16_stage_against_native_bf16():
    """The seed ladder with its twins on the H200: Apex's levers together, from the two stages' own intervals."""
    summary = summarize(formats.parse_json(H200_SEED_TWINS.read_bytes())[0])
    [apex] = vendor_effects(summary)
    assert (apex.vendor, apex.stage_key, apex.twin_key) == ("Apex", "apex-fusedadam+apex-fusedln+bf16",
                                                            "adam-fused+layernorm+bf16")
    by = {s.key: s for s in summary.stages}
    mine, twin = by[apex.stage_key], by[apex.twin_key]
    paired = stats.speedup_interval(twin.result.round_series, mine.result.round_series)
    # within one process the point is the ratio of all steps' medians, which the step bootstrap resamples around
    point = paired.estimate if paired.estimate is not None else twin.timing.median_ms / mine.timing.median_ms
    assert (apex.ratio, apex.interval) == (point, (paired.low, paired.high))
    assert apex.measurable
    way = "adds about" if apex.ratio > 1 else "costs about"
    d = apex.decimals   # as many as keep its point off its bounds (results.near_one)
    assert apex.words.startswith(f"Apex {way} {percent(apex.ratio - 1, d)} here ({times(apex.ratio, d)}; 95% CI")
    assert "launch-bound" in apex.words   # this Apex BF16 stage is launch-bound on the H200
    lines = headline(summary)
    assert lines.contributions[-1] == apex.words == lines.lines[len(lines.contributions) - 1]


def test_the_apex_sentence_says_inconclusive_when_its_interval_holds_one_past_the_margin():
    base = (100.0, 101.0, 99.0, 100.0, 104.0, 96.0, 100.0, 100.0)
    run = _run(((Stage("adam", "layernorm", "fp32"), base),
                (Stage("adam-fused", "layernorm", "bf16"), tuple(t / 2 for t in base)),
                (Stage("apex-fusedadam", "apex-fusedln", "bf16"), (49.5, 50.0, 49.0, 49.5, 50.0, 51.5, 47.5, 49.5))))
    [apex] = vendor_effects(summarize(run))
    assert not apex.measurable and apex.interval is not None and apex.interval[0] < 1 < apex.interval[1]
    assert apex.paired.effect == stats.effect_of(*apex.interval) == stats.Effect.INCONCLUSIVE
    assert apex.words.startswith(f"Apex against its native twin: inconclusive: ×{apex.ratio:.2f} (95% CI "
                                 f"×{apex.interval[0]:.2f}–{apex.interval[1]:.2f}, 2 processes; ")
    assert "±" not in apex.words
    assert "adds about" not in apex.words and "costs about" not in apex.words


def test_a_cpu_seed_run_has_no_apex_sentence():
    """On a CPU the Apex stages cannot run (their twins do): no Apex pair, so no sentence credits or blames Apex."""
    run = _run([(stage, (100.0 - 5 * i,) * 8) for i, stage in enumerate(preset("seed"))])
    stages = tuple(replace(s, status=Status.UNAVAILABLE, times_ms=(), rounds=(), reason="needs CUDA")
                   if s.stage.vendors else s for s in run.stages)
    summary = summarize(replace(run, device="cpu", stages=stages))
    assert [s.key for s in summary.stages if s.ranked] == ["adam+layernorm+fp32", "adam-fused+layernorm+fp32",
                                                           "adam-fused+layernorm+bf16"]
    assert vendor_effects(summary) == ()
    assert not any(line.startswith("Apex ") for line in headline(summary).contributions)
    # with the Apex stages run, the same ladder gains the sentence: the test is not empty by construction
    assert [v.vendor for v in vendor_effects(summarize(run))] == ["Apex"]


def _rounds(*medians):
    """One stage's times: four equal steps a process, one process a median."""
    return tuple(m for m in medians for _ in range(4))


def _run_in_rounds(cases):
    run = gpu_run()
    stages = tuple(replace(initial_stage(i, stage, 4), status=Status.OK, verdict="verified",
                           rounds=(4,) * (len(times) // 4), times_ms=times) for i, (stage, times) in enumerate(cases))
    return replace(run, stages=stages)


def test_levers_that_each_measure_nothing_but_together_do_say_so():
    """A CPU run's verdict: each lever 'no measurable effect', the fastest stage ×1.10 with an interval clear of
    ×1.00. The gap is said where it happens, with the stage's own figure (a new user read it as a contradiction)."""
    run = _run_in_rounds(((Stage("adam", "layernorm", "fp32"), _rounds(100.0, 100.0, 100.0)),
                          (Stage("adam-fused", "layernorm", "fp32"), _rounds(95.0, 100.0, 92.0)),
                          (Stage("adam-fused", "layernorm", "bf16"), _rounds(90.0, 91.0, 92.0))))
    summary = summarize(run)
    found = contributions(summary)
    assert [c.lever for c in found] == ["Adam fused", "BF16"] and not any(c.measurable for c in found)
    fastest = summary.fastest
    low, high = fastest.speedup_ci
    assert fastest.key == "adam-fused+layernorm+bf16" and low > 1.0
    lines = headline(summary).lines
    assert lines[2].startswith(
        f"No single lever's effect is measurable here, but together Adam fused and BF16 measure ×{fastest.speedup:.2f} "
        f"(95% CI ×{low:.2f}–{high:.2f}, across 3 processes; adam-fused+layernorm+bf16 vs adam+layernorm+fp32)")
    combined = contributions_module.combined_effect(summary, found)   # computed once, in the engine
    assert combined.levers == ("Adam fused", "BF16") and lines[:3] == (*(c.words for c in found), combined.words)
    assert (combined.ratio, combined.interval) == (fastest.speedup, fastest.speedup_ci)
    assert any(line.startswith("Fastest: **adam-fused+layernorm+bf16**") for line in lines)


def test_no_combined_line_where_a_lever_is_measurable_or_the_stage_is_not():
    measurable = _run_in_rounds(((Stage("adam", "layernorm", "fp32"), _rounds(100.0, 100.0, 100.0)),
                                 (Stage("adam-fused", "layernorm", "fp32"), _rounds(80.0, 81.0, 80.0))))
    summary = summarize(measurable)
    found = contributions(summary)
    assert found[0].measurable and contributions_module.combined_effect(summary, found) is None
    neither = _run_in_rounds(((Stage("adam", "layernorm", "fp32"), _rounds(100.0, 100.0, 100.0)),
                              (Stage("adam-fused", "layernorm", "fp32"), _rounds(95.0, 100.0, 105.0)),
                              (Stage("adam-fused", "layernorm", "bf16"), _rounds(90.0, 100.0, 104.0))))
    summary = summarize(neither)
    assert contributions_module.combined_effect(summary, contributions(summary)) is None
    assert not any("No single lever" in line for line in headline(summary).lines)


def test_a_ladder_speedup_near_one_takes_the_third_decimal_the_sweep_gives_it():
    """Two decimals read a lever measurably 0.3% slower as "×1.00 (slower; 95% CI ×1.00–1.00)" and Apex as "costs
    about 0%": every ladder sentence takes its decimals from results.near_one, as the sweep's do, and a percentage
    as many as the speedup beside it."""
    slower = summarize(_run_in_rounds(((Stage("adam", "layernorm", "fp32"), _rounds(100.0, 100.0, 100.0)),
                                       (Stage("adam-fused", "layernorm", "fp32"), _rounds(100.3, 100.25, 100.35)))))
    (c,) = contributions(slower)
    low, high = c.interval
    assert c.measurable and 0.99 < low < high < 1.0
    assert f": ×{c.ratio:.3f} (slower; 95% CI ×{low:.3f}–{high:.3f}; " in c.words and "×1.00 " not in c.words
    stage = slower.stages[1]
    assert stage.speedup_text == f"×{stage.speedup:.3f} ({low:.3f}–{high:.3f})" and stage.speedup_text != \
        f"×{stage.speedup:.2f} ({low:.2f}–{high:.2f})"

    # Apex against its native twin, 0.3% slower: its percentage as precise as its speedup
    apex = summarize(_run_in_rounds(((Stage("adam", "layernorm", "fp32"), _rounds(100.0, 100.0, 100.0)),
                                     (Stage("adam-fused", "layernorm", "bf16"), _rounds(50.0, 50.0, 50.0)),
                                     (Stage("apex-fusedadam", "apex-fusedln", "bf16"),
                                      _rounds(50.15, 50.125, 50.175)))))
    [v] = vendor_effects(apex)
    assert v.measurable and v.ratio < 1
    assert v.words.startswith(f"Apex costs about 0.3% here (×{v.ratio:.3f}; 95% CI ×{v.interval[0]:.3f}–"
                              f"{v.interval[1]:.3f}; "), v.words
    assert headline(apex).one_liner.startswith(f"Apex vs its native twin ×{v.ratio:.3f} (95% CI "
                                               f"×{v.interval[0]:.3f}–{v.interval[1]:.3f})")

    # a lever with no measurable effect near ×1.00: its interval as precise as the figure beside it
    flat = summarize(_run_in_rounds(((Stage("adam", "layernorm", "fp32"), _rounds(100.0, 100.0, 100.0)),
                                     (Stage("adam-fused", "layernorm", "fp32"), _rounds(99.9, 100.3, 100.1)))))
    (n,) = contributions(flat)
    assert n.effect == stats.Effect.NO_MEASURABLE_EFFECT
    assert f"no measurable effect: ×{n.ratio:.3f} (95% CI ×{n.interval[0]:.3f}–{n.interval[1]:.3f}, within 3% of " \
           "×1.00; " in n.words, n.words

    # together measurable, each alone not, the stage 0.3% faster: the combined line and the verdict's "Fastest"
    together = summarize(_run_in_rounds(((Stage("adam", "layernorm", "fp32"), _rounds(100.0, 100.0, 100.0)),
                                         (Stage("adam-fused", "layernorm", "fp32"), _rounds(99.2, 100.6, 99.9)),
                                         (Stage("adam-fused", "layernorm", "bf16"), _rounds(99.7, 99.72, 99.68)))))
    fastest = together.fastest
    lo, hi = fastest.speedup_ci
    assert fastest.key == "adam-fused+layernorm+bf16" and 1.0 < lo < hi < 1.01
    lines = headline(together).lines
    d = fastest.decimals   # three near ×1.00, a fourth where three would print its point on a bound
    assert d >= 3
    said = f"×{fastest.speedup:.{d}f} (95% CI ×{lo:.{d}f}–{hi:.{d}f}, across 3 processes"
    assert any(line.startswith("No single lever's effect is measurable") and f"measure {said}" in line
               for line in lines), lines
    assert any(line.startswith("Fastest: ") and said in line for line in lines), lines
