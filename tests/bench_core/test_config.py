from dataclasses import replace

import pytest

from bench_core.config.bench_config import (
    GIB,
    BenchConfig,
    ConfigError,
    defaults_for,
)
from bench_core.config.settings import Limits, load_limits
from bench_core.levers.presets import preset
from bench_core.levers.stage import Stage
from bench_core.models.families import collect_errors, estimate_memory, validate

LIMITS = Limits()
FREE = {"cpu": 16 * GIB, "cuda": None}
OK = BenchConfig(depth=2, width=64, heads=4, seq_len=32, batch_size=2, vocab_size=256, warmup=1, iters=2,
                 device="cpu")


def error_for(cfg, limits=LIMITS, cuda=False, free=FREE) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        validate(cfg, limits, cuda, free)
    return info.value


def test_valid_config_passes():
    assert validate(OK, LIMITS, False, FREE) is OK


@pytest.mark.parametrize("field", ["depth", "width", "heads", "seq_len", "batch_size", "vocab_size",
                                   "warmup", "iters"])
@pytest.mark.parametrize("value", [0, -3])
def test_non_positive_values_are_refused(field, value):
    err = error_for(replace(OK, **{field: value}))
    assert err.field == field and err.value == value and "positive" in str(err)


@pytest.mark.parametrize("value", [2.5, "8", True, None])
def test_non_integer_values_are_refused(value):
    err = error_for(replace(OK, batch_size=value))
    assert err.field == "batch_size" and "integer" in str(err)


def test_width_not_divisible_by_heads():
    err = error_for(replace(OK, width=66, heads=4))
    assert err.field == "width" and "divisible by heads (4)" in str(err)


def test_heads_greater_than_width():
    err = error_for(replace(OK, width=8, heads=16))
    assert err.field == "heads" and "must not exceed width (8)" in str(err)


@pytest.mark.parametrize("field,cap", [("seq_len", "max_seq_len"), ("batch_size", "max_batch_size"),
                                       ("vocab_size", "max_vocab_size"), ("iters", "max_iters"),
                                       ("warmup", "max_warmup"), ("depth", "max_depth")])
def test_caps_are_enforced_and_configurable(field, cap):
    limits = replace(LIMITS, **{cap: 3})
    err = error_for(replace(OK, **{field: 4}), limits=limits)
    assert err.field == field and "exceeds the limit of 3" in str(err)


def test_caps_come_from_environment():
    assert load_limits({"BENCH_MAX_SEQ_LEN": "128"}).max_seq_len == 128
    with pytest.raises(ValueError, match="BENCH_MAX_ITERS"):
        load_limits({"BENCH_MAX_ITERS": "lots"})


def test_tokens_per_step_cap():
    err = error_for(replace(OK, seq_len=64, batch_size=8), limits=replace(LIMITS, max_tokens_per_step=256))
    assert "seq_len x batch_size = 512 exceeds the limit of 256" in str(err)


def test_memory_estimate_above_free_memory():
    big = replace(OK, depth=48, width=4096, heads=32, seq_len=2048, batch_size=64, vocab_size=50304)
    err = error_for(big, free={"cpu": 8 * GIB})
    assert err.field == "batch_size" and "estimated memory need" in str(err) and "8.0 GiB free on cpu" in str(err)
    assert estimate_memory(big)["total_bytes"] > 8 * GIB


def test_cuda_requested_without_cuda():
    err = error_for(replace(OK, device="cuda"), cuda=False)
    assert err.field == "device" and "no CUDA device" in str(err)


def test_unknown_device():
    assert error_for(replace(OK, device="tpu")).field == "device"


def test_unknown_preset_and_lever():
    with pytest.raises(ConfigError, match="unknown preset"):
        preset("turbo")
    with pytest.raises(ConfigError) as info:
        Stage(optimizer="sgd")
    assert info.value.field == "optimizer" and "adam-fused" in str(info.value)


def test_collect_errors_lists_every_broken_field():
    errors = collect_errors(replace(OK, depth=0, iters=-1), LIMITS, False, FREE)
    assert [e.field for e in errors] == ["depth", "iters"]


def test_defaults_suit_the_device():
    assert defaults_for("cuda").width == 768 and defaults_for("cuda").depth == 12
    cpu = defaults_for("cpu")
    assert cpu.width <= 256 and validate(replace(cpu, device="cpu"), LIMITS, False, FREE)


def _split(run, processes: int):
    """`run` as measured in `processes` fresh processes a stage, four steps each, the same figures throughout."""
    stages = tuple(replace(s, times_ms=s.times_ms[:1] * 4 * processes, rounds=(4,) * processes) if s.rounds else s
                   for s in run.stages)
    return replace(run, stages=stages, config=replace(run.config, repeats=processes))


def test_a_gpu_default_run_gets_a_full_interval_across_processes_and_a_cpu_default_says_within_one():
    """What the defaults are for: a GPU's default run gives every stage an interval across fresh processes that the
    summary shows without a caveat (as many processes as its rule for a full interval asks); a CPU's, kept to one
    process for speed, says that its interval covers only the steps within one process."""
    from sample_runs import gpu_run

    from bench_core.measure.stats import IntervalScope
    from bench_core.results.summary import summarize
    gpu = summarize(_split(gpu_run(), defaults_for("cuda").repeats)).stages[1]
    assert gpu.interval.scope == IntervalScope.ACROSS_PROCESSES
    assert gpu.speedup_text == f"{gpu.speedup_point_text} (2.00–2.00)"   # ×2 exactly: no caveat beside it
    cpu = summarize(_split(gpu_run(), defaults_for("cpu").repeats)).stages[1]
    assert cpu.interval.scope == IntervalScope.WITHIN_ONE_PROCESS
    assert cpu.speedup_text.endswith(", within one process)")


@pytest.mark.parametrize("iters,floor", [(4, 4), (5, 5), (6, 6), (30, 6), (2000, 6)])
def test_timed_steps_floor_is_six_never_above_the_ceiling(iters, floor):
    assert BenchConfig(iters=iters).min_iters == floor


def test_the_floor_is_the_least_n_whose_median_has_a_95_percent_interval():
    """[min, max] of n steps covers the median with probability 1 - 2**(1-n): below 95% at 5, above it at 6."""
    from bench_core.config.bench_config import MIN_TIMED_STEPS
    coverage = [1 - 2 ** (1 - n) for n in range(1, 20)]
    assert MIN_TIMED_STEPS == 1 + next(i for i, c in enumerate(coverage) if c >= 0.95)


def test_field_lists_are_derived_from_the_dataclass():
    from dataclasses import fields

    from bench_core.config.bench_config import FIELD_LABELS, INT_FIELDS, MODEL_FIELDS
    names = [f.name for f in fields(BenchConfig)]
    assert INT_FIELDS == tuple(n for n in names if n not in ("device", "family", "source"))
    assert MODEL_FIELDS == ("family", "depth", "width", "heads", "seq_len", "batch_size", "vocab_size")
    assert set(FIELD_LABELS) == set(names) and FIELD_LABELS["depth"] == "Depth (layers)"
    assert BenchConfig.from_dict({**OK.to_dict(), "unknown": 1}) == OK


def test_workloads():
    from bench_core.config.bench_config import WORKLOADS, workload
    small = workload("gpt2-small", OK)
    assert (small.depth, small.width, small.heads, small.seq_len, small.batch_size, small.vocab_size) == (
        12, 768, 12, 1024, 8, 50304)
    assert small.iters == OK.iters and small.device == OK.device  # only the workload's fields change
    assert set(WORKLOADS) >= {"tiny", "gpt2-small", "gpt2-medium"}
    with pytest.raises(ConfigError, match="unknown model size; choose one of tiny, gpt2-small"):
        workload("gpt5", OK)


def test_repeats_and_seed_bounds():
    assert error_for(replace(OK, repeats=0)).field == "repeats"
    err = error_for(replace(OK, repeats=LIMITS.max_repeats + 1))
    assert err.field == "repeats" and f"exceeds the limit of {LIMITS.max_repeats}" in str(err)
    assert validate(replace(OK, seed=0), LIMITS, False, FREE).seed == 0  # seed 0 is a valid seed
