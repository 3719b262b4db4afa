"""Streamlit components shared by the pages: session and manager, the job view, the form and ladder builder."""
