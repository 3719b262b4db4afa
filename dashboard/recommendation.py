"""A Recommendation as the Recommend page draws it: the answer first, in lines that wrap on a phone; every candidate
in a table on a wide screen and as a list on a phone (a 390 px screen showed a wide table's first two columns);
the recipe as code; the limits and what was not searched. Reads the answer's own figures, computes none."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from bench_core.recommend.answer import Ranked, Recommendation
from bench_core.recommend.planner import Label

PHONE_PX = 640   # Streamlit stacks columns at this width and below: a phone
UNVERIFIED_MARK = "⚠"   # kernels did not verify: never recommended


def _rate(r: Ranked) -> str:
    parts = [f"{r.tokens_per_s:,.0f} tokens/s" if r.tokens_per_s else "no tokens/s",
             f"MFU {r.mfu:.1%} of the BF16 dense peak" if r.mfu is not None else "no MFU (no GPU peak here)"]
    if r.peak_gib is not None:
        parts.append(f"peak {r.peak_gib:.2f} GiB" + ("" if r.label == Label.MEASURED.value else " (predicted)"))
    return ", ".join(parts)


def headline(rec: Recommendation) -> str:
    r = rec.recommended
    if r is None:
        return f"No recommendation: {rec.separation}."
    if rec.either and rec.runner_up is not None:
        return (f"Either **{r.stage}** at batch {r.batch_size} or **{rec.runner_up.stage}** at batch "
                f"{rec.runner_up.batch_size}: their intervals overlap")
    return f"Switch on **{r.stage}** at batch {r.batch_size}"


def answer_lines(rec: Recommendation) -> list[str]:
    """The answer's figures, one a line."""
    r = rec.recommended
    lines = []
    if r is not None:
        if rec.speedup is not None:
            lines.append(f"**×{rec.speedup:.2f}** per token over `{rec.from_key}` (95% interval "
                         f"×{rec.speedup_low:.2f}–×{rec.speedup_high:.2f}, {rec.speedup_scope})")
        else:
            lines.append(f"no speedup over `{rec.from_key}`: it was not measured beside the leader")
        lines.append(_rate(r))
        lines.append(f"runner-up: {rec.separation}")
    s = rec.savings
    if s is not None:
        lines.append(f"for {s.tokens:,} tokens: **{s.gpu_hours:,.2f} GPU-hours** instead of {s.gpu_hours_from:,.2f}"
                     + (f", {s.energy_kwh_saved:,.2f} kWh saved" if s.energy_kwh_saved is not None else "")
                     + (f", {s.cost_saved:,.2f} saved at the price given" if s.cost_saved is not None else "")
                     + (f" ({s.note})" if s.note else ""))
    lines.append(f"tokens per step: {rec.tokens_per_step}")
    if rec.memory is not None:
        lines.append(f"memory budget {rec.memory.gib:.1f} GiB: {rec.memory.why}")
    lines.append(f"stopped: {rec.stop or 'not stopped'}")
    return lines


def label_of(r: Ranked) -> str:
    return f"{UNVERIFIED_MARK} {r.label}" if r.label == Label.UNVERIFIED.value else r.label


def candidate_rows(rec: Recommendation) -> list[dict]:
    """Every candidate, measured first: the wide table's rows, each figure as text (no "None")."""
    def num(value: float | None, fmt: str) -> str:
        return "–" if value is None else format(value, fmt)
    return [{"stage": c.stage, "batch": c.batch_size, "label": label_of(c), "step (ms)": num(c.step_ms, ",.1f"),
             "tokens/s": num(c.tokens_per_s, ",.0f"), "MFU": num(c.mfu, ".1%"), "peak (GiB)": num(c.peak_gib, ".2f"),
             "processes": c.processes, "why it left the race": c.dropped or "–"} for c in rec.candidates]


def phone_lines(rec: Recommendation) -> list[str]:
    return [f"`{c.stage}` at batch {c.batch_size}: {label_of(c)}"
            + (f", {c.tokens_per_s:,.0f} tokens/s" if c.tokens_per_s else "") for c in rec.candidates]


def style() -> None:
    """One of the two candidate views a screen: the table on a wide one, the list on a phone; long stage keys
    break anywhere rather than push the page sideways."""
    st.html(f"<style>@media (max-width: {PHONE_PX}px) {{ [class*='st-key-rec_candidates_wide'] {{ display: none; }} }}"
            f"@media (min-width: {PHONE_PX + 1}px) {{ [class*='st-key-rec_candidates_phone'] {{ display: none; }} }}"
            "[class*='st-key-rec_answer'] :is(p, li, code) { overflow-wrap: anywhere; }</style>")


def show(rec: Recommendation, key: str) -> None:
    with st.container(key=f"rec_answer_{key}"):
        st.subheader("The answer")
        st.markdown(headline(rec))
        st.markdown("\n".join(f"- {line}" for line in answer_lines(rec)))
        if rec.contributions:
            st.markdown("**What makes the difference**\n" + "\n".join(f"- {c}" for c in rec.contributions))
        if rec.recipe:
            st.markdown("**The recipe**")
            st.code(rec.recipe, language="python", wrap_lines=True)
        st.markdown("**Honest limits**\n" + "\n".join(f"- {line}" for line in rec.limits))
        with st.expander(f"Not searched, and why ({len(rec.excluded)})"):
            st.markdown("\n".join(f"- {e.text}" for e in rec.excluded) or "nothing was left out")
        st.markdown(f"**Every candidate** ({len(rec.candidates)}; {UNVERIFIED_MARK}: its kernels did not verify, "
                    "never recommended)")
    rows = candidate_rows(rec)
    with st.container(key=f"rec_candidates_wide_{key}"):
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", key=f"rec_table_{key}")
    with st.container(key=f"rec_candidates_phone_{key}"):
        st.markdown("\n".join(f"- {line}" for line in phone_lines(rec)))
    if rec.history_run:
        st.markdown(f"The stages measured at the leader's batch size: [run {rec.history_run}]"
                    f"(/history?run={rec.history_run})")
    st.download_button("Download JSON", rec.to_json(), f"recommendation_{rec.recommendation_id or 'new'}.json",
                       "application/json", key=f"rec_json_{key}")
