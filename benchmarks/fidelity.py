"""Fidelity: the engine's stage median vs a bare in-process training loop of the same model.

Runs both in one call on the same GPU and prints the ratio engine / bare for a seed fp32 stage
and a bf16 stage. Target: within 3%.

    python benchmarks/fidelity.py --model gpt2-small
"""
from __future__ import annotations

import argparse
import contextlib
import statistics
import sys

from bench_core.config.bench_config import WORKLOADS, BenchConfig
from bench_core.levers.registry import KERNEL_PACKAGES
from bench_core.levers.stage import Stage
from bench_core.machine.probe import run_probe
from bench_core.measure.stats import timing_stats
from bench_core.results.records import Status
from bench_core.run.runner import run_stage


def bare_loop(cfg: BenchConfig, optimizer: str, norm: str, bf16: bool) -> float:
    """The plainest loop we can write: no events stream, no subprocess. Median ms per step."""
    import torch

    from bench_core.models.gpt import GPT, GPTConfig, synthetic_batch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if norm == "apex-fusedln":
        from apex.normalization import FusedLayerNorm as norm_cls
    else:
        norm_cls = torch.nn.LayerNorm
    torch.manual_seed(cfg.seed)
    with torch.device("cuda"):
        model = GPT(GPTConfig(cfg.depth, cfg.width, cfg.heads, cfg.seq_len, cfg.vocab_size), norm_cls)
    if optimizer == "apex-fusedadam":
        from apex.optimizers import FusedAdam
        opt = FusedAdam(model.parameters(), lr=3e-4, adam_w_mode=False)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=3e-4, fused=optimizer == "adam-fused")
    x, y = synthetic_batch(cfg.vocab_size, cfg.batch_size, cfg.seq_len, cfg.seed, "cuda")
    ctx = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if bf16 else contextlib.nullcontext

    def step():
        opt.zero_grad()
        with ctx():
            _, loss = model(x, y)
        loss.backward()
        opt.step()

    for _ in range(cfg.warmup):
        step()
    torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(cfg.iters)]
    for start, end in events:
        start.record()
        step()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in events)  # model and optimizer die with this frame


def main() -> int:
    import torch
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="gpt2-small", choices=list(WORKLOADS))
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=2, help="alternate engine and bare this many times")
    args = ap.parse_args()
    cfg = BenchConfig(**WORKLOADS[args.model], warmup=args.warmup, iters=args.iters, device="cuda")
    probe = run_probe(packages=KERNEL_PACKAGES)
    apex_ok = Stage("apex-fusedadam", "layernorm", "fp32").unavailable_reason(probe, "cuda") is None
    cases = [Stage("apex-fusedadam" if apex_ok else "adam", "layernorm", "fp32"),
             Stage("apex-fusedadam" if apex_ok else "adam-fused",
                   "apex-fusedln" if apex_ok else "layernorm", "bf16")]
    print(f"{'stage':<40} {'engine ms':>10} {'bare ms':>10} {'ratio':>7}")
    for stage in cases:
        engine, bare = [], []
        for _ in range(args.repeats):  # alternate so drift hits both sides alike
            result = run_stage(cfg, stage, probe)
            if result.status != Status.OK:
                print(f"{stage.key}: engine stage {result.status}: {result.reason}")
                return 1
            engine.append(timing_stats(result.times_ms).median_ms)
            bare.append(bare_loop(cfg, stage.optimizer, stage.norm, stage.precision == "bf16"))
            torch.cuda.empty_cache()
        e, b = statistics.median(engine), statistics.median(bare)
        print(f"{stage.key:<40} {e:>10.2f} {b:>10.2f} {e / b:>7.3f}   (engine {engine}, bare {bare})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
