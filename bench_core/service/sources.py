"""What a shared server accepts as a model source: the catalog, an uploaded config.json, a cached model id, and a
config path only inside the allowed folders (BENCH_MODEL_DIRS). Never a factory: it would run the user's code on the
server. Checked before anything is queued."""
from __future__ import annotations

import os

from bench_core.config.bench_config import BenchConfig, ConfigError, SourceKind


def server_source_errors(cfg: BenchConfig, allowed_dirs: tuple[str, ...]) -> list[ConfigError]:
    source = cfg.source
    if source is None:
        return []
    if source.kind is SourceKind.FACTORY:
        return [ConfigError("model_factory", source.name, "the shared server runs no user code; --model-factory "
                            "is for the CLI on your own machine")]
    if source.kind is SourceKind.CONFIG and os.path.isabs(source.name):
        path = os.path.realpath(source.name)
        if not any(os.path.commonpath([path, folder]) == folder for folder in allowed_dirs):
            places = ", ".join(allowed_dirs) or "none (set BENCH_MODEL_DIRS)"
            return [ConfigError("config", source.name, f"is outside the folders this server reads configs from: "
                                f"{places}; upload the config.json instead")]
    return []
