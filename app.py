import streamlit as st

st.title("Transformer training benchmark")
st.write("Dashboard under construction: use `python -m bench_core run` for now.")
