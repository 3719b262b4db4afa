"""Measured ceilings of this GPU: bf16 GEMM TFLOP/s, fp32 GEMM TFLOP/s (TF32 off), device-to-device copy GB/s.

What other figures are compared with (an optimizer step's GB/s against the copy ceiling, say). Measured once per
machine and software environment and cached (see machine_cache); ``cached_or_measure(torch, refresh=True)`` is
the "measure again" action. ``python -m bench_core.machine.ceilings [--refresh] [--json]`` runs it in its own process.

Importing this module does not import torch; ``measure`` takes the torch module as an argument.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from dataclasses import asdict, dataclass, fields, replace
from datetime import UTC, datetime

from bench_core.machine import cache as machine_cache
from bench_core.machine.timer import time_calls

CACHE_KIND = "ceilings"
GEMM_N = 8192
COPY_BYTES = 2 * 1024 ** 3
WARMUP = 3
REPEATS = 15


def gemm_flops(m: int, n: int, k: int) -> int:
    """FLOPs of an (m×k)·(k×n) matrix product: one multiply and one add per term."""
    return 2 * m * n * k


def copy_bytes(nbytes: int) -> int:
    """Bytes a device-to-device copy of ``nbytes`` moves: each byte read once and written once."""
    return 2 * nbytes


@dataclass(frozen=True)
class Ceilings:
    bf16_tflops: float
    fp32_tflops: float
    copy_gbps: float
    method: str
    measured_at: str
    device_name: str
    from_cache: bool = False

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Ceilings:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def method_text(n: int = GEMM_N, copy_nbytes: int = COPY_BYTES, warmup: int = WARMUP, repeats: int = REPEATS) -> str:
    return (f"torch.matmul of two random {n}x{n} matrices into a preallocated output, bf16, and fp32 with "
            f"torch.backends.cuda.matmul.allow_tf32=False; TFLOP/s = 2*{n}^3 / time. Device-to-device copy: "
            f"Tensor.copy_ of {copy_nbytes / 1024 ** 3:g} GiB; GB/s = (bytes read + bytes written) / time = "
            f"2*{copy_nbytes} / time. Each: {warmup} warm-up runs, then the median of {repeats} runs, each timed "
            "alone with CUDA events on the current stream (GPU 0 of the visible ones).")


def _median_ms(torch, fn, warmup: int, repeats: int) -> float:
    return statistics.median(time_calls(torch, fn, True, warmup, repeats))


def _gemm_tflops(torch, dtype, n: int, warmup: int, repeats: int) -> float:
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(n, n, device="cuda", dtype=dtype, generator=gen)  # random: zeros run faster (seen on H200)
    b = torch.randn(n, n, device="cuda", dtype=dtype, generator=gen)
    out = torch.empty(n, n, device="cuda", dtype=dtype)
    ms = _median_ms(torch, lambda: torch.matmul(a, b, out=out), warmup, repeats)
    return gemm_flops(n, n, n) / (ms / 1e3) / 1e12


def _copy_gbps(torch, nbytes: int, warmup: int, repeats: int) -> float:
    src = torch.empty(nbytes // 4, device="cuda", dtype=torch.float32).uniform_()
    dst = torch.empty_like(src)
    ms = _median_ms(torch, lambda: dst.copy_(src), warmup, repeats)
    return copy_bytes(src.numel() * 4) / (ms / 1e3) / 1e9


def measure(torch, n: int = GEMM_N, copy_nbytes: int = COPY_BYTES, warmup: int = WARMUP,
            repeats: int = REPEATS) -> Ceilings:
    """Measure on the current CUDA device. About 1-2 s on an H200 (the fp32 GEMMs take most of it)."""
    if not torch.cuda.is_available():
        raise RuntimeError("ceilings are measured on a CUDA device; none is available")
    matmul = torch.backends.cuda.matmul
    old_tf32 = matmul.allow_tf32
    try:
        bf16 = _gemm_tflops(torch, torch.bfloat16, n, warmup, repeats)
        matmul.allow_tf32 = False
        fp32 = _gemm_tflops(torch, torch.float32, n, warmup, repeats)
    finally:
        matmul.allow_tf32 = old_tf32
    copy = _copy_gbps(torch, copy_nbytes, warmup, repeats)
    torch.cuda.empty_cache()
    return Ceilings(bf16_tflops=round(bf16, 1), fp32_tflops=round(fp32, 2), copy_gbps=round(copy, 1),
                    method=method_text(n, copy_nbytes, warmup, repeats),
                    measured_at=datetime.now(UTC).isoformat(timespec="seconds"),
                    device_name=torch.cuda.get_device_name(0))


def cached() -> Ceilings | None:
    """The cached ceilings for this machine and environment, or None; measures nothing, imports no torch."""
    data = machine_cache.load(CACHE_KIND, machine_cache.environment_fingerprint())
    if data is None:
        return None
    try:
        return replace(Ceilings.from_dict(data), from_cache=True)
    except (TypeError, ValueError):
        return None  # a cached entry of another shape: as if not measured


def cached_or_measure(torch, refresh: bool = False) -> Ceilings | None:
    """The cached ceilings for this machine and environment, else measured now and cached. None without CUDA.

    ``refresh=True`` is "measure again": it measures and overwrites the cached entry."""
    if not torch.cuda.is_available():
        return None
    found = None if refresh else cached()
    if found is not None:
        return found
    ceilings = measure(torch)
    machine_cache.save(CACHE_KIND, machine_cache.environment_fingerprint(), ceilings.to_dict())
    return ceilings


class CeilingsProcess:
    """``python -m bench_core.machine.ceilings --json --wait`` started early: it imports torch (host work, as the
    worker pool's idle workers do), and opens its CUDA context and measures only when told to, when the GPU is
    otherwise idle: a context opened while a stage is timed would be another process's device work beside it.
    ``start()`` then ``measure()``; ``close()`` ends it if it was never told."""

    def __init__(self, timeout_s: float = 180.0, env: dict | None = None):
        self.timeout_s = timeout_s
        self.env = env
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        from bench_core.config.environment import child_env
        self.proc = subprocess.Popen(  # noqa: S603 (our own argv)
            [sys.executable, "-m", "bench_core.machine.ceilings", "--json", "--wait"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=child_env(self.env),
            start_new_session=True)  # its own group: a run's quiet windows stop it while a stage is timed

    @property
    def group(self) -> int | None:
        """Its process group while it runs (run.quiet pauses it); None before `start` and after it ends."""
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else None

    def measure(self) -> Ceilings | None:
        """Measured (or cached) ceilings; None when the process fails or runs past its limit (a run goes on)."""
        if self.proc is None:
            self.start()
        try:
            out, _ = self.proc.communicate("go\n", timeout=self.timeout_s)  # type: ignore[union-attr]
            data = json.loads(out.strip().splitlines()[-1]) if out.strip() else None
            return Ceilings.from_dict(data) if isinstance(data, dict) else None
        except Exception:
            self.close()
            return None

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench_core.machine.ceilings", description=__doc__.splitlines()[0])
    p.add_argument("--refresh", action="store_true", help="measure again, ignoring the cache")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--wait", action="store_true", help="import torch, then open CUDA and measure only after a line "
                   "on stdin (how a run starts it early and measures when the GPU is idle)")
    args = p.parse_args(argv)
    import torch
    if args.wait:  # started by a run, whose quiet windows may stop it: it must not outlive the run stopped
        from bench_core.config.environment import die_with_parent
        die_with_parent()
        if sys.stdin.readline().strip() != "go":
            return 0
    ceilings = cached_or_measure(torch, refresh=args.refresh)
    if ceilings is None:
        print(json.dumps(None) if args.json else "no CUDA device: no ceilings")
        return 0
    if args.json:
        print(json.dumps(ceilings.to_dict(), indent=1))
    else:
        print(f"{ceilings.device_name}: bf16 GEMM {ceilings.bf16_tflops:.0f} TFLOP/s, fp32 GEMM (TF32 off) "
              f"{ceilings.fp32_tflops:.1f} TFLOP/s, copy {ceilings.copy_gbps:,.0f} GB/s "
              f"({'cached, ' if ceilings.from_cache else ''}measured {ceilings.measured_at})\n{ceilings.method}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
