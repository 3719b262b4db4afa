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


# Dense peaks typed here from the vendors' datasheets, not from PEAK_TFLOPS (sparsity figures halved where the
# datasheet prints only those). Sources:
#  V100: "NVIDIA Tesla V100 GPU Accelerator" datasheet (nvidia.com/en-us/data-center/v100): PCIe 14 TFLOPS FP32,
#        112 TFLOPS tensor; SXM2 15.7 FP32, 125 tensor (both 900 GB/s HBM2).
#  A100: "NVIDIA A100 Tensor Core GPU" datasheet: FP32 19.5, TF32 156, BF16/FP16 312 (dense).
#  H100 SXM / PCIe: "NVIDIA H100 Tensor Core GPU" datasheet: FP32 67 / 51, TF32 989 / 756 with sparsity,
#        BF16 1,979 / 1,513 with sparsity, FP8 3,958 / 3,026 with sparsity.
#  H200 SXM: "NVIDIA H200 Tensor Core GPU" datasheet: FP32 67, TF32 989, BF16 1,979, FP8 3,958 (with sparsity).
#  L40S: "NVIDIA L40S" datasheet: FP32 91.6, BF16 362.05 (733 sparse), FP8 733 (1,466 sparse).
DATASHEET = [
    ("Tesla V100-PCIE-16GB", "fp32", 14.0), ("Tesla V100-PCIE-32GB", "fp16", 112.0),
    ("Tesla V100-SXM2-16GB", "fp32", 15.7), ("Tesla V100-SXM2-32GB", "fp16", 125.0),
    ("NVIDIA A100-SXM4-80GB", "tf32", 156.0), ("NVIDIA A100-SXM4-80GB", "bf16", 312.0),
    ("NVIDIA H100 80GB HBM3", "fp32", 67.0), ("NVIDIA H100 80GB HBM3", "bf16", 1979 / 2),
    ("NVIDIA H100 80GB HBM3", "fp8", 3958 / 2), ("NVIDIA H100 PCIe", "fp32", 51.0),
    ("NVIDIA H100 PCIe", "tf32", 756 / 2), ("NVIDIA H100 PCIe", "bf16", 1513 / 2),
    ("NVIDIA H100 PCIe", "fp8", 3026 / 2),
    ("NVIDIA H200", "fp32", 67.0), ("NVIDIA H200", "tf32", 989 / 2), ("NVIDIA H200", "bf16", 1979 / 2),
    ("NVIDIA H200", "fp8", 3958 / 2), ("NVIDIA L40S", "fp32", 91.6), ("NVIDIA L40S", "bf16", 362.05),
    ("NVIDIA L40S", "fp8", 733.0),
]


@pytest.mark.parametrize("name,precision,cited", DATASHEET)
def test_peak_table_agrees_with_the_cited_datasheets(name, precision, cited):
    """Within the datasheets' own rounding (they print 67 where the table keeps 66.9): 1%."""
    peak, why = peak_tflops(name, precision)
    assert why is None and peak == pytest.approx(cited, rel=0.01)


def test_v100_pcie_is_not_given_the_sxm2_figures():
    assert peak_tflops("Tesla V100-PCIE-32GB", "fp32")[0] != peak_tflops("Tesla V100-SXM2-32GB", "fp32")[0]


def test_no_fp8_peak_on_a_gpu_without_fp8_tensor_cores():
    assert peak_tflops("NVIDIA A100-SXM4-80GB", "fp8")[0] is None
