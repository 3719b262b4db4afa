"""A sweep's spec (sweep.core.spec): the grid and its family rules, the axes, the budget and the comparison, bad
input refused naming its flag."""

import pytest

from bench_core.config.bench_config import BenchConfig, ConfigError
from bench_core.config.settings import Limits
from bench_core.models.families import mlp_hidden
from bench_core.sweep.core.spec import (
    Axis,
    SweepSpec,
    check,
    grid,
    parse_axes,
    parse_budget,
    parse_comparison,
)

GPT2_SMALL = BenchConfig(depth=12, width=768, heads=12, seq_len=1024, batch_size=8, vocab_size=50304)


def test_grid_varies_the_first_axis_fastest_and_heads_follow_the_width():
    points = grid((Axis("width", (256, 512)), Axis("batch_size", (4, 8))), GPT2_SMALL)
    assert [p.values for p in points] == [(("width", 256), ("batch_size", 4)), (("width", 512), ("batch_size", 4)),
                                          (("width", 256), ("batch_size", 8)), (("width", 512), ("batch_size", 8))]
    assert [(p.config.width, p.config.heads, p.config.batch_size) for p in points] == [
        (256, 4, 4), (512, 8, 4), (256, 4, 8), (512, 8, 8)]     # head size 64, as the base's 768/12
    assert all(p.config.depth == 12 and p.config.seq_len == 1024 for p in points)


def test_the_mlp_width_is_the_familys_own_at_each_point():
    llama = BenchConfig(family="llama", depth=2, width=768, heads=12, seq_len=64, batch_size=2, vocab_size=512)
    points = grid((Axis("width", (768, 2048)),), llama)
    assert [mlp_hidden(p.config) for p in points] == [2048, 5632]   # 2/3 of 4·d, rounded up to 256
    gpt = grid((Axis("width", (256,)),), GPT2_SMALL)[0]
    assert mlp_hidden(gpt.config) == 1024


def test_a_point_that_breaks_a_family_rule_is_refused_by_its_axis_values():
    llama = BenchConfig(family="llama", depth=2, width=64, heads=4, seq_len=64, batch_size=2, vocab_size=512)
    ok = SweepSpec(parse_comparison("adam-fused", "llama"), llama, (Axis("width", (64, 128)),), None)
    assert len(check(ok, Limits(), False, {"cpu": None})) == 2
    odd = BenchConfig(family="llama", depth=2, width=60, heads=4, seq_len=64, batch_size=2, vocab_size=512)
    bad = SweepSpec(ok.comparison, odd, (Axis("width", (60,)),), None)   # head size 15: rotary needs an even one
    with pytest.raises(ConfigError, match="even head size") as err:
        check(bad, Limits(), False, {"cpu": None})
    assert err.value.field == "axis (width=60)"
    indivisible = SweepSpec(parse_comparison("adam-fused", "gpt"), GPT2_SMALL, (Axis("width", (200,)),), None)
    with pytest.raises(ConfigError) as err:       # 200 // 64 = 3 heads, and 200 is not divisible by 3
        check(indivisible, Limits(), False, {"cpu": None})
    # said as the sweep's user set it: heads follow the width at the base's head size, 768 / 12 = 64
    assert err.value.field == "axis width" and err.value.value == 200
    assert "must be a multiple of the head size 64 (the base shape's width 768 / heads 12" in str(err.value)


def test_too_many_points_are_refused_before_anything_runs():
    spec = SweepSpec(parse_comparison("adam-fused", "gpt"), GPT2_SMALL,
                     parse_axes(["width=256,512,768", "batch_size=1,2"]), None)
    with pytest.raises(ConfigError, match="6 points exceed the limit of 5"):
        check(spec, Limits(max_sweep_points=5), False, {"cpu": None})


@pytest.mark.parametrize("text, values", [("width=1024,256,512", (256, 512, 1024)), ("width=256:2048:x2", (256, 512,
                         1024, 2048)), ("batch_size=4:16:+4", (4, 8, 12, 16)), ("seq_len = 128", (128,))])
def test_axis_values_as_lists_or_ranges(text, values):
    assert parse_axes([text])[0].values == values


@pytest.mark.parametrize("texts, field, words", [
    (["heads=4,8"], "axis", "unknown axis"), (["width="], "axis width", "at least one value"),
    (["width=a,b"], "axis width", "positive integers"), (["width=0,64"], "axis width", "positive integers"),
    (["width=64,64"], "axis width", "twice"), (["width=512:256:x2"], "axis width", "START <= STOP"),
    (["width=64", "width=128"], "axis", "named twice"), (["width=64", "depth=2", "seq_len=64"], "axis", "at most 2"),
    ([], "axis", "one or two axes"), (["width"], "axis", "NAME=VALUES")])
def test_bad_axes_name_the_flag(texts, field, words):
    with pytest.raises(ConfigError, match=words) as err:
        parse_axes(texts)
    assert err.value.field == field


@pytest.mark.parametrize("text, seconds", [("10m", 600), ("90s", 90), ("1h30m", 5400), ("45", 45), (None, None),
                                           ("", None)])
def test_budget(text, seconds):
    assert parse_budget(text) == seconds


@pytest.mark.parametrize("text", ["ten minutes", "10x", "0", "0m", "5m10"])
def test_bad_budget(text):
    with pytest.raises(ConfigError) as err:
        parse_budget(text)
    assert err.value.field == "budget"


def test_a_lever_is_compared_with_the_lever_it_replaces_in_the_familys_form():
    fp8 = parse_comparison("fp8-torchao", "llama")
    assert (fp8.a.key, fp8.b.key) == ("adam-fused+rmsnorm+bf16", "adam-fused+rmsnorm+fp8-torchao")
    flce = parse_comparison("liger-flce", "gpt")
    assert (flce.a.head, flce.b.head) == ("ce", "liger-flce")
    compiled = parse_comparison("compile", "gpt")           # a native lever: against its kind's baseline
    assert (compiled.a.compile, compiled.b.compile) == ("eager", "compile")
    keys = parse_comparison("adam-fused+layernorm+bf16+compile,adam-fused+layernorm+fp8-torchao+compile", "gpt")
    assert keys.b.precision == "fp8-torchao" and keys.a.compile == keys.b.compile == "compile"


@pytest.mark.parametrize("text, words", [("", "name a lever"), ("warp-drive", "unknown lever"),
                                         ("adam", "baseline"), ("a,b,c", "exactly two"),
                                         ("adam+layernorm+fp32,adam+layernorm+fp32", "the same"),
                                         ("adam+layernorm+fp32,adam+layernorm+fp32+gpus2", "one-GPU")])
def test_bad_comparisons(text, words):
    with pytest.raises(ConfigError, match=words) as err:
        parse_comparison(text, "gpt")
    assert err.value.field == "compare"
