from bench_core.service.access import Throttle


def test_wrong_tokens_wait_longer_each_time_and_a_right_one_clears():
    t = Throttle()
    assert t.wait_s(0) == 0
    t.record(False, now=0)
    assert t.wait_s(0) == 1
    t.record(False, now=1)
    assert t.wait_s(1) == 2
    t.record(False, now=3)
    assert t.wait_s(3) == 4 and t.wait_s(7) == 0
    t.record(True, now=7)
    assert t.failures == 0 and t.wait_s(7) == 0


def test_delay_is_capped():
    t = Throttle()
    for _ in range(40):
        t.record(False, now=0)
    assert t.wait_s(0) == Throttle.MAX_DELAY_S
