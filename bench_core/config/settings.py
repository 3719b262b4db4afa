"""Every cap the engine and the shared server enforce, in one place.

Each cap has a safe default and can be overridden by an environment variable
named ``BENCH_<FIELD>`` (for example ``BENCH_MAX_SEQ_LEN=4096``).
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace


@dataclass(frozen=True)
class Limits:
    max_depth: int = 96
    max_width: int = 12288
    max_heads: int = 128
    max_seq_len: int = 8192
    max_batch_size: int = 256
    max_vocab_size: int = 262144
    max_warmup: int = 200
    max_iters: int = 2000
    max_repeats: int = 5
    max_tokens_per_step: int = 262144      # seq_len x batch_size
    max_params: int = 20_000_000_000
    max_stages_per_job: int = 16
    max_queue_length: int = 8
    max_jobs_per_session: int = 2
    max_upload_mib: int = 5
    stage_timeout_s: int = 900
    max_gpus: int = 8
    max_sweep_points: int = 64             # a sweep's grid, all axes together


def load_limits(env: Mapping[str, str] | None = None) -> Limits:
    """Limits with any ``BENCH_<FIELD>`` overrides applied; bad overrides are refused loudly."""
    source: Mapping[str, str] = os.environ if env is None else env
    overrides = {}
    for f in fields(Limits):
        raw = source.get(f"BENCH_{f.name.upper()}")
        if raw is None:
            continue
        try:
            value = int(raw)
        except ValueError:
            raise ValueError(f"BENCH_{f.name.upper()}={raw!r} is not an integer") from None
        if value <= 0:
            raise ValueError(f"BENCH_{f.name.upper()}={raw!r} must be positive")
        overrides[f.name] = value
    return replace(Limits(), **overrides)


def allowed_model_dirs(env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The folders a shared server may read a config.json from (BENCH_MODEL_DIRS, separated by os.pathsep);
    none by default: there, a model comes from the catalog or an upload."""
    source: Mapping[str, str] = os.environ if env is None else env
    return tuple(os.path.realpath(d) for d in source.get("BENCH_MODEL_DIRS", "").split(os.pathsep) if d)
