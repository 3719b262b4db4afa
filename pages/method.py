"""Method: how the numbers are measured, and the caveats that matter when reading them."""
import streamlit as st

st.title("📐 How this measures")
st.markdown(r"""
### Isolation
Every stage runs in its **own fresh Python process** (`python -m bench_core.worker`), started by the engine,
which reads its job from stdin and streams JSON events back. A crash, an out-of-memory error or a hang in one
stage is recorded (`failed`, `oom`, `timeout`) and the next stage still runs; killing the process returns its
GPU memory to the system. Stages never run two at a time: one server, one queue, one GPU.
The next stage's process is started — torch imported, CUDA context created — only once the previous stage's
timed iterations are over, while it is being profiled.

### Timing
* Model, optimizer and data are built, then **warm-up** iterations run untimed (first-call costs, cuBLAS
  heuristics and `torch.compile` land here).
* Each **timed iteration** is bracketed by CUDA events around `zero_grad` + forward + backward + optimizer
  step. The host does not synchronise between iterations, so the CPU may queue the next step as a real
  training loop does; an iteration's time is read once its end event has completed. On CPU, `time.perf_counter`.
* The **median** is the headline, with p10 and p90. A stage is flagged **noisy** when its interquartile range
  is over 10% of its median. Speedups are ratios of medians **within one run** against its first `ok` stage —
  this machine class is noisy, so compare ratios, not absolute numbers across runs.

### Throughput, FLOPs and MFU
tokens/s = batch × sequence ÷ median step time. Model FLOPs per step follow the PaLM appendix (as nanoGPT):

$$\text{FLOPs} = (6N + 12\,L\,d\,T)\times B\,T$$

with $N$ the parameters that take part in matmuls (all but the position embedding; the token embedding counts
as the tied LM head), $L$ layers, $d$ width, $T$ sequence length and $B$ batch. **MFU** divides the achieved
FLOP/s by the GPU's dense datasheet peak for the stage's math: FP32 for `fp32`, TF32 for `tf32`, BF16/FP16 for
the autocast stages (e.g. H100/H200 SXM: 66.9, 494.7 and 989.4 TFLOP/s). CPUs have no peak in the table, so no MFU.

### Memory
On CUDA: `torch.cuda.max_memory_allocated` and `max_memory_reserved`, reset after warm-up. On CPU: the
worker process's peak resident set size.

### Proof of use
After the timed iterations, each stage runs three more steps under `torch.profiler` (not timed). The trace
must show the kernels the stage claims — Apex's `multi_tensor_apply_kernel<…AdamFunctor…>` and
`cuApplyLayerNorm`, or PyTorch's `aten::_fused_adam_`, `aten::_foreach_*`, `aten::native_layer_norm`.
A stage whose levers say Apex but whose trace shows the aten fallback (or no Apex kernel) is marked
**fallback** with a visible warning, and is never counted as Apex.

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
* Apex FusedAdam is built with `--use_fast_math`: it matches torch Adam to rounding, not bit for bit.
* Data is synthetic random tokens from the run's seed, identical for every stage, with identical initial
  weights: loss curves should overlay. A curve that departs is a numerics difference worth a look.
""")
