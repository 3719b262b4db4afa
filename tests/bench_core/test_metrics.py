"""FLOPs, MFU and the peak table, against hand-computed figures."""
import pytest

from bench_core.config.bench_config import BenchConfig
from bench_core.measure.metrics import flops_per_step, peak_tflops, rates


def test_flops_formula_by_hand():
    # depth 1, width 4, seq 2, batch 1, vocab 8: params = 8*4 (wte) + 2*4 (wpe) + (12*16 + 13*4) + 2*4 = 292;
    # matmul weights N = 292 - 8 (no position embedding) = 284; tokens = 2.
    # 6*N*tokens = 3408; full (not causal) attention 12*L*d*T*tokens = 12*1*4*2*2 = 192.
    cfg = BenchConfig(depth=1, width=4, heads=1, seq_len=2, batch_size=1, vocab_size=8)
    assert flops_per_step(cfg) == 3408 + 192


@pytest.mark.parametrize("name,precision,peak", [
    ("NVIDIA H200", "bf16", 989.4), ("NVIDIA H100 80GB HBM3", "bf16", 989.4), ("NVIDIA H100 PCIe", "bf16", 756.0),
    ("NVIDIA H200 NVL", "bf16", 835.5), ("NVIDIA H100 NVL", "bf16", 835.5), ("NVIDIA A10G", "bf16", 70.0),
    ("NVIDIA A10", "bf16", 125.0), ("NVIDIA A100-SXM4-80GB", "fp32", 19.5), ("NVIDIA A100 80GB PCIe", "bf16", 312.0),
])
def test_peak_table_matches_whole_names(name, precision, peak):
    assert peak_tflops(name, precision) == (peak, None)


@pytest.mark.parametrize("name", ["NVIDIA RTX A1000", "NVIDIA RTX A1000 6GB Laptop GPU", "Some New GPU",
                                  "NVIDIA A100X"])
def test_unknown_gpus_get_no_mfu_with_a_reason(name):
    peak, why = peak_tflops(name, "bf16")
    assert peak is None and "not in the peak table" in why
    r = rates(BenchConfig(), 100.0, name, "bf16")
    assert r.mfu is None and r.mfu_reason == why and r.tokens_per_s == pytest.approx(8 * 1024 / 0.1)


def test_a_precision_the_datasheet_lacks_gives_no_mfu():
    peak, why = peak_tflops("NVIDIA A10G", "tf32")
    assert peak is None and "no dense tf32 peak" in why
