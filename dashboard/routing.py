"""A page opened by a deep link before app.py has run once in this server process: Streamlit's first run, seeing a
pages/ folder, takes it for its older multipage layout and runs the page alone, under that layout's menu ("app"
and the files' lowercase names) and without app.py's wide layout (a new user's pass opened /history first).
Every page calls `through_app()` before drawing (most through dashboard.page_header.open_page): that run starts
again through app.py's own menu.

Once a process: st.navigation clears Streamlit's flag for good in a server, but AppTest sets it again before every
run (streamlit 1.67), where a rerun each time would drop the widget events a test sends (tests/pages/conftest.py
marks the process routed)."""
from __future__ import annotations

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager

ROUTED = {"done": False}   # this process has routed its first run


def through_app() -> None:
    if PagesManager.uses_pages_directory and not ROUTED["done"]:
        ROUTED["done"] = True
        PagesManager.uses_pages_directory = False   # what st.navigation sets once app.py has run
        st.rerun()
