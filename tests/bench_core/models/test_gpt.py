import math

import torch

from bench_core.config.bench_config import BenchConfig
from bench_core.models.families import param_count
from bench_core.models.gpt import GPT, GPTConfig, synthetic_batch


def test_shapes_and_param_count():
    cfg = GPTConfig(depth=2, width=64, heads=4, seq_len=32, vocab_size=300)
    model = GPT(cfg)
    x, y = synthetic_batch(300, 3, 32, seed=1, device="cpu")
    logits, loss = model(x, y)
    assert logits.shape == (3, 32, 300) and loss.shape == ()
    assert model.lm_head.weight is model.wte.weight
    bench = BenchConfig(depth=2, width=64, heads=4, seq_len=32, batch_size=3, vocab_size=300)
    assert model.num_params() == param_count(bench)


def test_first_loss_is_near_ln_vocab():
    torch.manual_seed(0)
    model = GPT(GPTConfig(depth=2, width=128, heads=4, seq_len=64, vocab_size=1024))
    x, y = synthetic_batch(1024, 4, 64, seed=0, device="cpu")
    _, loss = model(x, y)
    assert abs(loss.item() - math.log(1024)) < 0.1


def test_norm_class_is_injected():
    class MyNorm(torch.nn.LayerNorm):
        pass
    model = GPT(GPTConfig(depth=1, width=32, heads=2, seq_len=8, vocab_size=50), MyNorm)
    assert isinstance(model.blocks[0].ln1, MyNorm) and isinstance(model.ln_f, MyNorm)


def test_synthetic_data_depends_only_on_seed():
    a = synthetic_batch(100, 2, 16, seed=7, device="cpu")
    b = synthetic_batch(100, 2, 16, seed=7, device="cpu")
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert torch.equal(a[0][:, 1:], a[1][:, :-1])


def test_attention_is_causal():
    torch.manual_seed(0)
    model = GPT(GPTConfig(depth=1, width=32, heads=2, seq_len=8, vocab_size=50)).eval()
    x = torch.randint(0, 50, (1, 8))
    y = x.clone()
    y[0, -1] = (x[0, -1] + 1) % 50
    with torch.no_grad():
        a, _ = model(x)
        b, _ = model(y)
    assert torch.allclose(a[0, :-1], b[0, :-1]) and not torch.allclose(a[0, -1], b[0, -1])
