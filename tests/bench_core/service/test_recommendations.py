"""A recommendation on the shared server (service.recommendations), measured by synthetic timings: Cancel stops the
search at its next launch, keeps what was measured and answers from it, saves that answer, and gives the device
back; only an operator may start or cancel."""
import threading

import pytest

from bench_core.config.settings import Limits
from bench_core.recommend.history import RecommendationStore
from bench_core.recommend.planner import Measurement
from bench_core.results.records import Status
from bench_core.results.store import Store
from bench_core.service.access import OPERATOR
from bench_core.service.jobs import JobManager, NotAllowed
from bench_core.service.recommendations import RecommendRequest, RecommendService
from helpers import CFG, PROBE, FakeRunner

STEP_MS = {"adam": 30.0, "adam-fused": 20.0}   # by optimizer: the fused one is the faster


@pytest.fixture
def service(tmp_path):
    manager = JobManager(Store(str(tmp_path / "runs.sqlite3")), Limits(), probe=PROBE, runner=FakeRunner())
    first_measured, go_on = threading.Event(), threading.Event()
    launched = []

    def factory(ask, probe, hooks):
        def measure(candidate, processes):
            launched.append((candidate, processes))
            first_measured.set()
            go_on.wait(timeout=30)   # the test cancels while this one is measured
            ms = STEP_MS[candidate.stage.optimizer]
            return Measurement(tuple((ms, ms * 1.001, ms * 0.999) for _ in range(processes)), verified=True,
                               verdict="verified", seconds=0.1)
        return measure

    recs = RecommendService(manager, RecommendationStore(str(tmp_path / "runs.sqlite3")), Limits(), factory)
    yield recs, manager, first_measured, go_on, launched
    go_on.set()
    recs.wait(timeout=30)
    manager.shutdown()


def test_cancel_keeps_what_was_measured_answers_from_it_and_frees_the_device(service):
    recs, manager, first_measured, go_on, launched = service
    request = RecommendRequest(cfg=CFG, budget="10m", exclude="compile,fp16,adam-loop,bf16")
    job_id = recs.start(request, OPERATOR)
    assert first_measured.wait(timeout=60)
    recs.cancel(OPERATOR)
    go_on.set()   # the measurement in flight ends; the planner's next launch stops the search
    job = recs.wait(timeout=60)
    assert job is not None and job.job_id == job_id and job.status is Status.CANCELLED, job
    rec = job.recommendation
    assert rec is not None and rec.recommendation_id == job_id
    measured = [c for c in rec.candidates if c.label == "measured"]
    assert measured and len(measured) <= len(launched) < len(rec.candidates), (measured, launched)
    stored = RecommendationStore(recs.store.path).list_recommendations()
    assert [r["recommendation_id"] for r in stored] == [job_id]
    assert manager.device.acquire(timeout=1)   # given back: a run or another recommendation may start
    manager.device.release()


def test_only_an_operator_starts_or_cancels(service):
    recs = service[0]
    with pytest.raises(NotAllowed):
        recs.start(RecommendRequest(cfg=CFG), "viewer")
    with pytest.raises(NotAllowed):
        recs.cancel("viewer")
    assert recs.current() is None and not recs.running
