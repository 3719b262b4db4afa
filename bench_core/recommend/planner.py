"""Which candidates to measure end to end, with how many processes, and when to stop. Successive halving over
processes: every candidate that fits and could still win runs in one fresh process, best predicted first; from two
processes on, those whose interval across processes separates from the leader's are dropped (one process's steps
say nothing of the next process: stats.speedup_interval), the better half of the rest run again with twice the
processes, and so on. It stops when the leader's interval separates from every remaining candidate's bound, when
the process cap is reached (the rest then tie with it: "either"), when the budget would be overrun by the next
launch, or on Ctrl-C; what was measured is kept in every case. Under a budget, once two candidates are measured, a
new candidate's first process starts only if the time for the confirming processes (prune.CONFIRM_PROCESSES, at
the seconds a process has taken) is left after it.

Times are compared per token (step time over tokens per step), so candidates at different batch sizes are compared
on the work they do; at one batch size that is the step time's own ratio. A measurement is injected
(`measure(candidate, processes)`): the engine's worker processes (recommend.measure), or synthetic timings in tests.
"""
from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from bench_core.measure.stats import IntervalScope, SpeedupInterval, speedup_interval, time_interval
from bench_core.recommend.memory import Fit
from bench_core.recommend.predict import Predicted
from bench_core.recommend.prune import (
    CONFIRM_PROCESSES,
    Cap,
    Contender,
    affordable,
    best_bound,
    beyond_cap,
    predicted_slower,
)
from bench_core.recommend.space import Candidate

MAX_PROCESSES = 8   # a candidate's processes at most: past 8 the t-interval narrows slowly (t(7) = 2.36 vs 1.96)
# A budgeted search keeps back prune.CONFIRM_PROCESSES, at the seconds a process has actually taken, from new
# candidates' first processes once two are measured: the cap plans them at predicted costs, and when processes run
# longer than predicted the first processes would otherwise fill the budget, leaving the leader measured once.
KEPT_FOR_CONFIRMING = ("not measured: the budget's last processes were kept to confirm the leader and the runner-up "
                       "in a second process each")


@dataclass(frozen=True)
class Measurement:
    """A candidate run end to end: each process's timed steps (ms), whether its kernels verified, its peak and
    energy; `failed` says why a run gave no figure."""
    rounds_ms: tuple[tuple[float, ...], ...] = ()
    verified: bool = False
    verdict: str | None = None
    peak_mib: float | None = None
    energy_j_per_token: float | None = None
    failed: str = ""
    seconds: float = 0.0
    results: tuple[Any, ...] = field(default=(), compare=False, repr=False)   # the engine's StageResults

    @property
    def processes(self) -> int:
        return len(self.rounds_ms)

    def merged(self, more: Measurement) -> Measurement:
        return Measurement(self.rounds_ms + more.rounds_ms, self.verified and more.verified,
                           more.verdict if more.verdict != "verified" else self.verdict,
                           max((p for p in (self.peak_mib, more.peak_mib) if p is not None), default=None),
                           more.energy_j_per_token or self.energy_j_per_token, more.failed,
                           self.seconds + more.seconds, self.results + more.results)


Measure = Callable[[Candidate, int], Measurement]


class Label(StrEnum):
    MEASURED = "measured"
    PREDICTED = "predicted"
    UNVERIFIED = "measured, kernels not verified: never recommended"
    FAILED = "measured, no figure"
    DOES_NOT_FIT = "does not fit the memory budget"


@dataclass(frozen=True)
class Searched:
    """One candidate as the search left it."""
    candidate: Candidate
    predicted: Predicted
    fit: Fit
    tokens: int                # per step: the batch size times the sequence length
    measurement: Measurement | None = None
    dropped: str = ""          # why it left the race; "" while still in it (or the leader)

    @property
    def label(self) -> Label:
        m = self.measurement
        if not self.fit.fits:
            return Label.DOES_NOT_FIT
        if m is None or not m.rounds_ms:
            return Label.FAILED if m is not None else Label.PREDICTED
        return Label.MEASURED if m.verified else Label.UNVERIFIED

    def per_token_rounds(self) -> list[list[float]]:
        return [[t / self.tokens for t in r] for r in self.measurement.rounds_ms] if self.measurement else []


class Stop(StrEnum):
    SEPARATED = "the leader's interval separated from every other candidate's"
    PROCESS_CAP = "the candidates left reached the process cap without separating"
    ALONE = "one candidate only was measured (the budget's cap or the predictions left no other): it was compared " \
            "with none"
    BUDGET = "the budget would have been overrun by the next launch"
    CANCELLED = "cancelled: what was measured is kept"
    NOTHING = "no candidate could be measured"


@dataclass(frozen=True)
class Progress:
    text: str
    measured_processes: int
    eta_s: float | None


def versus(leader: Searched, other: Searched) -> SpeedupInterval | None:
    """The leader's speedup over the other, per token, with its interval across processes."""
    return speedup_interval(other.per_token_rounds(), leader.per_token_rounds())


@dataclass
class Planner:
    measure: Measure
    budget_s: float | None
    max_processes: int = MAX_PROCESSES
    on_progress: Callable[[Progress], None] | None = None
    clock: Callable[[], float] = time.monotonic
    # one process's seconds for a candidate (prune.process_seconds), for the cap; None: no cap
    process_cost: Callable[[Candidate], float | None] | None = None
    stop: Stop | None = None
    cap: Cap | None = None
    states: dict[Candidate, Searched] = field(default_factory=dict)
    held: set[Candidate] = field(default_factory=set)   # not measured by the pruning rule, until the bound moves
    passed: set[Candidate] = field(default_factory=set)  # beyond the cap, until it is drawn again (_recapped)

    def run(self, searched: list[Searched]) -> list[Searched]:
        self.states = {s.candidate: s for s in searched}
        started = self.clock()
        live = sorted((s for s in searched if s.fit.fits), key=lambda s: s.predicted.per_token(s.tokens)[1])
        live = self._capped(self._prune(live))
        n = 1
        while self.stop is None:
            for s in list(live):
                if not self._top_up(s.candidate, n, started, len(live)):
                    break
                if n == 1:
                    live += self._recapped(live, started)
            live = self._prune([self.states[s.candidate] for s in live if not self.states[s.candidate].dropped])
            if self.stop is None and any(s.measurement is None for s in live):
                continue   # a contender left the race: the candidates it held back run first, at these processes
            measured = [s for s in live if s.measurement and s.measurement.rounds_ms]
            if not measured:
                self.stop = self.stop or Stop.NOTHING
                break
            live = self._separate(live, min(measured, key=lambda s: time_interval(s.per_token_rounds())[1]), n)
            if self.stop is not None:
                break
            if len(live) == 1:
                self.stop = Stop.SEPARATED if self._compared() else Stop.ALONE
            elif n >= self.max_processes:
                self.stop = Stop.PROCESS_CAP
            else:
                live = self._halve(live, n)
                n = min(n * 2, self.max_processes)
        return list(self.states.values())

    def _prune(self, live: list[Searched]) -> list[Searched]:
        """The rule (recommend.prune) over the candidates not measured yet, against the best bound of those that
        can still win; held ones come back where the bound has moved above their fastest."""
        best = best_bound([Contender(s.candidate, s.predicted, s.tokens) for s in live])
        out = []
        for s in live + [self.states[c] for c in sorted(self.held, key=lambda c: c.key)]:
            why = None if s.measurement else predicted_slower(Contender(s.candidate, s.predicted, s.tokens), best)
            if why:
                self.held.add(s.candidate)
                self._drop(s, why)
            else:
                self.held.discard(s.candidate)
                self.states[s.candidate] = replace(self.states[s.candidate], dropped="")
                out.append(self.states[s.candidate])
        return out

    def _capped(self, live: list[Searched]) -> list[Searched]:
        if self.process_cost is None:
            return live
        self.cap = affordable([s.candidate for s in live], self.process_cost, self.budget_s)
        if self.cap.chosen is None:
            return live
        for s in live:
            if s.candidate not in self.cap.chosen:
                self._drop(s, beyond_cap(self.cap))
                self.passed.add(s.candidate)
        return [s for s in live if s.candidate in self.cap.chosen]

    def _recapped(self, live: list[Searched], started: float) -> list[Searched]:
        """The cap drawn again after a first process, over the candidates not yet measured (those it took first,
        then those it passed over, best predicted first) with the budget left, each cost corrected by what its class
        of process (compiling or not) has taken against its prediction. Those passed over that now fit come back:
        an assumed compile cost far above the real one would otherwise keep every compiled candidate but the first
        out of the race."""
        if not self.passed or self.process_cost is None or self.budget_s is None:
            return []
        now = [self.states[s.candidate] for s in live]   # `live` holds the states as the round began
        pending = [s for s in now if s.measurement is None and not s.dropped]
        passed = sorted((self.states[c] for c in self.passed), key=lambda s: s.predicted.per_token(s.tokens)[1])
        cap = affordable([s.candidate for s in pending + passed], self._corrected_cost,
                         self.budget_s - (self.clock() - started), at_least_one=False)
        back = [s for s in passed if cap.chosen is not None and s.candidate in cap.chosen]
        for s in back:
            self.passed.discard(s.candidate)
            self.states[s.candidate] = replace(self.states[s.candidate], dropped="")
        if back:
            self.cap = Cap(cap.chosen, f"{cap.why}, drawn again at the seconds processes have taken")
        return [self.states[s.candidate] for s in back]

    def _corrected_cost(self, c: Candidate) -> float | None:
        """The predicted process cost times the median measured-over-predicted ratio of the measured candidates of
        its class (compiling or not); as predicted while its class has none measured."""
        if self.process_cost is None:
            return None
        cost = self.process_cost(c)
        ratios = []
        for s in self.states.values():
            m, predicted = s.measurement, self.process_cost(s.candidate)
            same_class = s.candidate.stage.compile_lever.traces_model == c.stage.compile_lever.traces_model
            if same_class and m and m.processes and m.seconds and predicted:
                ratios.append(m.seconds / m.processes / predicted)
        return cost * statistics.median(ratios) if cost is not None and ratios else cost

    def _compared(self) -> bool:
        """Whether any other candidate was measured: a leader alone has separated from nothing."""
        return self._measured() > 1

    def _measured(self) -> int:
        return sum(1 for s in self.states.values() if s.measurement and s.measurement.rounds_ms)

    def _drop(self, s: Searched, why: str) -> None:
        self.states[s.candidate] = replace(self.states[s.candidate], dropped=why)

    def _top_up(self, c: Candidate, n: int, started: float, live: int) -> bool:
        """Measure `c` up to `n` processes; False when the search must stop (budget, Ctrl-C)."""
        s = self.states[c]
        have = s.measurement.processes if s.measurement else 0
        if have >= n:
            return True
        per_process = self._seconds_per_process()
        elapsed = self.clock() - started
        if self.budget_s is not None and per_process is not None and elapsed + per_process * (n - have) > self.budget_s:
            self.stop = Stop.BUDGET
            return False
        if self.budget_s is not None and per_process is not None and have == 0 and self._measured() >= 2 and \
                elapsed + per_process * (1 + CONFIRM_PROCESSES) > self.budget_s:
            self._drop(s, KEPT_FOR_CONFIRMING)
            return True
        self._say(f"{c.key}: {n - have} process(es)", per_process, live * n, started)
        try:
            m = self.measure(c, n - have)
        except KeyboardInterrupt:
            self.stop = Stop.CANCELLED
            return False
        m = s.measurement.merged(m) if s.measurement else m
        s = replace(s, measurement=m)
        self.states[c] = s
        if not m.rounds_ms or m.failed:
            self._drop(s, m.failed or "its run gave no timed steps")
        elif not m.verified:
            self._drop(s, f"its kernels did not verify ({m.verdict or 'no verdict'})")
        return True

    def _separate(self, live: list[Searched], leader: Searched, n: int) -> list[Searched]:
        _, _, leader_high = time_interval(leader.per_token_rounds())
        for s in live:
            if s is leader:
                continue
            if s.measurement and s.measurement.rounds_ms:
                interval = versus(leader, s)
                if interval is not None and interval.scope is IntervalScope.ACROSS_PROCESSES and interval.low > 1.0:
                    self._drop(s, f"separated from {leader.candidate.key} at {n} process(es): the leader is "
                                  f"x{interval.low:.2f}-x{interval.high:.2f} faster per token")
            elif s.predicted.per_token(s.tokens)[0] > leader_high:
                self._drop(s, f"predicted no faster than {leader.candidate.key}'s measured bound")
        return [self.states[s.candidate] for s in live if not self.states[s.candidate].dropped]

    def _halve(self, live: list[Searched], n: int) -> list[Searched]:
        if len(live) <= 2:
            return live
        ranked = sorted(live, key=lambda s: time_interval(s.per_token_rounds())[1])
        keep = math.ceil(len(ranked) / 2)
        for s in ranked[keep:]:
            self._drop(s, f"halved at {n} process(es): not separated from the leader, behind the better half")
        return ranked[:keep]

    def _seconds_per_process(self) -> float | None:
        done = [s.measurement for s in self.states.values() if s.measurement and s.measurement.processes]
        processes = sum(m.processes for m in done)
        return sum(m.seconds for m in done) / processes if processes else None

    def _say(self, text: str, per_process: float | None, planned: int, started: float) -> None:
        if self.on_progress is None:
            return
        done = sum(s.measurement.processes for s in self.states.values() if s.measurement)
        eta = per_process * max(planned - done, 0) if per_process is not None else None
        if eta is not None and self.budget_s is not None:
            eta = min(eta, max(self.budget_s - (self.clock() - started), 0.0))
        self.on_progress(Progress(text, done, eta))
