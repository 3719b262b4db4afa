"""A recommendation on the shared server, as sweeps run (service.sweeps): one at a time, on the job manager's device
lock (never beside a stage run, a sweep or the components view), in a background thread; live progress with its
ETA as typed snapshots; cancel keeps what was measured (the answer is built from it); the answer and the run of
the stages measured at its batch size are saved to the history. Operators start and cancel; everyone sees it."""
from __future__ import annotations

import argparse
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace

from bench_core.config.bench_config import BenchConfig
from bench_core.config.settings import Limits, allowed_model_dirs
from bench_core.machine.probe import Probe
from bench_core.recommend.answer import Recommendation
from bench_core.recommend.history import RecommendationStore
from bench_core.recommend.planner import Measure, Measurement, Progress
from bench_core.recommend.search import Ask
from bench_core.recommend.space import Candidate
from bench_core.results.records import Status
from bench_core.run.runner import RunHooks
from bench_core.service.access import OPERATOR
from bench_core.service.jobs import JobManager, LimitExceeded, NotAllowed, check_import, cpu_threads_for_server
from bench_core.service.sources import server_source_errors


@dataclass(frozen=True)
class RecommendRequest:
    """The page's fields as typed (strings, as the CLI's flags take them), for a model already built."""
    cfg: BenchConfig
    batch_size: str = ""          # "": the model's; N; or A:B
    hold_tokens: bool = False
    memory: str = ""              # GiB; "": the free memory less its margin
    from_key: str = ""            # "": the device's baseline
    budget: str = "10m"
    tokens: str = ""
    gpu_price: str = ""
    exclude: str = ""

    def args(self) -> argparse.Namespace:
        """As `python -m bench_core recommend` parses its flags: one set of checks for the CLI and the page."""
        from bench_core.recommend.cli import parser
        argv = ["--budget", self.budget.strip()] + (["--hold-tokens"] if self.hold_tokens else [])
        for flag, raw in (("--batch-size", self.batch_size), ("--memory", self.memory), ("--from", self.from_key),
                          ("--tokens", self.tokens), ("--gpu-price", self.gpu_price), ("--exclude", self.exclude)):
            if raw.strip():
                argv += [flag, raw.strip()]
        return parser().parse_args(argv)


@dataclass(frozen=True)
class RecommendJob:
    """One recommendation as the page sees it: what is being measured, how far it has come, and its answer."""
    job_id: str
    status: Status                 # running, done, cancelled, failed
    candidates: int
    started_at: float
    progress: Progress | None = None
    recommendation: Recommendation | None = None
    error: str | None = None

    @property
    def active(self) -> bool:
        return self.status is Status.RUNNING

    @property
    def eta_s(self) -> float | None:
        return self.progress.eta_s if self.active and self.progress is not None else None


MeasureFactory = Callable[[Ask, Probe, RunHooks], Measure]


def engine_factory(ask: Ask, probe: Probe, hooks: RunHooks) -> Measure:
    from bench_core.recommend.measure import engine_measure
    return engine_measure(ask.cfg, probe, hooks.timeout_s, hooks)


def cancellable(measure: Measure, cancel: threading.Event) -> Measure:
    """After a cancel: the planner's next launch stops the search (it keeps what was measured), and a later one
    (--from's top-up) measures nothing more, so the answer is built from what ran."""
    told = threading.Event()

    def call(candidate: Candidate, processes: int) -> Measurement:
        if cancel.is_set():
            if not told.is_set():
                told.set()
                raise KeyboardInterrupt
            return Measurement(failed="cancelled before it ran")
        return measure(candidate, processes)
    return call


class RecommendService:
    def __init__(self, manager: JobManager, store: RecommendationStore | None, limits: Limits,
                 measure_factory: MeasureFactory = engine_factory):
        self.manager, self.store, self.limits = manager, store, limits
        self._factory = measure_factory   # tests may pass synthetic timings; the page uses the engine's
        self._lock = threading.Lock()
        self._current: RecommendJob | None = None
        self._cancel = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def current(self) -> RecommendJob | None:
        with self._lock:
            return self._current

    def check(self, request: RecommendRequest) -> Ask:
        """The request checked (ConfigError names the field and its limit); nothing starts."""
        from bench_core.recommend.cli import ask_for, checked_flags
        probe = self.manager.probe(timeout=30)
        if probe is None:
            raise LimitExceeded("probe", "the machine is still being probed: try again in a moment")
        for error in server_source_errors(request.cfg, allowed_model_dirs()):
            raise error
        args = request.args()
        return ask_for(request.cfg, args, probe, checked_flags(args))

    def start(self, request: RecommendRequest, role: str) -> str:
        """Checks the request, takes the device, starts; the job's id."""
        if role != OPERATOR:
            raise NotAllowed("only an operator may start a recommendation")
        if self.running:
            raise LimitExceeded("recommendation", "a recommendation is running: cancel it or wait for it to end")
        ask = self.check(request)
        probe = self.manager.probe(timeout=0) or Probe.from_dict({})
        if not self.manager.device.acquire(timeout=1):
            raise LimitExceeded("device", "a run is using the device: start the recommendation when it is over")
        self._cancel = threading.Event()
        job = RecommendJob(uuid.uuid4().hex[:12], Status.RUNNING, len(ask.space.candidates), time.time())
        self._publish(job)
        hooks = RunHooks(cancel=self._cancel, worker_env=self.manager.env, timeout_s=self.limits.stage_timeout_s,
                         worker_threads=cpu_threads_for_server() if ask.device == "cpu" else None)
        self._thread = threading.Thread(target=self._work, args=(job, ask, probe, hooks), name="bench-recommend",
                                        daemon=True)
        self._thread.start()
        return job.job_id

    def _work(self, job: RecommendJob, ask: Ask, probe: Probe, hooks: RunHooks) -> None:
        from bench_core.recommend.predict import EstimatePredictor
        from bench_core.recommend.search import recommend
        try:
            measure = cancellable(self._factory(ask, probe, hooks), self._cancel)
            rec, run = recommend(ask, EstimatePredictor(ask.cfg, probe, ask.device), measure,
                                 lambda p: self._publish(replace(self.current() or job, progress=p)))
            rec = replace(rec, recommendation_id=job.job_id)
            if self.store is not None:
                if run is not None and self.manager.store is not None:
                    self.manager.store.save_run(run)
                self.store.save(rec)
            status = Status.CANCELLED if self._cancel.is_set() else Status.DONE
            self._publish(replace(self.current() or job, status=status, recommendation=rec))
        except Exception as exc:   # shown on the page
            self._publish(replace(self.current() or job, status=Status.FAILED, error=f"{type(exc).__name__}: {exc}"))
        finally:
            self.manager.device.release()

    def cancel(self, role: str) -> None:
        if role != OPERATOR:
            raise NotAllowed("only an operator may cancel")
        self._cancel.set()

    def wait(self, timeout: float | None = None) -> RecommendJob | None:
        if self._thread is not None:
            self._thread.join(timeout)
        return self.current()

    def import_recommendation(self, data: bytes, role: str) -> tuple[str, str]:
        """A recommendation's JSON into the history: the id it is stored under, and the message naming it."""
        store = check_import(role, self.store, data, self.limits)
        rid, renamed = store.import_json(data)
        return rid, f"Imported recommendation {rid}" + (" (its id was already here)" if renamed else "") + "."

    def _publish(self, job: RecommendJob) -> None:
        with self._lock:
            self._current = job
