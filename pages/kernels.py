"""Kernels: what this machine can run, Apex's real state, its build doctor and live GPU telemetry."""
from __future__ import annotations

import os

import streamlit as st

from bench_core.apex_build.build import default_build_dir
from bench_core.apex_build.doctor import BuildEnvironment, HostFacts, Verdict, diagnose, host_facts
from bench_core.machine.status_board import AMBER, GREEN, install_commands, probe_board
from bench_core.machine.telemetry import gpu_telemetry
from dashboard.page_header import open_page, page_header
from dashboard.session import is_operator, operator_token, role

DOT = {GREEN: ":green[●]", AMBER: ":orange[●]", "red": ":red[●]"}
# a word in a colour, not an emoji: without an emoji font ✅ and ❌ render as the same box
VERDICT_MARK = {Verdict.OK: ":green[**PASS**]", Verdict.WARN: ":orange[**WARN**]", Verdict.FAIL: ":red[**FAIL**]"}
BUILD_FIX = "make apex"   # the doctor's fix that builds Apex: no advice where there is nothing to build it for


@st.cache_data(ttl=60, show_spinner=False)
def toolchain() -> HostFacts:
    """nvcc, compiler, ninja and disk: a few `--version` calls, not repeated on every refresh of the board."""
    return host_facts(default_build_dir(os.environ))


def _plain(text: str) -> str:
    """A doctor's text as markdown shows it literally: `$CUDA_HOME` must not open LaTeX."""
    return text.replace("$", "\\$")


manager = open_page()
page_header(manager, "Kernels and environment")

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
    nothing_to_build = not probe.apex_healthy and install_commands(probe) is None
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
                       "Apex for here: run the Apex stages on a GPU machine (docs/APEX.md, 'Installing Apex').")
        else:
            st.caption("Apex is not on PyPI: one command builds its CUDA extensions for this GPU into the app's "
                       "environment, after the doctor below passes, then probes the result.")
            st.code("make apex    # or: APEX_SRC=/path/to/apex make apex", language="bash")
            with st.expander("By hand (the upstream commands, filled in for this machine)"):
                st.code(commands, language="bash", wrap_lines=True)
    st.subheader("Apex build doctor")
    checks = diagnose(BuildEnvironment.of(probe, toolchain()), after_build=probe.apex.status != "missing")
    # one block a check, its finding and fix wrapped under its name: as a table, a phone cut the finding and the
    # fix ran off the screen (a new user's pass at 390 px)
    with st.container(key="doctor"):
        for c in checks:
            advised = c.fix and c.verdict is not Verdict.OK and not (nothing_to_build and BUILD_FIX in c.fix)
            fix = f"  \n**Fix:** {_plain(c.fix)}" if advised else ""
            st.markdown(f"{VERDICT_MARK[c.verdict]} **{_plain(c.name)}** — {_plain(c.message)}{fix}")
    st.caption("The same checks in a terminal: `python -m bench_core apex doctor`."
               + ("" if nothing_to_build else f" Build: `{BUILD_FIX}`."))
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
