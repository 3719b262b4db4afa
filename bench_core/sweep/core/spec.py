"""What a sweep asks for: the comparison (stage A against stage B), the axes and their values, the time budget;
and the grid of points it spans, each a BenchConfig that keeps the family's rules (heads follow the width at the
base head size, the MLP width is the family's own, and every point passes the family's validation).

Torch-free: the CLI and the page check a sweep with it before anything starts.
"""
from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, fields, replace

from bench_core.config.bench_config import BenchConfig, ConfigError
from bench_core.config.settings import Limits
from bench_core.levers.registry import BASELINE_LEVERS, LEVERS
from bench_core.levers.stage import Stage
from bench_core.machine.probe import Probe
from bench_core.models.families import collect_errors

# The shape fields a sweep may vary; heads and the MLP width follow them by the family's rules.
AXES = ("width", "depth", "batch_size", "seq_len", "vocab_size")
MAX_AXES = 2
# A single lever's comparison is made in this context, each part in the family's own type: native BF16 eager.
LEVER_CONTEXT = Stage("adam-fused", "layernorm", "bf16")


@dataclass(frozen=True)
class Axis:
    name: str
    values: tuple[int, ...]

    def to_dict(self) -> dict:
        return {"name": self.name, "values": list(self.values)}

    @classmethod
    def from_dict(cls, data: dict) -> Axis:
        return cls(str(data["name"]), tuple(int(v) for v in data["values"]))


@dataclass(frozen=True)
class Comparison:
    """Stage B's speedup over stage A (A is the reference), as `--compare` named it."""
    a: Stage
    b: Stage
    text: str

    @property
    def title(self) -> str:
        return f"{self.b.label} vs {self.a.label}"

    @property
    def change(self) -> str:
        """What B changes from A, B's levers where the two differ ("apex-fusedadam+apex-fusedln"): the comparison's
        short name, which a phone's picker still shows whole (two stage keys ran past it)."""
        return "+".join(b.name for a, b in zip(self.a.levers, self.b.levers, strict=True) if a.name != b.name) \
            or self.b.key

    def in_family(self, family: str) -> tuple[Stage, Stage]:
        """A and B as the family's model builds them and the timing process timed them: a key leaves out the
        family's own parts (llama's SwiGLU is plain)."""
        return self.a.for_family(family) or self.a, self.b.for_family(family) or self.b


@dataclass(frozen=True)
class SweepSpec:
    comparison: Comparison
    base: BenchConfig               # every field a point does not vary (its run settings too)
    axes: tuple[Axis, ...]
    budget_s: float | None          # None: measure every point end to end
    breakdown: bool = False         # also time each part of a block alone (sweep.timing.variants.breakdown_parts)

    def to_dict(self) -> dict:
        return {"compare": self.comparison.text, "a": self.comparison.a.key, "b": self.comparison.b.key,
                "base": self.base.to_dict(), "axes": [a.to_dict() for a in self.axes], "budget_s": self.budget_s,
                "breakdown": self.breakdown}

    @classmethod
    def from_dict(cls, data: dict) -> SweepSpec:
        comparison = Comparison(Stage.from_key(data["a"]), Stage.from_key(data["b"]), str(data["compare"]))
        return cls(comparison, BenchConfig.from_dict(data["base"]),
                   tuple(Axis.from_dict(a) for a in data["axes"]), data.get("budget_s"), bool(data.get("breakdown")))


@dataclass(frozen=True)
class SweepPoint:
    index: int
    values: tuple[tuple[str, int], ...]   # (axis, value), in the spec's axis order
    config: BenchConfig

    def value(self, axis: str) -> int:
        return dict(self.values)[axis]

    @property
    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.values)


def sweepable_levers() -> list[str]:
    """The levers a sweep compares with the lever each replaces: not a kind's baseline, not a GPU count."""
    return [n for n, lv in LEVERS.items() if n != BASELINE_LEVERS[lv.kind] and lv.kind != "gpus"]


def parse_comparison(text: str, family: str, pair: bool = False) -> Comparison:
    """`LEVER` (the lever against the lever it replaces, in native BF16 eager) or `KEY_A,KEY_B` (two stage keys);
    `pair`: two stage keys are asked for (the page's "two stage keys"), so one is not read as a lever's name."""
    raw = (text or "").strip()
    if not raw:
        raise ConfigError("compare", text, "name a lever (e.g. fp8-torchao) or two stage keys KEY_A,KEY_B")
    if pair and "," not in raw:
        raise ConfigError("compare", text, "give two stage keys, KEY_A,KEY_B (B's speedup over A)")
    if "," in raw:
        keys = [k.strip() for k in raw.split(",")]
        if len(keys) != 2 or not all(keys):
            raise ConfigError("compare", text, "give exactly two stage keys, KEY_A,KEY_B (B's speedup over A)")
        a, b = Stage.from_key(keys[0]), Stage.from_key(keys[1])
    else:
        lever = LEVERS.get(raw)
        if lever is None:
            raise ConfigError("compare", text, f"unknown lever; choose one of {', '.join(sweepable_levers())}")
        reference = lever.native or BASELINE_LEVERS[lever.kind]
        if reference == lever.name:
            raise ConfigError("compare", text, f"{raw} is the {lever.kind} baseline: name the lever to compare with "
                              "it, or two stage keys KEY_A,KEY_B")
        a = LEVER_CONTEXT.replace(**{lever.kind: reference})
        b = LEVER_CONTEXT.replace(**{lever.kind: lever.name})
    if a.world_size != 1 or b.world_size != 1:
        raise ConfigError("compare", text, "a sweep compares one-GPU stages (its prediction times one GPU's kernels)")
    a_f, b_f = a.for_family(family), b.for_family(family)
    if a_f is None or b_f is None:
        raise ConfigError("compare", text, f"a stage of this comparison has no form for the {family} family")
    if a_f == b_f:
        # a lever the family replaces by its own kind (rmsnorm in GPT, whose stages keep LayerNorm)
        raise ConfigError("compare", text, f"in the {family} family both stages are {a_f.key}" if a_f != a or b_f != b
                          else "the two stages are the same")
    return Comparison(a_f, b_f, raw)


def _values(name: str, raw: str) -> tuple[int, ...]:
    """`256,512,1024`, or a range `START:STOP:xFACTOR` (geometric) / `START:STOP:+STEP` (linear), STOP included."""
    flag = f"axis {name}"
    range_ = re.fullmatch(r"(\d+):(\d+):([x+])(\d+)", raw.replace(" ", ""))
    if range_:
        start, stop, op, step = int(range_[1]), int(range_[2]), range_[3], int(range_[4])
        if start < 1 or stop < start or step < (2 if op == "x" else 1):
            raise ConfigError(flag, raw, "a range is START:STOP:xFACTOR or START:STOP:+STEP with 1 <= START <= STOP"
                              ", FACTOR >= 2, STEP >= 1")
        out, v = [], start
        while v <= stop:
            out.append(v)
            v = v * step if op == "x" else v + step
        return tuple(out)
    items = [s.strip() for s in raw.split(",") if s.strip()]
    if not items:
        raise ConfigError(flag, raw, "give at least one value (e.g. width=256,512,1024 or width=256:4096:x2)")
    try:
        values = tuple(int(s) for s in items)
    except ValueError:
        raise ConfigError(flag, raw, "values must be positive integers, comma separated, or a range "
                          "START:STOP:xFACTOR") from None
    if any(v < 1 for v in values):
        raise ConfigError(flag, raw, "values must be positive integers")
    if len(set(values)) != len(values):
        raise ConfigError(flag, raw, "a value is given twice")
    return tuple(sorted(values))


def parse_axis(text: str) -> Axis:
    """`NAME=VALUES` (see `_values`)."""
    name, sep, raw = (text or "").partition("=")
    name = name.strip()
    if not sep:
        raise ConfigError("axis", text, "write NAME=VALUES, e.g. width=256,512,1024")
    if name not in AXES:
        raise ConfigError("axis", name, f"unknown axis; choose one of {', '.join(AXES)}")
    return Axis(name, _values(name, raw))


def parse_axes(texts: list[str] | tuple[str, ...]) -> tuple[Axis, ...]:
    if not texts:
        raise ConfigError("axis", None, "name one or two axes, e.g. --axis width=256,512,1024")
    if len(texts) > MAX_AXES:
        raise ConfigError("axis", len(texts), f"at most {MAX_AXES} axes (a line or a heatmap)")
    axes = tuple(parse_axis(t) for t in texts)
    if len({a.name for a in axes}) != len(axes):
        raise ConfigError("axis", axes[-1].name, "the same axis is named twice")
    return axes


def parse_budget(text: str | None) -> float | None:
    """`10m`, `90s`, `1h`, `1h30m` or plain seconds; None or empty: no budget."""
    if text is None or not str(text).strip():
        return None
    raw = str(text).strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", raw):
        seconds = float(raw)
    else:
        parts = re.findall(r"(\d+(?:\.\d+)?)([hms])", raw)
        if not parts or "".join(n + u for n, u in parts) != raw:
            raise ConfigError("budget", text, "write a duration: 10m, 90s, 1h30m or seconds")
        seconds = sum(float(n) * {"h": 3600, "m": 60, "s": 1}[u] for n, u in parts)
    if seconds <= 0:
        raise ConfigError("budget", text, "must be longer than zero")
    return seconds


def head_size(base: BenchConfig) -> int:
    return base.width // base.heads


def point_config(base: BenchConfig, values: dict[str, int]) -> BenchConfig:
    """The base config at these axis values; heads follow the width at the base's head size (at least one head)."""
    cfg = BenchConfig.from_dict({**base.to_dict(), **values})
    if "width" in values:
        cfg = replace(cfg, heads=max(1, cfg.width // head_size(base)))
    return cfg


def grid(spec_axes: tuple[Axis, ...], base: BenchConfig) -> list[SweepPoint]:
    """Every combination of the axes' values, the first axis varying fastest."""
    combos = itertools.product(*(a.values for a in reversed(spec_axes)))
    points = []
    for i, combo in enumerate(combos):
        values = tuple(zip((a.name for a in spec_axes), reversed(combo), strict=True))
        points.append(SweepPoint(i, values, point_config(base, dict(values))))
    return points


def check_runnable(comparison: Comparison, probe: Probe, device: str) -> None:
    """Both stages must run on this machine (a lever's package, its GPU): otherwise no point has a figure."""
    for stage in (comparison.a, comparison.b):
        reason = stage.unavailable_reason(probe, device)
        if reason:
            raise ConfigError("compare", comparison.text, f"{stage.key} cannot run here: {reason}")


# How a run is run, not its shape (processes a stage, steps, seed): a sweep's points share them
RUN_FIELDS = frozenset(f.name for f in fields(BenchConfig) if f.metadata.get("group") == "run")


def check(spec: SweepSpec, limits: Limits, cuda_available: bool,
          free_bytes: dict[str, int | None]) -> list[SweepPoint]:
    """The grid, or the first ConfigError: too many points, or a point that breaks a family or size rule (named
    by its axis values)."""
    points = grid(spec.axes, spec.base)
    if len(points) > limits.max_sweep_points:
        raise ConfigError("axis", len(points), f"{len(points)} points exceed the limit of {limits.max_sweep_points} "
                          "points per sweep (BENCH_MAX_SWEEP_POINTS)")
    for point in points:
        width = dict(point.values).get("width")
        if width is not None and width % head_size(spec.base) and width > head_size(spec.base):
            # heads follow the width, so "divisible by heads" named a field the sweep's user never set
            raise ConfigError("axis width", width, f"must be a multiple of the head size {head_size(spec.base)} "
                              f"(the base shape's width {spec.base.width} / heads {spec.base.heads}: heads follow "
                              "the width)")
        errors = collect_errors(point.config, limits, cuda_available, free_bytes)
        if errors:
            e = errors[0]
            if e.field in RUN_FIELDS:   # the same at every point, set beside the axes: named as itself
                raise e
            raise ConfigError(f"axis ({point.label})", e.value, f"{e.field}: {e.limit}")
    return points



