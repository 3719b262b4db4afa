"""Who may do what on a shared server. Viewers see and export; operators run, cancel and import."""
from __future__ import annotations

import hmac
import os
from collections.abc import Mapping

from bench_core.config.environment import TOKEN_ENV

OPERATOR, VIEWER = "operator", "viewer"


def configured_token(secrets: Mapping | None = None, env: Mapping[str, str] | None = None) -> str | None:
    """The operator token from the environment, else from .streamlit/secrets.toml; None when unset."""
    source: Mapping[str, str] = os.environ if env is None else env
    token = source.get(TOKEN_ENV) or (secrets or {}).get("operator_token")
    return str(token) if token else None


def role_for(entered: str | None, configured: str | None) -> str:
    """No token configured (a personal workstation): everyone is an operator."""
    if configured is None:
        return OPERATOR
    if entered and hmac.compare_digest(entered.encode(), configured.encode()):
        return OPERATOR
    return VIEWER


class Throttle:
    """Failed operator-token attempts of one session: after the n-th failure the next try waits 2^(n-1) s
    (at most MAX_DELAY_S). A right token clears it. Time is passed in, so tests need no sleeping."""

    MAX_DELAY_S = 300.0

    def __init__(self) -> None:
        self.failures = 0
        self.until = 0.0

    def wait_s(self, now: float) -> float:
        """Seconds before another attempt is accepted; 0 when one may be tried now."""
        return max(0.0, self.until - now)

    def record(self, ok: bool, now: float) -> None:
        if ok:
            self.failures, self.until = 0, 0.0
            return
        self.failures += 1
        self.until = now + min(2.0 ** (self.failures - 1), self.MAX_DELAY_S)
