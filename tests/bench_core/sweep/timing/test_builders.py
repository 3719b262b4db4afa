"""Each part's one call (sweep.timing.builders): a compiled GEMM returns its products."""


from bench_core.config.bench_config import BenchConfig
from bench_core.models.families import architecture
from bench_core.sweep.timing.variants import block_gemms


def test_a_compiled_gemm_returns_its_products():
    """A compiled function's unused results are dropped: the block's GEMMs must be its outputs, or compiled
    GEMMs would time nothing (on CPU they read 0.03 ms against 0.37 eager before they were returned)."""
    import torch

    from bench_core.sweep.timing.builders import gemm_fn
    cfg = BenchConfig(family="llama", depth=1, width=32, heads=2, seq_len=16, batch_size=2, vocab_size=64,
                      device="cpu")
    gen = torch.Generator().manual_seed(0)
    out = gemm_fn(torch, cfg, "cpu", "bf16", gen, compiled=False)()
    m, d = 32, 32
    # per layer: forward (M, N), dX (M, K), dW (N, K) in fp32
    assert [tuple(t.shape) for t in out[:3]] == [(m, 3 * d), (m, d), (3 * d, d)] and out[2].dtype == torch.float32
    assert len(out) == 3 * len(block_gemms(architecture(cfg))) == 15
