"""core/backoff.py: the per-target circuit breaker after whole-call failures
(`CircuitBreaker`), a failed message's wait, and a wait as a visibility change SQS accepts.
The consumer's jittered retry backoff (`retries.Backoff`) is test_retries.py's."""

from __future__ import annotations

from sqsdelay.core import quotas
from sqsdelay.core.backoff import CircuitBreaker, retry_backoff_seconds, visibility_seconds


def test_circuit_breaker_backs_off_exponentially_and_caps() -> None:
    b = CircuitBreaker(base_seconds=1, cap_seconds=10)
    assert b.retry_in("q", 0) == 0
    assert [b.failure("q", 0) for _ in range(6)] == [1, 2, 4, 8, 10, 10]
    assert b.retry_in("q", 3) == 7 and b.retry_in("other", 3) == 0
    b.success("q")
    assert b.retry_in("q", 3) == 0 and b.failure("q", 0) == 1


def test_retry_backoff_grows_and_caps() -> None:
    assert [retry_backoff_seconds(n) for n in (1, 2, 3)] == [2, 4, 8]
    assert retry_backoff_seconds(50) == 900


def test_a_breaker_opens_for_each_target_alone_and_a_success_closes_it() -> None:
    b = CircuitBreaker(base_seconds=2, cap_seconds=60)
    assert b.failure("a", 100) == 2 and b.failure("b", 100) == 2 and b.failure("a", 101) == 4
    assert (b.retry_in("a", 101), b.retry_in("b", 101)) == (4, 1)
    assert b.retry_in("a", 200) == 0  # the wait is over, never negative
    b.success("b")
    assert b.retry_in("a", 101) == 4  # another target's success leaves it open


def test_a_long_outage_waits_the_cap_and_no_more() -> None:
    b = CircuitBreaker(base_seconds=1, cap_seconds=300)
    waits = [b.failure("q", 0) for _ in range(2000)]  # the exponent is bounded: no overflow
    assert max(waits) == 300 and waits[-1] == 300


def test_a_failed_messages_wait_starts_at_two_seconds_even_for_attempt_zero() -> None:
    assert retry_backoff_seconds(0) == retry_backoff_seconds(1) == 2
    assert retry_backoff_seconds(10, cap=60) == 60
    assert retry_backoff_seconds(10**6) == quotas.MAX_NATIVE_DELAY_SECONDS


def test_a_wait_becomes_a_visibility_sqs_accepts() -> None:
    assert (
        visibility_seconds(0) == 1 and visibility_seconds(0.4) == 1 and visibility_seconds(7.9) == 7
    )
    assert visibility_seconds(10**9) == quotas.MAX_BACKOFF_VISIBILITY_SECONDS
