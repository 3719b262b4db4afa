"""Who may do what on a shared server. Viewers see and export; operators run, cancel and import."""
from __future__ import annotations

import hmac
import os

OPERATOR, VIEWER = "operator", "viewer"
TOKEN_ENV = "BENCH_OPERATOR_TOKEN"


def configured_token(secrets: dict | None = None, env: dict | None = None) -> str | None:
    """The operator token from the environment, else from .streamlit/secrets.toml; None when unset."""
    env = os.environ if env is None else env
    token = env.get(TOKEN_ENV) or (secrets or {}).get("operator_token")
    return str(token) if token else None


def role_for(entered: str | None, configured: str | None) -> str:
    """No token configured (a personal workstation): everyone is an operator."""
    if configured is None:
        return OPERATOR
    if entered and hmac.compare_digest(entered.encode(), configured.encode()):
        return OPERATOR
    return VIEWER
