from bench_core.run import events as ev


def test_every_event_round_trips_through_a_line():
    for cls in ev.EVENTS.values():
        event = cls(t=1.5)
        assert ev.decode(event.encode()) == event


def test_foreign_lines_are_not_events():
    assert ev.decode("USDT: profiler_start") is None
    assert ev.decode('{"event": "nope"}') is None
    assert ev.decode('{"event": "iter", "i": "x", "bogus": 1}') == ev.Iter(i="x")  # unknown fields dropped
