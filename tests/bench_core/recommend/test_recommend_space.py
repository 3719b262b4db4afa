"""The search space and the memory filter, with every expectation derived from the lever registry and the engine's
own memory estimate: no count is written here."""
import itertools
from dataclasses import replace

from bench_core.config.bench_config import WORKLOADS, BenchConfig
from bench_core.levers.registry import names_of
from bench_core.levers.stage import Stage
from bench_core.machine.probe import cached_probe
from bench_core.models.families import estimate_memory
from bench_core.recommend.memory import GIB, MemoryBudget, PeakSource, default_budget, memory_fit
from bench_core.recommend.predict import Predicted
from bench_core.recommend.space import SEARCHED_KINDS, Candidate, search_space

PROBE, _ = cached_probe()


def _every_stage(family):
    for names in itertools.product(*(names_of(k) for k in SEARCHED_KINDS)):
        own = Stage(**dict(zip(SEARCHED_KINDS, names, strict=True))).for_family(family)
        if own is not None:
            yield own


def test_the_space_is_every_stage_the_registry_allows_here_and_each_other_keeps_its_reason():
    for family in ("gpt", "llama"):
        space = search_space(PROBE, "cpu", family, [4])
        runnable = {s for s in _every_stage(family) if s.unavailable_reason(PROBE, "cpu") is None}
        assert set(space.stages) == runnable
        reasons = {e.reason for e in space.excluded}
        for stage in set(_every_stage(family)) - runnable:
            assert stage.unavailable_reason(PROBE, "cpu") in reasons, stage.key


def test_excluded_levers_are_left_out_with_the_flag_as_reason():
    space = search_space(PROBE, "cpu", "gpt", [4], left_out=["bf16"])
    assert all(s.precision != "bf16" for s in space.stages)
    assert any("--exclude (bf16)" in e.reason for e in space.excluded)


def test_candidates_are_each_stage_at_each_batch_size():
    space = search_space(PROBE, "cpu", "gpt", [2, 4, 4])
    assert len(space.candidates) == len(space.stages) * 2


def test_the_memory_filter_drops_what_exceeds_the_budget_and_keeps_its_peak():
    cfg = replace(BenchConfig(**WORKLOADS["tiny"]), device="cpu")
    stage = Stage("adam", "layernorm", "fp32")
    small, large = Candidate(stage, 1), Candidate(stage, 64)
    bound = {c: estimate_memory(replace(cfg, batch_size=c.batch_size))["total_bytes"] / GIB for c in (small, large)}
    budget = MemoryBudget((bound[small] + bound[large]) / 2, "test")
    fits = {f.candidate: f for f in memory_fit(cfg, (small, large), {}, budget)}
    assert fits[small].fits and not fits[large].fits
    assert fits[large].peak_gib == bound[large] and fits[large].source is PeakSource.UPPER_BOUND
    # a timed prediction's peak is used where there is one
    predicted = {large: Predicted(1.0, peak_mib=bound[small] * 1024 / 2)}
    fits = {f.candidate: f for f in memory_fit(cfg, (small, large), predicted, budget)}
    assert fits[large].fits and fits[large].source is PeakSource.PREDICTED


def test_the_default_budget_is_free_memory_less_its_stated_margin():
    b = default_budget(40 * GIB, "cuda")
    assert b is not None and b.gib == 36.0 and "4.0 GiB margin" in b.why
    assert default_budget(4 * GIB, "cuda").gib == 3.0   # the 1 GiB floor
    assert default_budget(None, "cuda") is None


def test_a_hugging_face_models_space_is_its_parts_family_s():
    """An HF Llama's candidates name its RMSNorm and its own SwiGLU, as its ladders do (models.families.parts_family):
    with the `hf` family's own part rules the space held LayerNorm/GELU twins of each stage, the same model under
    two names, measured twice and compared with itself."""
    from bench_core.recommend.cli import ask_for, parser
    from helpers import tiny_catalog_cfg
    for name, family in (("llama-3.2-1b", "llama"), ("gpt2", "gpt")):
        cfg = replace(tiny_catalog_cfg(name), device="cpu")
        ask = ask_for(cfg, parser().parse_args(["--budget", "1m"]), PROBE)
        assert ask.family == family
        assert set(ask.space.stages) == set(search_space(PROBE, "cpu", family, [cfg.batch_size]).stages)
        assert ask.from_stage == Stage().for_family(family)
