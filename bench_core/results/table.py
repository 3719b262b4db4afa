"""The CLI's text output: the results table (fits the terminal, wraps names, never cuts a cell) and the probe."""
from __future__ import annotations

from typing import Any

from bench_core.machine.probe import Probe
from bench_core.results.summary import RunSummary


def _f(value: float | None, fmt: str) -> str:
    return "—" if value is None else format(value, fmt)


def print_table(summary: RunSummary, console: Any = None) -> None:
    import sys

    from rich.console import Console
    from rich.table import Table
    # a terminal: fit its width (names wrap, cells are never cut); a pipe or file: room for every column
    console = console or Console(width=None if sys.stdout.isatty() else 200)
    run = summary.run
    table = Table(title=f"{run.preset} on {run.gpu} · run {run.run_id}", expand=False)
    for col in ("stage", "status", "median ms", "p10–p90", "speedup (95% CI)", "tok/s", "peak MiB", "MFU",
                "busy", "bottleneck", "proof"):
        right = col not in ("stage", "status", "bottleneck", "proof")
        table.add_column(col, justify="right" if right else "left", overflow="fold",
                         no_wrap=col in ("median ms", "tok/s"))
    for s in summary.stages:
        status = s.status.value + (" (partial)" if s.partial else "") + (" · noisy" if s.noisy else "")
        table.add_row(s.key.replace("+", "+\u200b"), status, _f(s.timing.median_ms, ".2f"), s.spread_text or "—",
                      s.speedup_text or "—", _f(s.rates.tokens_per_s, ",.0f"),
                      _f(s.peak_mem_mib if run.device == "cuda" else None, ",.0f"), s.mfu_text or "—",
                      s.bottleneck.busy_text or "—", s.bottleneck.verdict,
                      ("⚠ " if s.warnings else "") + (s.verdict or "—"))
    console.print(table)
    if summary.baseline_note:
        console.print(f"  {summary.baseline_note}", highlight=False, soft_wrap=True)
    for s in summary.stages:
        notes = ([s.reason] if s.reason else []) + list(s.warnings)
        notes += [f"noisy: {s.noise_reason}"] if s.noise_reason else []
        notes += [s.bottleneck.sentence] if s.ok and s.bottleneck.verdict == "launch-bound" else []
        notes += [f"vs previous: {s.delta.text}"] if s.delta else []
        for note in notes:
            console.print(f"  {s.key}: {note}", highlight=False, soft_wrap=True)


def print_probe(probe: Probe) -> str:
    """Plain text; on a machine without a GPU it says so rather than printing None."""
    lines = [f"torch {probe.torch}" + (f"  CUDA {probe.cuda_runtime}" if probe.cuda_runtime else "  (CPU build)")
             + (f"  driver {probe.driver}" if probe.driver else "")]
    if probe.cuda_available:
        cap = ".".join(map(str, probe.cuda.capability or ()))
        lines.append(f"GPU: {probe.cuda.name}  capability {cap}  {probe.cuda.device_count} device(s)")
    else:
        lines.append("GPU: none (CPU runs only; Apex, TF32 and CUDA graphs need a CUDA GPU)")
    devices = ["cuda", "cpu"] if probe.cuda_available else ["cpu"]
    for label, table in (("bf16 autocast", probe.bf16), ("fp16 autocast", probe.fp16),
                         ("Adam(fused=True)", probe.adam_fused)):
        lines.append(f"{label}: " + ", ".join(f"{d} {'yes' if table.get(d) else 'no'}" for d in devices))
    apex = probe.apex
    if apex.status == "missing":
        lines.append("Apex: not installed (see README, 'Installing Apex')")
    else:
        lines.append(f"Apex: {apex.label}")
        for ext in apex.extensions:
            reason = probe.apex_reason(ext)
            lines.append(f"  {ext}: {'ok' if reason is None else reason}")
    if probe.error:
        lines.append(f"probe error: {probe.error}")
    return "\n".join(lines)
