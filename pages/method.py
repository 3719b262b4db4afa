"""Method: how the numbers are measured, and the caveats that matter when reading them."""
import streamlit as st

from dashboard.routing import through_app

through_app()   # a deep link opened before app.py ran once: through app.py's menu

st.title("How this measures")
st.markdown(r"""
### Isolation
Every stage runs in its **own fresh Python process** (`python -m bench_core.run.worker`), started by the engine,
which reads its job from stdin and streams JSON events back. A crash, an out-of-memory error or a hang in one
stage is recorded (`failed`, `oom`, `timeout`) and the next stage still runs; killing the process returns its
GPU memory to the system. Stages never run two at a time: one server, one queue, one GPU.
The next stage's process is started — torch imported, CUDA context created — only once the previous stage's
timed iterations are over, while it is being profiled.

### Timing
* **One process on the GPU at a time.** Worker processes are started ahead, but before their turn they only
  import (host work). The next stage's worker opens its CUDA context and builds model, optimizer and data while
  the current stage **warms up**; the current stage's timed steps begin only once that build is done and the
  previous stage's process has exited. On the H200, while workers still built during other stages' timed steps,
  an FP32 stage whose median step is 157.7 ms had steps up to 187.9
  (`docs/data/h200_2026-12-03_call17_ttr3_candidate.json`).
* **Warm-up** runs untimed, queued as timed steps are: at least the configured number of steps (3 by default)
  **and** at least 0.25 s (first-call costs, cuBLAS heuristics and `torch.compile` land here). On the H200 every
  one-off cost fell in a process's first step, and the SM clock sat at its maximum from the first sample
  (`docs/data/h200_2026-12-03_call17_warmup_seed_gpt2-small.json`); each
  process's warm-up is recorded in the JSON, and a process still slowing down when timing began is flagged.
* Each **timed iteration** is bracketed by CUDA events around `zero_grad` + forward + backward + optimizer
  step. The host does not synchronise between iterations, so the CPU may queue the next step as a real
  training loop does; an iteration's time is read once its end event has completed. On CPU, `time.perf_counter`.
  The **host time** of each step (`perf_counter` around the Python call, no sync) is recorded too.
* **Adaptive timing**: *Timed iterations* is a ceiling. Each process stops once the 95% interval of its median
  step time is within ±1% of the median (order statistics of its steps, asked every 5 steps), after at least
  6 steps (the least for which the median has a distribution-free 95% interval: [min, max] of 6 steps covers it
  with probability 1 − 2⁻⁵) — the stopping rule of `torch.utils.benchmark`'s `adaptive_autorange`, with the
  median's precision in place of its IQR ÷ median. On CUDA the host reads the times one step behind, so the GPU
  always has a step queued.
* **Processes**: the whole ladder runs R times (*Repeats*; 3 by default on a GPU, 1 on CPU), odd rounds in reverse
  order, each stage in a **fresh process** every round, so drift (clocks, other tenants, the host) hits every stage
  alike. The process is the unit of replication: two processes of the same stage can differ by far more than the
  steps inside one suggest.
* The **median** is the headline, with p10 and p90. A stage is **noisy** when its p10–p90 spread exceeds 10%
  of its median, or when its rounds' medians differ by more than 3%; the tool says which rule, with the figures.
  It is also noisy, with the cause, when NVML or the host saw one during its timed steps (sampled every 0.1 s on
  a GPU): **throttled** (a clock-event reason other than idle or a clock setting), **shared** (another process's
  compute context on the GPU; the run's own idle workers are not counted), or **host busy** (a load average above
  one runnable thread per core, or the worker on a CPU less than 90% of the time its launch loop needs). And
  **warming up** when a process's first 3 timed steps were all slower than its own p90 (a settled process does
  that by chance 0.1% of the time; judged only from 22 timed steps, the fewest of which 3 can lie above the p90).
* **Speedups** are ratios of medians against the run's **first stage**, named as `baseline_stage` in the files
  (across processes: the geometric mean of each process's ratio, the centre of its interval below, so the speedup
  always lies inside its interval).
  If that stage did not finish ok, there are no speedups, and every view says so: nothing is silently rebased.
  Multi-GPU stages compare throughput, not step time. Each speedup carries a **95% interval across its
  processes**: per process, the log-ratio of the baseline's median to the stage's (paired by round), then a
  t-interval with n − 1 degrees of freedom, exponentiated. Each process's ratio already carries its steps'
  noise, so the interval covers both. With 2 processes it is honest and wide (t = 12.7). With one process there is
  no spread between processes to see: the interval is a bootstrap of its steps (2,000 resamples) and is labelled
  **within one process** wherever it is shown. The *CI covers* column, the files' `processes` and
  `interval_scope` fields, and the speedup text (when fewer than 3 processes) say which. A run's processes share
  the GPU's power and clock state, so the interval does not cover a change of that state between runs: on the
  H200's llama-1b runs at the power cap, 2 of 7 stages of the second run fell outside the first run's interval,
  both labelled **throttled** in both runs (`docs/data/h200_2026-12-04_call21-22_interval_agreement_peers_llama-1b.txt`;
  26 of 28 stages inside over every pair of runs, `docs/data/h200_interval_agreement_all_pairs.txt`).
* **What each lever adds** is the ratio of two stages that differ by that lever alone, its interval computed
  from those two stages' own processes paired by round (the same t-interval), not from their intervals against
  the baseline, whose noise would count twice. It reads **measured** where the interval excludes ×1.00; **no
  measurable effect** only where it lies within 3% of ×1.00 (inside [1/1.03, 1.03]: the precision the tool aims
  for); else **inconclusive**, with its interval and how many processes a stage would narrow it to 3% at the
  spread its processes showed (and about how long they take). A noisy or launch-bound stage lists each process's
  median, and says when they **split in two groups** (the largest gap between them over 39 times the spread
  inside the groups: for three processes of one population that happens under 5% of the time).

### Throughput, FLOPs and MFU
The attention term counts the full $T\times T$ score matrix, not the causal half FlashAttention computes: it is
the standard formula behind published MFU figures, so the same step compares on equal terms with them.

tokens/s = batch × sequence ÷ median step time. Model FLOPs per step follow the PaLM appendix (as nanoGPT):

$$\text{FLOPs} = (6N + 12\,L\,d\,T)\times B\,T$$

with $N$ the parameters that take part in matmuls (GPT: all but the position embedding, the token embedding
counting as the tied LM head; Llama: all but the input embedding, its own LM head counting), $L$ layers, $d$
width, $T$ sequence length and $B$ batch. **MFU** divides the achieved FLOP/s by the GPU's dense datasheet peak
for the stage's math: FP32 for `fp32`, TF32 for `tf32`, BF16/FP16 for the autocast stages (e.g. H100/H200 SXM:
66.9, 494.7 and 989.4 TFLOP/s). **FP8 stages** (torchao, Transformer Engine) count the same model FLOPs against
the **BF16** peak, and the table labels their MFU "of bf16": an FP8 stage above a BF16 one did the same work
faster, not more of it. GPUs are matched by their exact name
pattern (an H200 NVL never takes the SXM figures); a GPU not in the table gets no MFU, with the reason.
CPUs have no peak, so no MFU.

### Where the time goes, and what bounds it
After the timed steps, 5 more steps run under `torch.profiler` (untimed). From their trace:
* **GPU kernel time per step**: the union of kernel intervals ÷ 5; **kernels per step**.
* **Time by category** — GEMM, attention, normalization, optimizer, cast/copy, elementwise/other,
  communication — classified by kernel name with one rule table (`bench_core/measure/breakdown.py`), tested on kernel
  names recorded on an H200. Kernels launched inside `Optimizer.step` count as optimizer. On CPU, the
  profiler's CPU-op self times are classified the same way.
* **Trace busy** (the JSON profile's `trace_busy`, never shown) = union of kernel intervals ÷ the span from the
  first kernel to the last. The profiler slows the host, so this figure is lower than in unprofiled steps.
* **Why the GPU idled** (`bench_core/measure/idle.py`), by Holistic Trace Analysis's idle-time rule: each
  idle interval of the GPU is *host wait* when the runtime call that enqueued the next kernel or copy
  (`cudaLaunchKernel`, `cudaMemcpyAsync`, `cudaGraphLaunch`…, matched by CUPTI's correlation id) started after
  the GPU's last work ended (the whole interval counts); *kernel wait* when the next one was queued in time and
  the gap is under 30 µs; *other* (a sync, an event, a copy) otherwise. Only time when the whole GPU is idle
  counts, so busy + host wait + other idle = the span. A test checks the rule against HTA on a saved trace.
* The **bottleneck verdict** is the host wait's, with no line fitted to results. The profiler only adds host
  work, so a profiled step is longer than a timed one by at most the host wait it added: the trace's host wait
  less that extra length is host wait the **timed** steps had too (the *Host wait* column, as a share of the
  median step). A timestamp resolves 1 µs (the trace's unit; HTA rounds to it), so each of a step's N idle
  gaps is known to within 1 µs, and a gap whose launch call began within 1 µs of the GPU's last end may not be
  host wait at all. Host wait above N × 1 µs plus those unresolved gaps is host wait however the timestamps
  were rounded: then the stage is `launch-bound` (its time follows the host CPU, which differs between machines
  and from minute to minute); otherwise `gpu-bound`. Beside the verdict each view shows the figure that
  decided it: a `launch-bound` stage's host wait, a `gpu-bound` one's **kernel share** (kernel time ÷ median
  step time; the CSV's `kernel_share`), so no verdict sits beside a figure that reads otherwise. Records saved
  before this attribution keep the old verdict (kernel share under 90%, a line fitted to the
  H200 runs of 2026-12-02), and say so only by having no host-wait share. The `graphs` lever removes launch
  overhead: the same kernels, replayed from one CUDA graph. On CPU the verdict is `unknown`.
* **What changed from the previous stage**: Δ ms per category and Δ kernels per step, e.g. Apex FusedLayerNorm
  under autocast adds the dtype casts its Python wrapper launches around every call.
* These figures are computed from the raw Kineto events in `bench_core/measure/breakdown.py`, not with
  HolisticTraceAnalysis (HTA): HTA reads exported trace files, and exporting plus re-reading a trace for every
  stage would add seconds per stage; its temporal and idle-time breakdowns use the same definitions.

### Energy
Where NVML supports it, the GPU's total-energy counter is read before and after the timed steps; J/token is
that difference ÷ the tokens of those steps. Where the counter is not supported the figure is left empty.

### Memory
On CUDA: `torch.cuda.max_memory_allocated` and `max_memory_reserved`, reset after warm-up. A CUDA-graph stage
replays from the graph's private memory pool, which the allocator counts as reserved, not allocated: its peak
memory is the reserved figure (on the H200, 11,568 MiB reserved against 2,080 MiB allocated for gpt2-small).
On CPU the worker's peak resident set size is recorded but not charted: it is the whole process's, alike for
every stage.

### Proof of use
The profiled steps must show what every lever claims — Apex's `multi_tensor_apply_kernel<…AdamFunctor…>` and
`cuApplyLayerNorm`, or PyTorch's `aten::_fused_adam_`, `aten::_foreach_*`, `aten::native_layer_norm`; BF16/FP16
stages GEMMs with bf16/fp16 inputs and no fp32 GEMM (read from the dtype of each GEMM's first operand: `mm`/`bmm`
input 0, `addmm`/`baddbmm` input 1, since their input 0 is the addend); TF32 stages TF32 GEMM kernels; compile
stages Triton kernels; graphs stages CUDA graph launches; Apex FusedRMSNorm `cuApplyRMSNorm` and no
`aten::_fused_rms_norm`/`aten::rms_norm`; Liger's Triton kernels (`_layer_norm_forward_kernel`,
`_rms_norm_forward_kernel`, `liger_cross_entropy_kernel`) and no aten norm they replace; FP8 stages
`aten::_scaled_mm` or cuBLASLt e4m3/e5m2 GEMMs. The worker also reports the optimizer and norm classes it built
and the TF32 and GradScaler switches, and the verdict checks them. A stage whose levers name a library (Apex,
Liger, torchao, Transformer Engine) but whose trace shows the aten fallback (or none of the library's kernels) is
marked **fallback** with a visible warning, and is never counted as that library. An imported run's proof was seen on
another machine: it is shown as "imported: verified on <gpu>", never as verified here.

### Several GPUs
A stage with `gpus = N > 1` is one isolated job launched through `torchrun --nproc-per-node N` (NCCL; gloo
processes on CPU, which checks the path but is no speed figure). The model is wrapped in
`DistributedDataParallel`; every rank takes the same per-GPU batch of its own tokens (weak scaling). All ranks
meet at a barrier before the timed steps and rank 0 times them with CUDA events; peak memory is gathered from
every rank; throughput counts all ranks' tokens. **Scaling efficiency** = throughput(N) ÷ (N × throughput(1))
for the same levers on one GPU in the same run. NVLink multicast stays off (`NCCL_NVLS_ENABLE=0`).

### Caveats worth knowing
* **Apex FusedLayerNorm falls back to `F.layer_norm` under `torch.compile`, and on CPU** — Apex checks
  `torch.compiler.is_compiling()` and `input.is_cuda`. Such stages are shown as unavailable rather than run.
* **TF32 is off in the `fp32` baseline** (`allow_tf32 = False` for matmul and cuDNN): it is true FP32. The
  `tf32` lever measures TF32 separately.
* On current PyTorch, `torch.optim.Adam` is already a multi-tensor (`foreach`) kernel on CUDA, and `fused=True`
  is a single fused kernel, so Apex FusedAdam has little left to win; native `nn.LayerNorm` is a fused kernel too.
* Under BF16 autocast, Apex FusedLayerNorm returns BF16 while `nn.LayerNorm` returns FP32.
* Apex FusedAdam matches torch Adam to float32 rounding once both use the same β: Apex casts β1 and β2 to
  float before computing 1−β, torch computes 1−β in double. With β2 = 0.999 that alone makes `exp_avg_sq`
  differ by 1.29e-5 relative (exactly the float32 rounding of 0.001); given fp32-rounded betas, torch agrees
  with Apex within 60 float32 roundings (the GPU parity test).
* Data is synthetic random tokens from the run's seed, identical for every stage, with identical initial
  weights: loss curves should overlay. A curve that departs is a numerics difference worth a look.
""")
