"""recommend.search: what the answer says of --from, the speedup's base, once it has been measured."""
from dataclasses import replace

from bench_core.config.bench_config import BenchConfig
from bench_core.recommend.answer import Ranked
from bench_core.recommend.planner import Label, Planner
from bench_core.recommend.predict import Predicted
from bench_core.recommend.prune import PREDICTED_NOT_MEASURED, Cap, beyond_cap
from bench_core.recommend.search import FROM_MEASURED, Ask, _measured_from, unmeasured_limit
from bench_core.recommend.space import SearchSpace
from tests.bench_core.recommend.test_recommend_planner import STAGES, searched, synthetic


def test_from_measured_after_the_search_no_longer_says_predicted_not_measured():
    true = [20.0, 10.0]
    measure, calls = synthetic(true)
    states = Planner(measure, None).run(searched(true))
    base_c = states[0].candidate
    lead = next(s for s in states if s.candidate != base_c)
    # as the cap leaves it: the base passed over, never measured
    states = [replace(s, measurement=None, dropped=beyond_cap(Cap((lead.candidate,), "one fits")))
              if s.candidate == base_c else s for s in states]
    ask = Ask(BenchConfig(batch_size=8, seq_len=64), "cpu", None, SearchSpace((), (8,), ()), STAGES[0], None, None,
              None, None, "held")
    base = _measured_from(ask, states, lead, measure, None)
    assert base.label is Label.MEASURED
    assert not base.dropped.startswith(PREDICTED_NOT_MEASURED) and base.dropped == FROM_MEASURED


def test_the_answer_says_how_many_candidates_it_could_not_rule_out():
    """An H100 search whose predictions were all estimates measured 3 of 608 and said nothing of the 605 others."""
    true = [20.0, 10.0, 30.0]
    measure, _ = synthetic(true)
    states = Planner(measure, None).run(searched(true))
    lead = states[1]
    best = Ranked.of(lead, 64, None, BenchConfig(batch_size=8, seq_len=64)).step_ms / lead.tokens   # as the answer
    assert unmeasured_limit(states, best) == ""   # every candidate measured
    left = [states[0], lead, replace(states[2], measurement=None)]   # the third: an estimate, not measured
    assert unmeasured_limit(left, best).startswith("the best of 2 measured, not of the space: 1 of the 3 candidates")

    def timed(low_ms):   # a timed prediction, bounded below at low_ms a step
        return [*left[:2], replace(left[2], predicted=Predicted(low_ms + 2, low_ms, low_ms + 4))]
    assert unmeasured_limit(timed(15.0), best) == ""            # its fastest is above the leader's 10 ms: ruled out
    assert unmeasured_limit(timed(5.0), best).startswith("the best of 2 measured")   # could still be faster
