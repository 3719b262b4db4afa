"""Run configuration and the family-free part of its validation (models.families adds the family's rules, the
parameter limit and the memory estimate).

Torch-free on purpose: the dashboard validates input without importing torch.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from enum import StrEnum
from typing import Any, NoReturn, TypedDict

from bench_core.config.settings import Limits

DEVICES = ("auto", "cuda", "cpu")
MIB = 1024 ** 2
GIB = 1024 ** 3


class ConfigError(ValueError):
    """Bad input: names the field, the value and the limit it broke."""

    def __init__(self, field: str, value: Any, limit: str):
        self.field, self.value, self.limit = field, value, limit
        super().__init__(f"{field}={value!r}: {limit}")


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose bad input is one line on stderr and exit code 2, like every other bad-input
    answer of the engine's commands (exit_code_of)."""

    def error(self, message: str) -> NoReturn:
        print(f"error: {message}", file=sys.stderr)
        sys.exit(2)


def check_outputs(paths: dict[str, str | None]) -> None:
    """Each output flag's folder is writable, and an --html report's renderer (plotly) is installed: checked before
    anything starts, so a long run never ends in a traceback at its last write."""
    import importlib.util
    for flag, path in paths.items():
        folder = os.path.dirname(os.path.abspath(path)) if path else None
        if folder and not (os.path.isdir(folder) and os.access(folder, os.W_OK)):
            raise ConfigError(flag, path, f"folder {folder} does not exist or is not writable")
    if paths.get("html") and importlib.util.find_spec("plotly") is None:
        raise ConfigError("html", paths["html"], "the HTML report draws its charts with plotly, which is not "
                          "installed here (pip install -r requirements.txt); leave out --html or install it")


def exit_code_of(command: Callable[[], int]) -> int:
    """Run one CLI command: bad input, Ctrl-C and a path that cannot be written end in one line on stderr and an
    exit code (2, 130, 1), never a traceback."""
    try:
        return command()
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except OSError as exc:  # e.g. an --out path that cannot be written
        print(f"error: {exc}", file=sys.stderr)
        return 1


# Adaptive timing (measure.stats.enough_steps): a process stops once its median step time is known to within
# +-STOP_HALF_WIDTH (95% interval), after at least min_iters steps, checking every STOP_CHECK_EVERY steps (run.step
# says why). 1%: the spread between processes is larger, so more precision inside one buys nothing.
# The floor is the least n whose median has a distribution-free 95% interval at all: [min, max] of n steps covers
# the median with probability 1 - 2**(1-n), 93.8% at n = 5 and 96.9% at n = 6 (measure.stats.median_interval).
MIN_TIMED_STEPS = 6
STOP_HALF_WIDTH = 0.01
STOP_CHECK_EVERY = 5
# Fresh processes per stage on a GPU: the interval's unit of replication; 3 leaves 2 degrees of freedom.
CUDA_PROCESSES = 3
# Warm-up (run.step.warm_up): at least DEFAULT_WARMUP_STEPS steps and WARMUP_MIN_S seconds. From the H200's record of
# 21 processes' warm-ups (docs/data/h200_2026-12-03_call17_warmup_*; benchmarks/warmup_settle.py): the first step
# carried every one-off cost (256-1881 ms against 26-160 ms steady) and from the second step on each process ran at
# its steady time (no trend in steps 2-12); the SM clock sat at its timed value from the first NVML sample on. So 2
# steps cover what was seen; 3 keep one more. 0.25 s keeps at least two 0.1 s clock samples inside every warm-up,
# so each run's record shows the clock before its timed steps. Every process's warm-up is recorded and a process
# still slowing down when timing began is flagged (measure.noise). BENCH_WARMUP_MIN_S overrides (CPU tests: 0).
DEFAULT_WARMUP_STEPS = 3
WARMUP_MIN_S = float(os.environ.get("BENCH_WARMUP_MIN_S", "0.25"))


class SourceKind(StrEnum):
    """Where a model that is not a built-in family comes from."""
    CATALOG = "catalog"      # an architecture config shipped with the package (bench_core/models/catalog)
    CONFIG = "config"        # a config.json the user gave (a path, or uploaded bytes)
    CACHE = "cache"          # a model id's config.json in the local Hugging Face cache
    FACTORY = "factory"      # the user's own module: module:function (CLI only)


@dataclass(frozen=True)
class ModelSource:
    """A model's source, recorded with every result so a run can be repeated from its file: the config as read
    (canonical JSON text, so the config stays hashable), the attention implementation it was built with."""
    kind: SourceKind
    name: str                    # catalog entry, config path or file name, model id, module:function
    config_json: str = ""        # the architecture's config.json, canonical; "" for a factory
    attention: str = "sdpa"

    @property
    def config(self) -> dict[str, Any]:
        return json.loads(self.config_json) if self.config_json else {}

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.config_json.encode()).hexdigest()

    @property
    def label(self) -> str:
        """One cell naming the source: "catalog gpt2", "config sha256:1a2b3c4d5e6f (my.json)", "factory m:f"."""
        if self.kind is SourceKind.CATALOG or self.kind is SourceKind.FACTORY:
            return f"{self.kind.value} {self.name}"
        return f"{self.kind.value} sha256:{self.sha256[:12]} ({self.name})"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "name": self.name, "config": self.config, "sha256": self.sha256,
                "attention": self.attention}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelSource:
        config = data.get("config") or {}
        return cls(SourceKind(data["kind"]), str(data["name"]), canonical_json(config) if config else "",
                   str(data.get("attention") or "sdpa"))


def canonical_json(config: dict[str, Any]) -> str:
    """The one text of a config: its hash names it in the history and CSV."""
    return json.dumps(config, sort_keys=True, separators=(",", ":"))


def _int(default: int, label: str, group: str, help: str = "", minimum: int = 1) -> Any:
    """A config field with what every form, table and parser needs to know about it."""
    return field(default=default, metadata={"label": label, "group": group, "help": help, "minimum": minimum})


@dataclass(frozen=True)
class BenchConfig:
    family: str = field(default="gpt", metadata={"label": "Model family", "group": "model",
                                                 "help": "gpt (LayerNorm, GELU, learned positions, tied head) or "
                                                         "llama (RMSNorm, SwiGLU, rotary, no biases, untied head)"})
    depth: int = _int(12, "Depth (layers)", "model")
    width: int = _int(768, "Width", "model", "hidden size; must be divisible by heads")
    heads: int = _int(12, "Heads", "model")
    seq_len: int = _int(1024, "Sequence length", "model")
    batch_size: int = _int(8, "Batch size", "model", "sequences per step (per GPU)")
    vocab_size: int = _int(50304, "Vocab size", "model")
    warmup: int = _int(DEFAULT_WARMUP_STEPS, "Warm-up iterations", "run",
                       "at least this many untimed steps, and at least WARMUP_MIN_S seconds of them")
    iters: int = _int(30, "Timed iterations", "run",
                      f"the most timed steps per process; each process stops earlier, after at least "
                      f"{MIN_TIMED_STEPS} steps (all of them, when iters is below {MIN_TIMED_STEPS}), "
                      f"once the 95% interval of its median step time is within ±{STOP_HALF_WIDTH:.0%} of the median "
                      f"(checked every {STOP_CHECK_EVERY} steps)")
    repeats: int = _int(1, "Repeats", "run", "rounds of the whole ladder, in alternating order, each stage in a "
                        "fresh process: the speedup intervals are computed across these processes "
                        f"({CUDA_PROCESSES} by default on a GPU); with one, an interval is only the noise within one "
                        "process, and says so")
    seed: int = _int(1234, "Seed", "run", minimum=0)
    device: str = field(default="auto", metadata={"label": "Device", "group": "run", "help": "auto, cuda or cpu"})
    source: ModelSource | None = field(default=None, metadata={
        "label": "Model source", "group": "source",
        "help": "a Hugging Face architecture (catalog entry, config.json, cached model id) or your own module; "
                "none for the built-in families"})

    def to_dict(self) -> dict:
        data = asdict(self)
        data["source"] = self.source.to_dict() if self.source else None
        return data

    @classmethod
    def from_dict(cls, data: dict) -> BenchConfig:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        if isinstance(values.get("source"), dict):
            values["source"] = ModelSource.from_dict(values["source"])
        return cls(**values)

    @property
    def tokens_per_step(self) -> int:
        return self.seq_len * self.batch_size

    @property
    def min_iters(self) -> int:
        """The floor of timed steps per process (`iters` is the ceiling): MIN_TIMED_STEPS, never above the
        ceiling. Past it the stopping rule decides how many a process needs."""
        return min(self.iters, MIN_TIMED_STEPS)


# Every list of config fields is derived from the dataclass, never written out again.
INT_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(BenchConfig) if f.type in ("int", int))
MODEL_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(BenchConfig) if f.metadata.get("group") == "model")
FIELD_LABELS: dict[str, str] = {f.name: f.metadata["label"] for f in fields(BenchConfig)}
FIELD_HELP: dict[str, str] = {f.name: f.metadata.get("help", "") for f in fields(BenchConfig)}
FIELD_MINIMUM: dict[str, int] = {f.name: f.metadata.get("minimum", 1) for f in fields(BenchConfig)
                                 if f.name in INT_FIELDS}


class Shape(TypedDict):
    """A workload: the model's shape and the batch it trains on (batch and sequence included)."""
    family: str
    depth: int
    width: int
    heads: int
    seq_len: int
    batch_size: int
    vocab_size: int


WORKLOADS: dict[str, Shape] = {
    "tiny": Shape(family="gpt", depth=2, width=128, heads=4, seq_len=64, batch_size=4, vocab_size=512),
    "gpt2-small": Shape(family="gpt", depth=12, width=768, heads=12, seq_len=1024, batch_size=8, vocab_size=50304),
    "gpt2-medium": Shape(family="gpt", depth=24, width=1024, heads=16, seq_len=1024, batch_size=8, vocab_size=50304),
    "llama-tiny": Shape(family="llama", depth=2, width=128, heads=4, seq_len=64, batch_size=4, vocab_size=512),
    "llama-small": Shape(family="llama", depth=12, width=768, heads=12, seq_len=1024, batch_size=8, vocab_size=32000),
    "llama-1b": Shape(family="llama", depth=16, width=2048, heads=32, seq_len=2048, batch_size=4, vocab_size=32000),
}


def model_label(cfg: BenchConfig) -> str:
    """The model a config trains, by name: its source's label (`catalog gpt2`, a config's hash, a factory) or its
    family."""
    return cfg.source.label if cfg.source else cfg.family


def describe_shape(cfg: BenchConfig) -> str:
    """One line naming every model and run field, for headers, reports and the CLI."""
    return " · ".join([model_label(cfg)] + [f"{FIELD_LABELS[n].split(' (')[0].lower()} {getattr(cfg, n)}"
                                      for n in INT_FIELDS if n != "seed"])


def int_field(name: str, raw: str) -> int:
    """A command-line flag's integer, or the ConfigError naming the flag; its limits are the config's own check."""
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise ConfigError(name, raw, "must be an integer") from None


def defaults_for(device_kind: str) -> BenchConfig:
    """GPT-2-small in 3 processes a stage on a GPU; a tiny model in one on CPU, so the seed ladder ends in seconds
    on 2 cores (its intervals then say "within one process")."""
    if device_kind == "cuda":
        return BenchConfig(**WORKLOADS["gpt2-small"], warmup=DEFAULT_WARMUP_STEPS, iters=30, repeats=CUDA_PROCESSES,
                           device="auto")
    return BenchConfig(**WORKLOADS["tiny"], warmup=3, iters=10, device="auto")


def workload(name: str, base: BenchConfig) -> BenchConfig:
    if name not in WORKLOADS:
        raise ConfigError("model", name, f"unknown model size; choose one of {', '.join(WORKLOADS)}")
    return replace(base, **WORKLOADS[name])


def resolve_device(requested: str, cuda_available: bool) -> str:
    return ("cuda" if cuda_available else "cpu") if requested == "auto" else requested


def field_errors(cfg: BenchConfig, families: tuple[str, ...]) -> list[ConfigError]:
    """The rules each field breaks alone: integers, the family's and the device's name."""
    errors: list[ConfigError] = []
    for name in INT_FIELDS:
        value = getattr(cfg, name)
        if isinstance(value, bool) or not isinstance(value, int):
            errors.append(ConfigError(name, value, "must be an integer"))
        elif value < FIELD_MINIMUM[name]:
            errors.append(ConfigError(name, value, "must be >= 0" if FIELD_MINIMUM[name] == 0
                                      else "must be a positive integer"))
    if cfg.family not in families:
        errors.append(ConfigError("family", cfg.family, f"must be one of {', '.join(families)}"))
    if cfg.device not in DEVICES:
        errors.append(ConfigError("device", cfg.device, f"must be one of {', '.join(DEVICES)}"))
    return errors


def limit_errors(cfg: BenchConfig, limits: Limits,
                 shape_rules: Callable[[BenchConfig], list[ConfigError]]) -> list[ConfigError]:
    """The caps a valid config's fields break; `shape_rules` are the model family's own (run once heads divide
    width)."""
    errors: list[ConfigError] = []
    caps = {"depth": limits.max_depth, "width": limits.max_width, "heads": limits.max_heads,
            "seq_len": limits.max_seq_len, "batch_size": limits.max_batch_size,
            "vocab_size": limits.max_vocab_size, "warmup": limits.max_warmup, "iters": limits.max_iters,
            "repeats": limits.max_repeats}
    for name, cap in caps.items():
        value = getattr(cfg, name)
        if value > cap:
            errors.append(ConfigError(name, value, f"exceeds the limit of {cap}"))
    if cfg.heads > cfg.width:
        errors.append(ConfigError("heads", cfg.heads, f"must not exceed width ({cfg.width})"))
    elif cfg.width % cfg.heads:
        errors.append(ConfigError("width", cfg.width, f"must be divisible by heads ({cfg.heads})"))
    else:
        errors += shape_rules(cfg)
    if cfg.tokens_per_step > limits.max_tokens_per_step:
        errors.append(ConfigError("batch_size", cfg.batch_size,
                                  f"seq_len x batch_size = {cfg.tokens_per_step} exceeds the limit of "
                                  f"{limits.max_tokens_per_step}"))
    return errors
