"""Machines: the cluster's nodes with what each one's own probe found, free or busy; without a cluster, this one."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from bench_core.cluster.address import ADDRESS_ENV
from bench_core.cluster.nodes import Node
from bench_core.machine.probe import Probe
from dashboard.page_header import open_page, page_header
from dashboard.session import cluster_nodes

PACKAGES = (("liger_kernel", "Liger"), ("torchao", "torchao"), ("transformer_engine", "TE"))

manager = open_page()
page_header(manager, "Machines")


def _gib(value: int | None) -> str:
    return f"{value / 2**30:.0f} GiB" if value else "—"


def row(name: str, probe: Probe | None, gpus: int | None, state: str) -> dict[str, str]:
    if probe is None:
        return {"machine": name, "state": state, "GPU": "probing…"}
    packages = {title: (probe.packages[key].version or "—") if key in probe.packages else "—"
                for key, title in PACKAGES}
    return {"machine": name, "state": state, "GPU": probe.cuda.name or "CPU only",
            "GPUs": str(gpus if gpus is not None else probe.cuda.device_count),
            "memory": _gib(probe.cuda.total_bytes), "driver": probe.driver or "—", "torch": probe.torch or "—",
            "Apex": probe.apex.label, **packages}


def node_state(node: Node) -> str:
    return "lost" if not node.alive else "busy" if node.busy else "free"


nodes = cluster_nodes()
if nodes is None:
    st.caption(f"No cluster configured: every run goes to this machine. Set `{ADDRESS_ENV}` (docs/CLUSTER.md) to "
               "run ladders on a pool of GPU hosts through Ray.")
    local = manager.probe(timeout=0)
    st.dataframe(pd.DataFrame([row("this machine", local, None, "busy" if manager.active() else "free")]),
                 hide_index=True)
else:
    st.caption(f"{len(nodes)} node(s) in the cluster. Each probed itself (GPU, driver, torch, Apex, kernel "
               "libraries); busy: one of this dashboard's runs is on it.")
    st.dataframe(pd.DataFrame([row(n.name, n.probe, n.gpus, node_state(n)) for n in nodes]), hide_index=True,
                 key="machines")
    if any(n.probe is None and n.alive for n in nodes):
        st.button("Refresh", help="probes still running on some nodes")
