import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

import dashboard.routing
import dashboard.session


@pytest.fixture(autouse=True)
def routed(monkeypatch):
    """AppTest sets Streamlit's pages-folder flag again before every run: the deep-link rerun (dashboard.routing) is
    a server's first run only, tested in a real server (tests/e2e/test_deep_link.py)."""
    monkeypatch.setitem(dashboard.routing.ROUTED, "done", True)


@pytest.fixture
def app_env(tmp_path, monkeypatch, cpu_probe):
    """A fresh manager per test, on a temp DB, with the real CPU probe already measured."""
    monkeypatch.setenv("BENCH_DB", str(tmp_path / "runs.sqlite3"))
    monkeypatch.delenv("BENCH_OPERATOR_TOKEN", raising=False)
    monkeypatch.setattr(dashboard.session, "PROBE_OVERRIDE", cpu_probe)
    st.cache_resource.clear()
    yield tmp_path
    st.cache_resource.clear()


@pytest.fixture
def app(app_env, root):
    def make(page: str | None = None) -> AppTest:
        at = AppTest.from_file(str(root / "app.py"), default_timeout=90)
        at.run()
        if page:
            at.switch_page(page)
            at.run()
        assert not at.exception, at.exception
        return at
    return make


@pytest.fixture
def manager(app_env):
    return dashboard.session.get_manager()
