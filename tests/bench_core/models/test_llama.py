"""The Llama-family model (bench_core/models/llama.py) and its config arithmetic, on CPU."""
import math

import pytest
import torch

from bench_core.config.bench_config import (
    WORKLOADS,
    BenchConfig,
    ConfigError,
)
from bench_core.config.settings import Limits
from bench_core.models.families import ModelParts, build_model, matmul_params, mlp_hidden, param_count, validate
from bench_core.models.llama import Llama, LlamaConfig, apply_rotary, rotary_tables


def llama_cfg(name: str) -> BenchConfig:
    return BenchConfig(**WORKLOADS[name])


def test_mlp_hidden_is_two_thirds_of_4d_rounded_up_to_256():
    # 8/3 · 768 = 2048 exactly; 8/3 · 2048 = 5461.3 -> 22 · 256 = 5632 (Llama's own rounding)
    assert mlp_hidden(llama_cfg("llama-small")) == 2048
    assert mlp_hidden(llama_cfg("llama-1b")) == 5632
    assert mlp_hidden(BenchConfig()) == 4 * 768  # GPT keeps 4·d


@pytest.mark.parametrize("name", ["llama-tiny", "llama-small", "llama-1b"])
def test_param_count_matches_the_model(name):
    cfg = llama_cfg(name)
    with torch.device("meta"):  # shapes only: llama-1b needs no 4 GB here
        model = build_model(cfg, ModelParts({"norm": torch.nn.RMSNorm}))
    assert sum(p.numel() for p in model.parameters()) == param_count(cfg)
    assert model.lm_head.weight is not model.wte.weight  # untied
    assert not any(n.endswith("bias") for n, _ in model.named_parameters())  # no biases


def test_sizes_are_what_the_issue_names():
    assert 120e6 < param_count(llama_cfg("llama-small")) < 140e6          # "about 125M"
    assert 0.9e9 < param_count(llama_cfg("llama-1b")) < 1.1e9             # "1b": d 2048, 16 layers, 32 heads
    # 6·N counts the untied head and not the input embedding (a lookup)
    cfg = llama_cfg("llama-small")
    assert matmul_params(cfg) == param_count(cfg) - cfg.vocab_size * cfg.width


def test_rotary_keeps_position_zero_and_the_norm():
    cos, sin = rotary_tables(8, 16, 10000.0)
    x = torch.randn(2, 3, 16, 8)
    y = apply_rotary(x, cos, sin)
    assert torch.equal(y[:, :, 0], x[:, :, 0])  # angle 0 at position 0
    assert torch.allclose(y.norm(dim=-1), x.norm(dim=-1), rtol=1e-5)  # a rotation of each pair
    # the dot product of two rotated vectors depends on their positions' difference only
    q, k = torch.randn(8), torch.randn(8)
    qs = apply_rotary(q.expand(1, 1, 16, 8), cos, sin)[0, 0]
    ks = apply_rotary(k.expand(1, 1, 16, 8), cos, sin)[0, 0]
    assert torch.allclose(qs[3] @ ks[1], qs[7] @ ks[5], rtol=1e-4)


@pytest.mark.slow
def test_forward_backward_learns_on_cpu():
    torch.manual_seed(0)
    model = Llama(LlamaConfig(depth=2, width=64, heads=4, seq_len=32, vocab_size=256, mlp_hidden=mlp_hidden(
        BenchConfig(family="llama", width=64))))
    x = torch.randint(0, 256, (2, 32))
    logits, loss = model(x, x)
    assert logits.shape == (2, 32, 256)
    assert abs(loss.item() - math.log(256)) < 0.3  # near-uniform at init
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(10):
        opt.zero_grad()
        _, loss2 = model(x, x)
        loss2.backward()
        opt.step()
    assert loss2.item() < loss.item()


def test_llama_config_validation_names_the_field():
    limits = Limits()
    with pytest.raises(ConfigError) as info:
        validate(BenchConfig(family="mamba"), limits, False, {})
    assert info.value.field == "family" and "gpt, llama" in str(info.value)
    with pytest.raises(ConfigError) as info:  # head size 96 / 32 = 3 is odd: rotary pairs need it even
        validate(BenchConfig(family="llama", width=96, heads=32), limits, False, {})
    assert info.value.field == "heads" and "even head size" in str(info.value)
