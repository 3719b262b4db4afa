"""The torchao 8-bit AdamW lever beside torch's fused Adam on a real GPU: it must run its own compiled step, not
fall back to torch's Adam kernels, and be charged its own (smaller) state bytes. Skipped without CUDA or torchao."""
import pytest

from bench_core.components import bench
from bench_core.components.rows import numel, optimizer_step_bytes
from bench_core.config.bench_config import BenchConfig
from bench_core.levers.registry import LEVERS
from bench_core.levers.stage import Stage

pytestmark = pytest.mark.gpu

SMALL = BenchConfig(depth=2, width=768, heads=12, seq_len=1024, batch_size=8, vocab_size=50304, device="cuda")


def test_adamw_8bit_runs_its_own_kernels_against_fused_adam(probe, runnable, monkeypatch, tmp_path):
    import torch
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path / "cache"))
    runnable(Stage("adamw-8bit"))
    monkeypatch.setattr(bench, "optimizer_levers", lambda: ["adam-fused", "adamw-8bit"])
    fused, eight = bench.optimizer_rows(torch, SMALL, "cuda", 3, 10, probe, None)
    assert fused.status == "ok" and eight.status == "ok", (fused.reason, eight.reason)
    assert eight.proof == "verified", (eight.proof, eight.reason, eight.kernel_names)
    assert not any(k.match(n) for k in LEVERS["adamw-8bit"].betrayed_by for n in eight.kernel_names)
    numels = [numel(s) for s in bench.param_shapes(SMALL)]
    assert eight.bytes_moved == optimizer_step_bytes(numels, LEVERS["adamw-8bit"].moment_bytes)  # type: ignore[attr-defined]
    assert eight.bytes_moved < fused.bytes_moved
