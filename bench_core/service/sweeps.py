"""A sweep on the shared server: one at a time, on the job manager's device lock (never beside a stage run or the
components view), in a background thread; every change saved to the history's sweeps; cancel keeps what finished.
Operators start and cancel; everyone sees it."""
from __future__ import annotations

import threading
from dataclasses import replace

from bench_core.config.bench_config import resolve_device
from bench_core.config.settings import Limits
from bench_core.results.records import Status
from bench_core.service.access import OPERATOR
from bench_core.service.jobs import JobManager, LimitExceeded, NotAllowed, check_import
from bench_core.sweep.core.history import SweepStore
from bench_core.sweep.core.records import SweepResult
from bench_core.sweep.core.runner import SweepHooks, new_sweep, run_sweep
from bench_core.sweep.core.spec import SweepSpec, check, check_runnable


class SweepService:
    def __init__(self, manager: JobManager, store: SweepStore | None, limits: Limits, hooks: SweepHooks | None = None):
        self.manager, self.store, self.limits = manager, store, limits
        self._hooks = hooks or SweepHooks()    # tests pass fakes for the kernels and the runs
        self._lock = threading.Lock()
        self._current: SweepResult | None = None
        self._cancel = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: str | None = None
        if store is not None:
            store.mark_interrupted()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def current(self) -> SweepResult | None:
        with self._lock:
            return self._current

    def start(self, spec: SweepSpec, role: str) -> str:
        """Checks the sweep (ConfigError names the field), takes the device, starts; the sweep's id."""
        if role != OPERATOR:
            raise NotAllowed("only an operator may start a sweep")
        if self.running:
            raise LimitExceeded("sweep", "a sweep is running: cancel it or wait for it to end")
        probe = self.manager.probe(timeout=30)
        if probe is None:
            raise LimitExceeded("probe", "the machine is still being probed: try again in a moment")
        points = check(spec, self.limits, probe.cuda_available, probe.free_bytes)
        check_runnable(spec.comparison, probe, resolve_device(spec.base.device, probe.cuda_available))
        if not self.manager.device.acquire(timeout=1):
            raise LimitExceeded("device", "a run is using the device: start the sweep when it is over")
        first = new_sweep(spec, points, probe)
        self._cancel = threading.Event()
        self.error = None
        self._publish(first)
        hooks = SweepHooks(on_update=self._publish, cancel=self._cancel, worker_env=self.manager.env,
                           timeout_s=self.limits.stage_timeout_s, clock=self._hooks.clock,
                           predict_points=self._hooks.predict_points, measure_point=self._hooks.measure_point)

        def work() -> None:
            try:
                run_sweep(spec, points, probe, hooks, first)
            except Exception as exc:   # shown on the page; the points that finished stay saved
                self.error = f"{type(exc).__name__}: {exc}"
                current = self.current()
                if current is not None:
                    self._publish(replace(current, status=Status.FAILED, notes=(*current.notes, self.error)))
            finally:
                self.manager.device.release()
        self._thread = threading.Thread(target=work, name="bench-sweep", daemon=True)
        self._thread.start()
        return first.sweep_id

    def cancel(self, role: str) -> None:
        if role != OPERATOR:
            raise NotAllowed("only an operator may cancel")
        self._cancel.set()

    def import_file(self, data: bytes, role: str) -> str:
        """A sweep's JSON into the history; the message names the sweep (and a renamed duplicate)."""
        return self.import_sweep(data, role)[1]

    def import_sweep(self, data: bytes, role: str) -> tuple[str, str]:
        """A sweep's JSON into the history: the id it is stored under, and the message naming it."""
        from bench_core.results.formats import ImportRejected
        from bench_core.sweep.core.records import from_json, is_sweep_json
        store = check_import(role, self.store, data, self.limits)
        if not is_sweep_json(data):   # a run's file read "KeyError: 'spec'"
            raise ImportRejected("this is not a sweep's JSON (from `python -m bench_core sweep --json` or a "
                                 "sweep's Download JSON); a run's CSV or JSON is imported on the History page")
        try:
            result = from_json(data)
        except (KeyError, TypeError, ValueError) as exc:
            raise ImportRejected(f"a sweep file that cannot be read: {type(exc).__name__}: {exc}") from None
        new_id, renamed = store.import_sweep(result)
        return new_id, (f"Imported sweep {new_id}" + (f" (sweep {result.sweep_id} was already here)" if renamed
                                                      else "") + ".")

    def wait(self, timeout: float | None = None) -> SweepResult | None:
        if self._thread is not None:
            self._thread.join(timeout)
        return self.current()

    def _publish(self, result: SweepResult) -> None:
        with self._lock:
            self._current = result
        if self.store is not None:
            self.store.save(result)
