"""Entry point: `streamlit run app.py`. It only routes; pages draw; bench_core does the work."""
import streamlit as st

st.set_page_config(page_title="Fused-kernel training benchmark", layout="wide")

pages = [
    st.Page("pages/benchmark.py", title="Benchmark", default=True),
    st.Page("pages/components.py", title="Components"),
    st.Page("pages/sweep.py", title="Sweep"),
    st.Page("pages/recommend.py", title="Recommend"),
    st.Page("pages/kernels.py", title="Kernels"),
    st.Page("pages/history.py", title="History"),
    st.Page("pages/machines.py", title="Machines"),
    st.Page("pages/method.py", title="Method"),
]
st.navigation(pages).run()
