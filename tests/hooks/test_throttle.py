"""Client-side throttling keeps a rate-limited pull free of 429s."""

from __future__ import annotations


def _pull_statuses(sandbox, hook) -> tuple[int, list[int]]:
    catalog = sandbox.catalog()
    rows = sum(
        1
        for _ in hook.iter_conversions(
            from_date=catalog["first_date"],
            to_date=catalog["last_date"],
            timezone_id=67,
            page_size=200,
        )
    )
    statuses = [
        e["status"] for e in sandbox.requests_log() if e["path"].endswith("/reporting/conversions")
    ]
    return rows, statuses


def test_throttled_pull_sees_no_429(network_conn, make_hook, sandbox):
    truth = sandbox.truth(sandbox.catalog()["first_date"], sandbox.catalog()["last_date"])
    sandbox.set_rate_limit(capacity=5, refill_per_second=10)
    hook = make_hook(network_conn, concurrency=4)
    rows, statuses = _pull_statuses(sandbox, hook)
    assert rows == truth["conversions"]
    assert len(statuses) >= 30  # enough requests to drain the bucket several times over
    assert 429 not in statuses
    assert hook.throttle.waits > 0  # it did have to hold requests back


def test_without_throttling_the_same_pull_hits_429(network_conn, make_hook, sandbox):
    # The control: proves the scenario above really is rate-limited.
    sandbox.set_rate_limit(capacity=5, refill_per_second=10)
    hook = make_hook(network_conn, concurrency=4, throttle=False, max_attempts=20)
    rows, statuses = _pull_statuses(sandbox, hook)
    assert rows > 0
    assert 429 in statuses


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def _calibrated(clock: _Clock):
    """A throttle that has seen a full bucket of 5 (so it keeps a reserve of 2)."""
    from affiliate_network.hooks._ratelimit import RateLimitThrottle

    throttle = RateLimitThrottle(reserve=2, clock=clock, sleep=clock.sleep)
    throttle.acquire()
    throttle.release(remaining=5, status=200, sent_at=clock.now)
    clock.now += 1.0
    return throttle


def test_a_late_answer_with_a_higher_level_does_not_open_the_gate():
    # Measured against the sandbox (capacity 5, 10/s, 4 workers): the answer "3" of an early
    # request arrived after the answer "1" of a later one; the model believed 3 and let two
    # requests through into a 429. Every figure below is what the server's headers said.
    clock = _Clock()
    throttle = _calibrated(clock)
    sent = []
    for _ in range(3):
        throttle.acquire()
        sent.append(clock.now)
        clock.now += 0.002
    assert clock.slept == []
    throttle.release(remaining=1, status=200, sent_at=sent[2])  # the last sent, served last
    throttle.release(remaining=2, status=200, sent_at=sent[1])
    throttle.release(remaining=3, status=200, sent_at=sent[0])  # served first, heard last
    throttle.acquire()
    assert clock.slept, "a bucket at 1 token with a reserve of 2 must hold the request back"


def test_answers_in_order_are_believed_as_they_come():
    clock = _Clock()
    throttle = _calibrated(clock)
    throttle.acquire()
    throttle.release(remaining=1, status=200, sent_at=clock.now)
    clock.now += 0.01
    throttle.acquire()  # waits: 1 token, reserve 2
    assert clock.slept
    clock.slept.clear()
    clock.now += 0.01
    throttle.release(remaining=4, status=200, sent_at=clock.now)  # refilled, sent later
    throttle.acquire()
    assert clock.slept == []


def test_the_refill_rate_is_not_overestimated_over_a_short_span():
    # 53 ms of answers from a 10/s bucket (the sandbox trace): the plain ratio said 18.9/s.
    from affiliate_network.hooks._ratelimit import RateLimitThrottle

    clock = _Clock()
    throttle = RateLimitThrottle(reserve=2, clock=clock, sleep=clock.sleep)
    for at, remaining in ((0.0, 4), (0.0248, 2), (0.0249, 3), (0.0501, 0), (0.0528, 1)):
        clock.now = 100.0 + at
        throttle.release(remaining=remaining, status=200)
    assert throttle.rate_estimate is None or throttle.rate_estimate <= 10.0
