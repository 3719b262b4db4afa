"""Kernels: what this machine can run, Apex's real state, install commands and live GPU telemetry."""
from __future__ import annotations

import streamlit as st

from bench_core.machine.status_board import AMBER, GREEN, install_commands, probe_board
from bench_core.machine.telemetry import gpu_telemetry
from dashboard.session import access_panel, get_manager, is_operator, operator_token, role

DOT = {GREEN: ":green[●]", AMBER: ":orange[●]", "red": ":red[●]"}

manager = get_manager()
access_panel()
st.title("Kernels and environment")

if operator_token() is None:
    st.info("No operator token is configured, so everyone who opens this page is an operator (may run, "
            "cancel and import). Set BENCH_OPERATOR_TOKEN or operator_token in .streamlit/secrets.toml to "
            "restrict that on a shared server.")


@st.fragment(run_every=1.0)
def board() -> None:
    probe = manager.probe(timeout=0)
    if probe is None:
        st.info("Probing this machine in a separate process (imports torch, tries each kernel)…")
        return
    if probe.error:
        st.error(probe.error)
    rows = probe_board(probe)
    for section in dict.fromkeys(r.section for r in rows):
        st.subheader(section)
        for r in (r for r in rows if r.section == section):
            st.markdown(f"{DOT[r.state]} **{r.item}** — {r.detail}")
    if not probe.apex_healthy:
        commands = install_commands(probe)
        st.subheader("Install NVIDIA Apex")
        if commands is None:
            st.caption("Apex's fused kernels need a CUDA build of torch and an NVIDIA GPU. This machine has "
                       f"torch {probe.torch}" + ("" if probe.cuda_runtime else " (a CPU build)") + " and "
                       + ("no GPU" if not probe.cuda_available else "a GPU") + ", so there is nothing to build "
                       "Apex for here: run the Apex stages on a GPU machine (README, 'Installing Apex').")
        else:
            st.caption("Apex is not on PyPI: build it from source with its CUDA extensions. Filled in from this "
                       "machine's torch CUDA version, nvcc and GPU architecture.")
            st.code(commands, language="bash", wrap_lines=True)
    if is_operator() and st.button("Probe again", help="re-run the probe, e.g. after installing Apex"):
        manager.reprobe(role=role())
        st.rerun()


board()

st.subheader("GPU telemetry (NVML, every 2 s)")


@st.fragment(run_every=2.0)
def telemetry() -> None:
    devices = gpu_telemetry()
    if not devices:
        st.caption("No GPU: NVML found no NVIDIA device on this machine.")
        return
    for d in devices:
        st.markdown(f"**GPU {d['index']}: {d['name']}**")
        a, b, c, e = st.columns(4)
        a.metric("Utilisation", f"{d['util_pct']} %")
        b.metric("Memory", f"{d['mem_used_mib'] / 1024:.1f} / {d['mem_total_mib'] / 1024:.0f} GiB")
        c.metric("Power", "—" if d["power_w"] is None else f"{d['power_w']:.0f} W")
        e.metric("Temperature", "—" if d["temp_c"] is None else f"{d['temp_c']} °C")


telemetry()
