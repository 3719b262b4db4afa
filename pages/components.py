"""Components: the optimizer step and LayerNorm alone, at the model's real shapes, against this GPU's ceilings."""
from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from bench_core.components.rows import (
    ComponentsReport,
    component_cells,
    component_columns,
    optimizer_step_bytes,
    write_csv_text,
)
from bench_core.config.bench_config import WORKLOADS
from bench_core.levers.lever_types import OptimizerLever
from bench_core.levers.registry import BASELINE_LEVERS, LEVERS
from bench_core.measure.breakdown import BUSY_THRESHOLD, Bound
from bench_core.results.figures import components_bars
from bench_core.service.jobs import LimitExceeded, NotAllowed
from dashboard.page_header import open_page, page_header
from dashboard.session import (
    history,
    is_operator,
    listed,
    role,
)

manager = open_page()

_BASELINE: OptimizerLever = LEVERS[BASELINE_LEVERS["optimizer"]]  # type: ignore[assignment]
_ADAM_BYTES = optimizer_step_bytes([1], _BASELINE.moment_bytes)
probe = manager.probe(timeout=0)
# the timer this machine uses (a CPU has no CUDA events; the intro said it did, a new user's pass)
timer = "with CUDA events" if probe is None or probe.cuda_available else "with time.perf_counter (no GPU here)"
page_header(manager, "Components: what Apex changes in isolation",
            "A training step hides the optimizer and the norm (LayerNorm for gpt, RMSNorm for llama) in a few "
            "percent of its time. Here each runs alone, "
            f"at the chosen model's real parameter shapes and rows × width, timed {timer} (median of "
            "repeated calls), and set against what this GPU can do at most: its measured copy bandwidth (an "
            "optimizer step reads and writes the parameter and two moments and reads the gradient, each moment at "
            f"its lever's own size: {_ADAM_BYTES} bytes per fp32 parameter for Adam, less for an 8-bit state).")

ceilings = probe.ceilings if probe else None
if ceilings:
    st.markdown(f"Measured ceilings on **{ceilings.device_name}**: bf16 GEMM "
                f"**{ceilings.bf16_tflops:.0f} TFLOP/s**, fp32 GEMM (TF32 off) **{ceilings.fp32_tflops:.1f} "
                f"TFLOP/s**, device copy **{ceilings.copy_gbps:,.0f} GB/s**.")
    st.caption(ceilings.method)
elif probe is not None and probe.cuda_available:
    st.caption("This GPU's ceilings are not measured yet (a first run measures them after its stages; measuring "
               "the components measures them too): until then no row has a copy fraction.")
elif probe is not None:
    st.caption("No GPU here: no ceilings. On CPU torch's own Adam rows and norm run (Runs as says how each Adam "
               "step ran: torch's default Adam is a for-loop on a CPU, foreach on a GPU); the Apex and Liger rows "
               "are unavailable, each with its reason.")

model = st.selectbox("Model size", list(WORKLOADS), index=list(WORKLOADS).index(
    "gpt2-small" if probe and probe.cuda_available else "tiny"))


def measure() -> None:
    try:
        report_id = manager.run_components(model, role=role())
        st.session_state["components_shown"] = report_id
        st.session_state["components_message"] = ("success", f"Measured and saved (report {report_id}).")
    except (LimitExceeded, NotAllowed) as exc:
        st.session_state["components_message"] = ("error", str(exc))


st.button("Measure the components", type="primary", on_click=measure, disabled=not is_operator(),
          help="runs in its own process, never beside a stage run")
message = st.session_state.pop("components_message", None)
if message:
    (st.success if message[0] == "success" else st.error)(message[1])

reports = listed(history().list_components, "the history database")
if not reports:
    st.info("No components report yet.")
else:
    labels = {r["report_id"]: f"{r['created_at'][:16]} · {r['model']} · {r['gpu'] or r['device']} · {r['report_id']}"
              for r in reports}
    default = st.session_state.get("components_shown", reports[0]["report_id"])
    chosen = st.selectbox("Report", list(labels), format_func=lambda report_id: labels[report_id],
                          index=list(labels).index(default) if default in labels else 0)
    data = history().load_components(chosen) if chosen is not None else None
    if data:
        report = ComponentsReport.from_dict(data)
        st.plotly_chart(components_bars(report), width="stretch", key="components_chart")
        columns = component_columns(report.device)
        st.dataframe(pd.DataFrame(component_cells(report)), hide_index=True, width="stretch",
                     key="components_table",
                     column_config={c.header: st.column_config.TextColumn(c.header, help=c.help) for c in columns})
        not_run = report.not_run()
        if not_run:
            st.markdown("**Not measured here**\n" + "\n".join(f"- {line}" for line in not_run))
        host_bound = [r.label for r in report.rows if r.bound == Bound.LAUNCH]
        if host_bound:
            kernel_time = next(c.header for c in columns if c.key == "kernel_time")
            st.caption(f"launch-bound (kernels fill less than {BUSY_THRESHOLD:.0%} of the call): "
                       f"{', '.join(host_bound)}. Their wall time follows the host CPU and moves between runs; "
                       f"{kernel_time} is the stable figure.")
        noisy = [f"{r.label} ({r.noise_reason})" for r in report.rows if r.noisy]
        if noisy:   # the Benchmark page's rule (ComponentRow.noise_reason): such a median is not a steady figure
            st.caption(f"noisy: {'; '.join(noisy)}. Measure again on a quieter machine before reading these.")
        for row in report.rows:
            if row.extra_kernels:
                st.caption(f"{row.label}: its wrapper adds {'; '.join(row.extra_kernels)}")
        a, b, _ = st.columns([1, 1, 4])
        a.download_button("Download CSV", data=write_csv_text(report), file_name=f"components_{chosen}.csv",
                          mime="text/csv")
        b.download_button("Download JSON", data=json.dumps(data, indent=1), file_name=f"components_{chosen}.json",
                          mime="application/json")
