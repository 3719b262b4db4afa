"""recommend.search: what the answer says of --from, the speedup's base, once it has been measured."""
from dataclasses import replace

from bench_core.config.bench_config import BenchConfig
from bench_core.recommend.planner import Label, Planner
from bench_core.recommend.prune import PREDICTED_NOT_MEASURED, Cap, beyond_cap
from bench_core.recommend.search import FROM_MEASURED, Ask, _measured_from
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
