"""Every page's opening, in one place: through app.py's menu, the job manager, the sidebar's access panel, then the
title, its caption and the history database's failure banner."""
from __future__ import annotations

import streamlit as st

from bench_core.service.jobs import JobManager
from dashboard.routing import through_app
from dashboard.session import access_panel, get_manager, persistence_banner


def open_page() -> JobManager:
    """The first call on a page: a deep link opened before app.py ran once reruns through app.py's menu first."""
    through_app()
    manager = get_manager()
    access_panel()
    return manager


def page_header(manager: JobManager, title: str, caption: str = "") -> None:
    """The title and what the page does; a page may read the probe first, as its words depend on the device."""
    st.title(title)
    if caption:
        st.caption(caption)
    persistence_banner(manager)
