"""The check set: a declared list of stages measured end to end once, by the same engine as the search, beside the
recommendation and the predictor's next best, so the recommendation can be judged against the best of the set
(benchmarks/recommend_check.py). A member the search already measured with enough processes is read, not run
again; CHECK_PROCESSES is the fewest that give an interval across processes."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from bench_core.config.bench_config import BenchConfig, ConfigError
from bench_core.levers.stage import Stage
from bench_core.machine.probe import Probe
from bench_core.measure.metrics import rates
from bench_core.measure.stats import time_interval
from bench_core.recommend.planner import Measure, Measurement, Searched
from bench_core.recommend.predict import at_batch
from bench_core.recommend.space import Candidate

CHECK_PROCESSES = 2
DECLARED, RECOMMENDED, NEXT_BEST = "declared", "recommended", "the predictor's next best"


@dataclass(frozen=True)
class Checked:
    key: str
    stage: str
    batch_size: int
    roles: tuple[str, ...]
    processes: int
    verified: bool
    us_per_token: float | None          # the median across processes
    us_per_token_low: float | None      # its interval (across processes from two on)
    us_per_token_high: float | None
    tokens_per_s: float | None
    mfu: float | None
    failed: str = ""

    @classmethod
    def from_dict(cls, data: dict) -> Checked:
        return cls(**{**data, "roles": tuple(data["roles"])})


def parse_check_set(raw: str, family: str, probe: Probe, device: str) -> tuple[Stage, ...]:
    """Comma-separated stage keys, each in the family's form, each runnable here; else exit 2 naming the key."""
    stages = []
    for key in (k.strip() for k in raw.split(",") if k.strip()):
        try:
            stage = Stage.from_key(key)
        except ConfigError as exc:
            raise ConfigError("check_set", key, exc.limit) from None
        own = stage.for_family(family)
        if own is None:
            raise ConfigError("check_set", key, f"cannot train a {family} model")
        why = own.unavailable_reason(probe, device)
        if why:
            raise ConfigError("check_set", key, f"cannot run here: {why}")
        stages.append(own)
    if not stages:
        raise ConfigError("check_set", raw, "name at least one stage key")
    return tuple(dict.fromkeys(stages))


def checked(c: Candidate, roles: tuple[str, ...], m: Measurement, cfg: BenchConfig, gpu: str | None) -> Checked:
    tokens = cfg.seq_len * c.batch_size
    if not m.rounds_ms:
        return Checked(c.key, c.stage.key, c.batch_size, roles, 0, False, None, None, None, None, None,
                       m.failed or "no timed steps")
    low, point, high = time_interval([list(r) for r in m.rounds_ms])
    r = rates(at_batch(cfg, c.batch_size), point, gpu, c.stage.precision_lever.peak)
    return Checked(c.key, c.stage.key, c.batch_size, roles, m.processes, m.verified, point / tokens * 1e3,
                   low / tokens * 1e3, high / tokens * 1e3, r.tokens_per_s, r.mfu, m.failed)


def measure_check_set(members: Sequence[tuple[Candidate, str]], states: dict[Candidate, Searched],
                      measure: Measure, cfg: BenchConfig, gpu: str | None,
                      say: Callable[[str], None] = lambda _: None) -> tuple[Checked, ...]:
    """Each member at CHECK_PROCESSES processes (topped up from what the search measured), in order given."""
    roles: dict[Candidate, tuple[str, ...]] = {}
    for c, role in members:
        roles[c] = roles.get(c, ()) + (role,)
    out = []
    for c, these in roles.items():
        had = states[c].measurement if c in states else None
        have = had.processes if had else 0
        m = had
        if have < CHECK_PROCESSES:
            say(f"check set: {c.key} ({', '.join(these)}): {CHECK_PROCESSES - have} process(es)")
            more = measure(c, CHECK_PROCESSES - have)
            m = had.merged(more) if had else more
        out.append(checked(c, these, m or Measurement(failed="not measured"), cfg, gpu))
    return tuple(out)


def to_dicts(rows: Sequence[Checked]) -> list[dict]:
    return [asdict(r) for r in rows]
