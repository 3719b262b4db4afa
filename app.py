"""Entry point: `streamlit run app.py`. It only routes; pages draw; bench_core does the work."""
import streamlit as st

st.set_page_config(page_title="Fused-kernel training benchmark", page_icon="⚡", layout="wide")

pages = [
    st.Page("pages/benchmark.py", title="Benchmark", icon="⚡", default=True),
    st.Page("pages/kernels.py", title="Kernels", icon="🧩"),
    st.Page("pages/history.py", title="History", icon="🗂️"),
    st.Page("pages/method.py", title="Method", icon="📐"),
]
st.navigation(pages).run()
