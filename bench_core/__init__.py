"""bench_core: the Streamlit-free engine of the staged transformer training benchmark."""
