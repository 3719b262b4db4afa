"""One family mechanism: every family (the built-ins, each Hugging Face catalog architecture, a factory module)
states its architecture, and the parameter count and block linear shapes derived from it match the built model."""
import pytest
import torch

from bench_core.config.bench_config import WORKLOADS, BenchConfig, ModelSource, SourceKind
from bench_core.config.settings import Limits
from bench_core.models import hf_config
from bench_core.models.families import (
    ALL_FAMILIES,
    ModelParts,
    architecture,
    build_model,
    matmul_params,
    param_count,
)
from bench_core.sweep.timing.variants import block_gemms
from helpers import TINY_RUN, tiny_catalog_cfg


def factory_cfg() -> BenchConfig:
    return BenchConfig(family="factory", depth=2, width=32, heads=2, vocab_size=64, **TINY_RUN,
                       source=ModelSource(SourceKind.FACTORY, "docs.examples.my_model:build"))


CASES = {"gpt": BenchConfig(**{**WORKLOADS["tiny"], **TINY_RUN}),
         "llama": BenchConfig(**{**WORKLOADS["llama-tiny"], **TINY_RUN}),
         **{f"hf:{name}": None for name in hf_config.catalog()}, "factory": None}


def case_config(case: str) -> BenchConfig:
    if case.startswith("hf:"):
        return tiny_catalog_cfg(case[3:])
    return factory_cfg() if case == "factory" else CASES[case]


def block_linear_shapes(model) -> list[tuple[int, int]]:
    """(fan_in, fan_out) of each linear module of the first block: nn.Linear, and GPT-2's Conv1D (weight in x out)."""
    out = []
    for module in model.blocks[0].modules():
        if isinstance(module, torch.nn.Linear):
            out.append((module.in_features, module.out_features))
        elif type(module).__name__ == "Conv1D":
            out.append(tuple(module.weight.shape))
    return sorted(out)


def test_every_family_has_a_case():
    assert {c.split(":")[0] for c in CASES} == set(ALL_FAMILIES)


@pytest.mark.parametrize("case", list(CASES))
def test_architecture_matches_the_built_model(case):
    cfg = case_config(case)
    torch.manual_seed(0)
    model = build_model(cfg, ModelParts())
    arch = architecture(cfg)
    assert sum(p.numel() for p in model.parameters()) == param_count(cfg) == arch.params
    assert arch.layers == len(model.blocks) == cfg.depth
    if case != "factory":   # a factory's linears are read from its module; it has no facts of its own to check
        assert block_linear_shapes(model) == sorted((linear.fan_in, linear.fan_out) for linear in arch.block_linears)
    assert sorted(block_gemms(arch)) == sorted((linear.fan_in, linear.fan_out) for linear in arch.block_linears)
    assert 0 < matmul_params(cfg) <= param_count(cfg)


# The parameter counts the model cards publish (independent of this code: each the sum over the checkpoint).
PUBLISHED = {"gpt2": 124_439_808, "gpt2-medium": 354_823_168, "llama-3.2-1b": 1_235_814_400,
             "llama-3.1-8b": 8_030_261_248, "qwen2.5-0.5b": 494_032_768, "qwen3-0.6b": 596_049_920,
             "mistral-7b-v0.3": 7_248_023_552, "gemma-2b": 2_506_172_416}


def test_full_size_parameter_counts_match_the_published_ones():
    assert set(PUBLISHED) == set(hf_config.catalog())
    for name, published in PUBLISHED.items():
        cfg = hf_config.shape_from_source(hf_config.resolve_source(name, Limits()), BenchConfig(seq_len=1024), {})
        assert param_count(cfg) == published, name


def test_gqa_shapes_reach_the_sweeps_gemms():
    """Grouped-query attention: k and v project to the KV heads only, not a (d, 3d) QKV."""
    arch = architecture(tiny_catalog_cfg("llama-3.2-1b"))
    d, kv = arch.hidden, arch.attention.kv_width
    assert arch.attention.kv_heads * 4 == arch.attention.heads
    assert sorted(block_gemms(arch))[:3] == sorted([(d, d), (d, kv), (d, kv)])[:3]
    assert (d, 3 * d) not in block_gemms(arch)
