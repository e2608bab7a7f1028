"""The pure decision core: exhaustive cases, properties and virtual-clock simulations."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sqsdelay.core import defaults, fifo_dedup, identity, message_shape, quotas, wire_format
from sqsdelay.core.decision import (
    Forward,
    HandOver,
    Limits,
    Park,
    Poison,
    Requeue,
    decide,
    forward,
    utc_month,
)
from sqsdelay.core.received import Received
from sqsdelay.core.types import AttributeValue
from sqsdelay.dev.simulation import simulate
from tests.support.logs import capture_logs, events
from tests.support.steps import QF, run
from tests.support.stub import StubAws

T = 1_700_000_000_000
LIM = Limits(max_native_delay_seconds=900, max_attempts=5)


def msg(
    delay: str | None = "3600",
    *,
    sent: int = T,
    first: int | None = None,
    count: int = 1,
    extra: dict[str, AttributeValue] | None = None,
    due_at: int | None = None,
    message_id: str = "m1",
) -> Received:
    attrs = dict(extra or {})
    if delay is not None:
        attrs[wire_format.DELAY_ATTRIBUTE] = message_shape.string_attribute(delay)
    if due_at is not None:
        attrs[wire_format.DUE_AT_ATTRIBUTE] = message_shape.number_attribute(due_at)
    system = {
        "SentTimestamp": str(sent),
        "ApproximateReceiveCount": str(count),
        "ApproximateFirstReceiveTimestamp": str(first if first is not None else sent + 900_000),
        "MessageGroupId": "g1",
        "MessageDeduplicationId": "d1",
    }
    return Received(message_id, "rh", "body", attrs, system)


def test_reference_example_1925_seconds() -> None:
    """32 min 5 s: two 900 s cycles, then a hand-over with 125 s (reference document)."""
    first = decide(msg("1925", first=T + 900_000), local_now_ms=0, offset_ms=None, lim=LIM)
    assert isinstance(first, Requeue) and first.remaining_seconds == 1025
    assert first.attributes[wire_format.DELAY_ATTRIBUTE]["StringValue"] == "1025"
    assert first.attributes[wire_format.DUE_AT_ATTRIBUTE]["StringValue"] == str(T + 1_925_000)
    second = decide(
        msg(sent=T + 900_000, first=T + 1_800_000, delay="1025", due_at=T + 1_925_000),
        local_now_ms=0,
        offset_ms=None,
        lim=LIM,
    )
    assert isinstance(second, HandOver) and second.remaining_seconds == 125
    assert wire_format.DELAY_ATTRIBUTE not in second.attributes
    assert wire_format.DUE_AT_ATTRIBUTE not in second.attributes


def test_requeue_keeps_the_group_and_derives_the_dedup_id_from_the_message_id() -> None:
    a = decide(msg(message_id="A"), local_now_ms=0, offset_ms=None, lim=LIM)
    b = decide(msg(message_id="B"), local_now_ms=0, offset_ms=None, lim=LIM)
    assert isinstance(a, Requeue) and isinstance(b, Requeue)
    assert a.group_id == b.group_id == "g1"
    assert a.dedup_id != b.dedup_id and len(a.dedup_id) <= quotas.MAX_DEDUP_ID_LENGTH
    assert a.dedup_id == identity.requeue_dedup_id("d1", "A")


def test_redelivery_uses_the_local_clock_corrected_by_the_offset() -> None:
    m = msg("3600", count=2)
    local = T + 1_000_000 - 60_000  # local clock 60 s behind the broker
    d = decide(m, local_now_ms=local, offset_ms=60_000, lim=LIM)
    assert isinstance(d, Requeue) and d.remaining_seconds == 2600
    bare = decide(m, local_now_ms=local, offset_ms=None, lim=LIM)
    assert isinstance(bare, Requeue) and bare.remaining_seconds == 2660


def test_a_redelivered_requeue_stays_a_requeue_with_the_same_dedup_id() -> None:
    """First attempt requeued (901 s left), then its delete failed. 100 s later the
    redelivery must requeue again (FIFO drops the copy), not hand over a second copy."""
    m1 = msg("1801", first=T + 900_000)
    first = decide(m1, local_now_ms=0, offset_ms=None, lim=LIM)
    m2 = msg("1801", first=T + 900_000, count=2)
    again = decide(m2, local_now_ms=T + 1_000_000, offset_ms=0, lim=LIM)
    assert isinstance(first, Requeue) and isinstance(again, Requeue)
    assert again.dedup_id == first.dedup_id and again.remaining_seconds == 801


def test_redelivery_never_goes_before_the_first_receive() -> None:
    d = decide(msg("3600", count=2), local_now_ms=0, offset_ms=None, lim=LIM)
    assert isinstance(d, Requeue) and d.remaining_seconds == 2700


def test_overdue_messages_are_handed_over_without_delay() -> None:
    d = decide(msg("10"), local_now_ms=0, offset_ms=None, lim=LIM)
    assert isinstance(d, HandOver) and d.remaining_seconds == 0


@pytest.mark.parametrize(
    ("m", "reason"),
    [
        (msg(None), "no NServiceBus.AmazonSQS.DelaySeconds attribute"),
        (msg("abc"), "is not an integer"),
        (msg("1.5"), "is not an integer"),
        (msg("-5"), "is negative"),
        (
            Received(
                "m",
                "r",
                "b",
                {wire_format.DELAY_ATTRIBUTE: message_shape.string_attribute("5")},
                {},
            ),
            "SentTimestamp is missing",
        ),
        (
            Received(
                "m",
                "r",
                "b",
                {wire_format.DELAY_ATTRIBUTE: message_shape.string_attribute("5")},
                {"SentTimestamp": "1"},
            ),
            "ApproximateFirstReceiveTimestamp is missing",
        ),
        (
            msg(extra={f"a{i}": message_shape.string_attribute("v") for i in range(10)}),
            "cannot requeue: message has 11 attributes",
        ),
        (
            msg("10", extra={f"a{i}": message_shape.string_attribute("v") for i in range(11)}),
            "cannot hand over: message has 11 attributes",
        ),
    ],
)
def test_poison(m: Received, reason: str) -> None:
    d = decide(m, local_now_ms=T, offset_ms=None, lim=LIM, source_queue="q-delay.fifo")
    assert isinstance(d, Poison) and reason in d.reason


def test_poison_record_folds_our_attributes_into_the_failure_attribute() -> None:
    m = msg("abc", extra={"keep": {"DataType": "Binary", "BinaryValue": b"\x00"}})
    d = decide(
        m, local_now_ms=T, offset_ms=None, lim=LIM, source_queue="q-delay.fifo", last_error="boom"
    )
    assert isinstance(d, Poison)
    assert d.attributes["keep"] == {"DataType": "Binary", "BinaryValue": b"\x00"}
    record = json.loads(d.attributes[wire_format.FAILURE_ATTRIBUTE]["StringValue"])
    assert record["queue"] == "q-delay.fifo" and record["delay_seconds"] == "abc"
    assert wire_format.DELAY_ATTRIBUTE not in d.attributes


def test_last_error_is_part_of_the_max_attempts_reason() -> None:
    d = decide(
        msg(count=9),
        local_now_ms=T,
        offset_ms=None,
        lim=LIM,
        own_failures=5,
        last_error="InvalidParameterValue: bad",
    )
    assert isinstance(d, Poison) and d.reason.endswith("last error: InvalidParameterValue: bad")


@given(st.integers(1, 10_000), st.integers(0, 4))
def test_redeliveries_never_dead_letter_a_good_message(count: int, own: int) -> None:
    """Outages, throttling and crashes raise the receive count, never the own-failure count:
    only failures of the message itself (SQSDELAY_MAX_ATTEMPTS of them) dead-letter it."""
    d = decide(msg(count=count), local_now_ms=T, offset_ms=0, lim=LIM, own_failures=own)
    assert isinstance(d, Requeue | HandOver)
    assert isinstance(
        decide(msg(count=count), local_now_ms=T, offset_ms=0, lim=LIM, own_failures=5), Poison
    )


def test_due_at_is_dropped_when_there_is_no_room_but_delay_still_works() -> None:
    nine = {f"a{i}": message_shape.string_attribute("v") for i in range(9)}
    d = decide(msg(extra=nine), local_now_ms=0, offset_ms=None, lim=LIM)
    assert isinstance(d, Requeue) and len(d.attributes) == 10
    assert wire_format.DUE_AT_ATTRIBUTE not in d.attributes


def test_mangled_due_at_falls_back_to_the_delay() -> None:
    m = msg("3600")
    m.attributes[wire_format.DUE_AT_ATTRIBUTE] = message_shape.string_attribute("soon")
    d = decide(m, local_now_ms=0, offset_ms=None, lim=LIM)
    assert isinstance(d, Requeue) and d.due_ms == T + 3_600_000


received = st.builds(
    lambda delay, sent, lag, count, skew, native: (
        msg(str(delay), sent=sent, first=sent + lag, count=count),
        skew,
        native,
    ),
    delay=st.integers(0, defaults.DEFAULT_MAX_DELAY_SECONDS),
    sent=st.integers(T, T + 10**12),
    lag=st.integers(0, 10**7),
    count=st.integers(1, 5),
    skew=st.integers(-120_000, 120_000),
    native=st.integers(1, 900),
)


@given(received, st.integers(0, 10**7))
def test_never_early_no_lost_time_and_idempotent(
    case: tuple[Received, int, int], elapsed: int
) -> None:
    m, skew, native = case
    lim = Limits(max_native_delay_seconds=native, max_attempts=5)
    first = int(m.system["ApproximateFirstReceiveTimestamp"])
    broker_now = first if m.receive_count == 1 else first + elapsed
    local_now, offset = broker_now - skew, skew  # a perfect offset estimate
    d = decide(m, local_now_ms=local_now, offset_ms=offset, lim=lim)
    assert d == decide(m, local_now_ms=local_now, offset_ms=offset, lim=lim)
    assert isinstance(d, Requeue | HandOver)
    true_ms = max(0, d.due_ms - broker_now)
    if isinstance(d, HandOver):  # DelaySeconds after a wait of the fraction: exactly on time
        assert d.remaining_seconds * 1000 + d.wait_ms == true_ms and 0 <= d.wait_ms < 1000
        d = d.at_once()  # and without the wait, the fraction rounded up
    assert d.remaining_seconds * 1000 >= true_ms  # never early
    assert d.remaining_seconds * 1000 < true_ms + 1000  # no time lost
    at_first = -(-max(0, d.due_ms - first) // 1000)
    assert isinstance(d, Requeue) == (at_first > native)  # the first attempt's route
    if m.receive_count == 1:
        assert isinstance(d, Requeue) == (d.remaining_seconds > native)
    if isinstance(d, HandOver):
        assert d.remaining_seconds <= native <= quotas.MAX_NATIVE_DELAY_SECONDS


@pytest.mark.parametrize("skew_ms", [-60_000, 60_000])
def test_skewed_local_clock_keeps_redelivery_decisions_within_a_second(skew_ms: int) -> None:
    result = simulate(6 * 3600, skew_ms=skew_ms, redelivery_rate=0.5, seed=7)
    assert result.redeliveries >= 5
    assert all(0 <= e < 1000 for e in result.decision_errors_ms), result.decision_errors_ms
    assert 0 <= result.lateness_ms < 1000 + 2 * 20


def test_without_the_offset_a_skewed_clock_would_be_early() -> None:
    """The check above can fail: the bare local clock (reference rule) is 60 s off."""
    m = msg("3600", count=2)
    broker_now = T + 1_000_000
    d = decide(m, local_now_ms=broker_now + 60_000, offset_ms=None, lim=LIM)
    true_remaining = T + 3_600_000 - broker_now
    assert d.remaining_seconds * 1000 < true_remaining - 59_000  # type: ignore[union-attr]


def test_one_year_lands_within_a_second_of_due() -> None:
    result = simulate(31_536_000, seed=1, redelivery_rate=0.01, skew_ms=30_000)
    # 35,040 cycles of 900 s; receive jitter and redeliveries make each hop a little longer
    assert 34_900 <= result.hops <= 35_040 and result.redeliveries > 100
    assert 0 <= result.lateness_ms < 1000 + 2 * 20, result.lateness_ms


def test_relative_carry_without_due_at_drifts() -> None:
    """The reason for sqsdelay.DueAt: rounding up every cycle accumulates (never early)."""
    result = simulate(31_536_000, seed=1, carry_due_at=False)
    assert result.lateness_ms > 60_000


@pytest.mark.parametrize("due", ["²", "٣", "9" * 5000, "1e3", "-5"])
def test_a_due_time_that_is_not_ascii_digits_falls_back_to_the_delay(due: str) -> None:
    m = msg(
        "1925",
        sent=T,
        first=T,
        extra={wire_format.DUE_AT_ATTRIBUTE: {"DataType": "Number", "StringValue": due}},
    )
    d = decide(m, local_now_ms=T, offset_ms=None, lim=Limits())
    assert isinstance(d, Requeue) and d.due_ms == T + 1_925_000


def test_a_delay_too_large_for_any_date_is_poison_with_parking_on() -> None:
    lim = Limits(park_after_seconds=10_020)
    for delay in ("9" * 30, str(defaults.DEFAULT_MAX_DELAY_SECONDS + 1)):
        d = decide(msg(delay, sent=T, first=T), local_now_ms=T, offset_ms=None, lim=lim)
        assert isinstance(d, Poison) and "SQSDELAY_MAX_DELAY_SECONDS" in d.reason


def test_a_redelivery_parks_again_whatever_the_local_clock_says() -> None:
    # A crash between CreateSchedule and the delete: the redelivery must meet its own
    # schedule (same name, time and input), not loop while the schedule also fires.
    lim = Limits(max_native_delay_seconds=2, park_after_seconds=6)
    first = decide(msg("14", sent=T, first=T + 1000), local_now_ms=T, offset_ms=0, lim=lim)
    later = T + 9000  # 5 s left: under the threshold by the local clock
    again = msg("14", sent=T, first=T + 1000, count=2)
    redelivered = decide(again, local_now_ms=later, offset_ms=0, lim=lim)
    assert isinstance(first, Park) and isinstance(redelivered, Park)
    assert (redelivered.fire_ms, redelivered.attributes) == (first.fire_ms, first.attributes)


def test_the_senders_milliseconds_set_the_due_time_when_they_agree_with_the_seconds() -> None:
    lim = Limits(max_native_delay_seconds=2, max_attempts=5)
    ms = {wire_format.DELAY_MS_ATTRIBUTE: message_shape.string_attribute("2500")}
    d = decide(msg("3", extra=ms, first=T + 2000), local_now_ms=0, offset_ms=None, lim=lim)
    assert isinstance(d, HandOver) and d.due_ms == T + 2500
    assert (d.remaining_seconds, d.wait_ms) == (0, 500)
    # An NServiceBus pump requeued it: its whole seconds count from its own send, and ours no
    # longer agree with them; mangled milliseconds are ignored too.
    for delay, value in (("2", "2500"), ("3", "²500"), ("3", "9" * 30)):
        extra = {wire_format.DELAY_MS_ATTRIBUTE: message_shape.string_attribute(value)}
        d = decide(msg(delay, extra=extra, first=T + 1000), local_now_ms=0, offset_ms=None, lim=lim)
        assert d.due_ms == T + int(delay) * 1000


def test_a_loop_logs_one_requeue_at_info_per_calendar_month_it_enters() -> None:
    """A 90-day delay sent at 2026-01-01 00:00 UTC is requeued 8,638 times: INFO only for its first
    hop in February and in March (January has its delay.scheduled line), DEBUG for the rest."""
    jan_1 = 1_767_225_600_000
    due = jan_1 + 90 * 86_400_000
    sent, levels = jan_1, []
    while True:
        left = str((due - sent) // 1000)
        d = decide(msg(left, sent=sent, due_at=due), local_now_ms=0, offset_ms=None, lim=LIM)
        if not isinstance(d, Requeue):
            break
        levels.append((d.level, utc_month(sent + 900_000)))
        sent += 900_000
    assert len(levels) == 8_638
    assert [m for level, m in levels if level == "info"] == [(2026, 2), (2026, 3)]
    assert {level for level, _ in levels} == {"info", "debug"}


def staged(
    group: str | None, ident: str | None, message_id: str = "s1", due: int | None = T + 5000
) -> Received:
    """A message in a FIFO destination's staging queue, as the hand-over leaves it: its
    send's due time in sqsdelay.DueAt."""
    extra = {"Color": message_shape.string_attribute("red")}
    if group is not None:
        extra[wire_format.GROUP_ID_ATTRIBUTE] = message_shape.string_attribute(group)
    if ident is not None:
        extra[wire_format.MESSAGE_ID_ATTRIBUTE] = message_shape.string_attribute(ident)
    if due is not None:
        extra[wire_format.DUE_AT_ATTRIBUTE] = message_shape.number_attribute(due)
    return msg(None, extra=extra, message_id=message_id)


def test_a_forward_deduplicates_every_copy_of_one_send_but_never_a_new_send() -> None:
    one, copy = (
        forward(staged("order-7", "m-1"), lim=LIM),
        forward(staged("order-7", "m-1", "s2"), lim=LIM),  # a retried hand-over
    )
    assert isinstance(one, Forward) and one == copy
    assert one.request() == {
        "MessageGroupId": "order-7",
        "MessageDeduplicationId": fifo_dedup.forward_dedup_id("m-1", T + 5000),
    }
    assert set(one.attributes) == {"Color", wire_format.MESSAGE_ID_ATTRIBUTE}  # no DueAt
    other = forward(staged("order-7", "m-2"), lim=LIM)
    assert isinstance(other, Forward) and other.dedup_id != one.dedup_id
    # A Celery retry keeps its task id: a new send, a new due time, never dropped by SQS.
    retry = forward(staged("order-7", "m-1", "s3", due=T + 185_000), lim=LIM)
    assert isinstance(retry, Forward) and retry.dedup_id != one.dedup_id
    # No due time (no room): the id and what every copy carries, whatever its SQS id.
    bare = forward(staged("g", "m-1", due=None), lim=LIM)
    again = forward(staged("g", "m-1", "s2", due=None), lim=LIM)
    assert isinstance(bare, Forward) and isinstance(again, Forward)
    assert bare.dedup_id == again.dedup_id != one.dedup_id
    carried = staged("g", "m-1", due=None).attributes
    assert bare.dedup_id == fifo_dedup.forward_dedup_id_by_content("m-1", "body", carried)
    foreign = forward(staged("g", None, due=None), lim=LIM)  # no id of ours: SQS's id
    assert isinstance(foreign, Forward) and foreign.dedup_id != bare.dedup_id


def test_a_replays_forward_is_a_new_send_and_copies_of_it_are_one() -> None:
    """A replay keeps its due time: without its token in the key, a replay within SQS's five
    minutes of the first forward would be dropped by the FIFO destination as its copy."""

    def replayed(token: str, message_id: str = "s1") -> Received:
        plain = staged("order-7", "m-1", message_id)
        token_attr = {wire_format.REPLAY_ATTRIBUTE: message_shape.string_attribute(token)}
        return msg(None, extra={**plain.attributes, **token_attr}, message_id=message_id)

    first = forward(staged("order-7", "m-1"), lim=LIM)
    replay, copy = forward(replayed("e-1"), lim=LIM), forward(replayed("e-1", "s2"), lim=LIM)
    again = forward(replayed("e-2"), lim=LIM)
    assert isinstance(first, Forward) and isinstance(replay, Forward)
    assert isinstance(copy, Forward) and isinstance(again, Forward)
    assert (
        replay.dedup_id
        == copy.dedup_id
        == fifo_dedup.forward_dedup_id_of_replay("m-1", T + 5000, "e-1")
    )
    assert len({first.dedup_id, replay.dedup_id, again.dedup_id}) == 3
    assert replay.attributes[wire_format.REPLAY_ATTRIBUTE]["StringValue"] == "e-1"


def test_a_hand_over_into_staging_carries_its_due_time_and_to_a_fair_queue_its_group() -> None:
    group = {wire_format.GROUP_ID_ATTRIBUTE: message_shape.string_attribute("tenant-1")}
    m = msg("5", extra=group, first=T + 5000)
    staging = decide(m, local_now_ms=0, offset_ms=None, lim=LIM, staging=True)
    assert isinstance(staging, HandOver) and staging.group_id is None
    assert staging.attributes[wire_format.DUE_AT_ATTRIBUTE]["StringValue"] == str(T + 5000)
    assert staging.attributes[wire_format.GROUP_ID_ATTRIBUTE]["StringValue"] == "tenant-1"
    fair = decide(m, local_now_ms=0, offset_ms=None, lim=LIM)
    assert isinstance(fair, HandOver) and fair.request() == {"MessageGroupId": "tenant-1"}
    assert wire_format.GROUP_ID_ATTRIBUTE not in fair.attributes
    assert wire_format.DUE_AT_ATTRIBUTE not in fair.attributes
    assert fair.at_once().group_id == "tenant-1"


def test_a_claimed_hand_over_into_staging_has_a_key_of_its_claim() -> None:
    """Found by the whole-way model: a send of an id at once into its FIFO destination and a
    send-now of its parked copy, due at the same millisecond, had one forward key, and SQS
    dropped the second as a copy of the first while its record said delivered. A hand-over
    that claims its registry record carries a key of that claim: the same SQS message again
    (a retried hand-over) has the same one, another claim or the direct send another."""
    ident = {
        wire_format.MESSAGE_ID_ATTRIBUTE: message_shape.string_attribute("m-1"),
        wire_format.GROUP_ID_ATTRIBUTE: message_shape.string_attribute("order-7"),
    }

    def claimed(
        message_id: str, *, claims: bool = True, extra: dict[str, AttributeValue] = ident
    ) -> Any:
        m = msg("5", extra=extra, first=T + 5000, message_id=message_id)
        handed = decide(m, local_now_ms=0, offset_ms=None, lim=LIM, staging=True, claims=claims)
        assert isinstance(handed, HandOver)
        into_staging = msg(None, extra=handed.attributes, message_id=f"staged-{message_id}")
        forwarded = forward(into_staging, lim=LIM)
        assert isinstance(forwarded, Forward)
        return forwarded.dedup_id

    first, again, other = claimed("s1"), claimed("s1"), claimed("s2")
    assert first == again == fifo_dedup.forward_dedup_id_of_claim("m-1", T + 5000, "s1")
    unclaimed = fifo_dedup.forward_dedup_id("m-1", T + 5000)  # also the direct send's key
    assert len({first, other, unclaimed}) == 3
    assert claimed("s1", claims=False) == claimed("s2", claims=False) == unclaimed
    given = {**ident, DEDUP: message_shape.string_attribute("task-7")}  # the caller's wins
    assert claimed("s1", extra=given) == claimed("s2", extra=given) == "task-7"


@pytest.mark.parametrize("group", [None, "", "with space", "x" * 129])
def test_a_message_without_a_valid_group_cannot_be_forwarded(group: str | None) -> None:
    poison = forward(staged(group, "m-1"), lim=LIM, source_queue="orders-fifo-staging")
    assert isinstance(poison, Poison) and wire_format.GROUP_ID_ATTRIBUTE in poison.reason
    record = json.loads(poison.attributes[wire_format.FAILURE_ATTRIBUTE]["StringValue"])
    assert record["queue"] == "orders-fifo-staging"


def test_a_forward_that_keeps_failing_is_dead_lettered() -> None:
    poison = forward(staged("g", "m-1"), lim=LIM, own_failures=5, last_error="MessageTooLong")
    assert isinstance(poison, Poison) and "MessageTooLong" in poison.reason


# ---- a caller's deduplication id (issue 58, 10) ----

DEDUP = wire_format.DEDUPLICATION_ID_ATTRIBUTE


def with_dedup(received: Received, value: AttributeValue) -> Received:
    return msg(None, extra={**received.attributes, DEDUP: value}, message_id=received.message_id)


def test_a_forward_is_deduplicated_by_the_callers_id_not_the_due_time() -> None:
    """Two sends with one deduplication id, different message ids and due times: one key,
    the caller's id as SQS would take it, so the destination drops the later; the attribute
    stays behind, so a consumer's retry has no id to be dropped by."""
    given = message_shape.string_attribute("task-7")
    one = forward(with_dedup(staged("g", "m-1"), given), lim=LIM)
    two = forward(with_dedup(staged("g", "m-2", "s2", due=T + 185_000), given), lim=LIM)
    bare = forward(with_dedup(staged("g", "m-1", due=None), given), lim=LIM)
    for f in (one, two, bare):
        assert isinstance(f, Forward) and f.dedup_id == "task-7" and f.level == "info"
        assert DEDUP not in f.attributes and "deduplication_id_ignored" not in f.log_fields()
    # A replay is a new delivery: its token in the key, copies of one replay alike.
    token = {wire_format.REPLAY_ATTRIBUTE: message_shape.string_attribute("e-1")}
    replayed = with_dedup(msg(None, extra={**staged("g", "m-1").attributes, **token}), given)
    replay = forward(replayed, lim=LIM)
    assert isinstance(replay, Forward)
    assert replay.dedup_id == fifo_dedup.forward_dedup_id_given("task-7", "e-1") != "task-7"
    assert replay.dedup_id != fifo_dedup.forward_dedup_id_given("task-7", "e-2")


def test_every_hop_before_the_forward_keeps_the_callers_id() -> None:
    """The requeue and the hand-over into staging carry it as it came; a hand-over into a
    standard destination (a producer's attribute: the sender refuses the option there)
    leaves it behind, as SQS would refuse a deduplication id there."""
    given = {DEDUP: message_shape.string_attribute("task-7")}
    requeue = decide(msg("3600", extra=given), local_now_ms=0, offset_ms=None, lim=LIM)
    assert isinstance(requeue, Requeue) and requeue.attributes[DEDUP] == given[DEDUP]
    plain = decide(msg("3600"), local_now_ms=0, offset_ms=None, lim=LIM)
    assert isinstance(plain, Requeue) and requeue.dedup_id == plain.dedup_id  # unchanged
    last = msg("5", extra=given, first=T + 5000)
    staging = decide(last, local_now_ms=0, offset_ms=None, lim=LIM, staging=True)
    assert isinstance(staging, HandOver) and staging.attributes[DEDUP] == given[DEDUP]
    standard = decide(last, local_now_ms=0, offset_ms=None, lim=LIM)
    assert isinstance(standard, HandOver) and DEDUP not in standard.attributes


producer_values = st.one_of(
    st.text(max_size=300).map(message_shape.string_attribute),
    st.builds(
        lambda t, v: {"DataType": t, "StringValue": v},
        st.sampled_from(["Number", "String.custom", "Binary"]),
        st.text(max_size=20),
    ),
    st.binary(max_size=20).map(lambda b: {"DataType": "Binary", "BinaryValue": b}),
)


@given(producer_values, st.integers(0, 10_000))
def test_whatever_a_producer_wrote_in_the_attribute_is_handed_over_and_forwarded(
    value: AttributeValue, left_ms: int
) -> None:
    """Never a crash nor a poison: a value SQS would take is the forward's key; any other is
    ignored, the forward logged as a warning that says why, under sqsdelay's own key."""
    last = msg("5", extra={DEDUP: value}, sent=T, first=T + 5000 - left_ms)
    handed = decide(last, local_now_ms=0, offset_ms=None, lim=LIM, staging=True)
    assert isinstance(handed, HandOver) and handed.attributes[DEDUP] == value
    staged_copy = msg(None, extra={**handed.attributes, **staged("g", "m1").attributes})
    f = forward(staged_copy, lim=LIM)
    assert isinstance(f, Forward) and DEDUP not in f.attributes
    text = value.get("StringValue")
    if isinstance(text, str) and identity.is_message_id(text):
        assert f.dedup_id == text and f.level == "info"
    else:
        assert f.dedup_id == fifo_dedup.forward_dedup_id("m1", T + 5000)
        assert f.level == "warning" and DEDUP in f.log_fields()["deduplication_id_ignored"]
    assert identity.is_message_id(f.dedup_id)


def test_a_forward_that_ignores_a_bad_id_delivers_the_message_and_logs_a_warning() -> None:
    """Through the batch step (stub-driven): both forwarded, the bad one's forward logged at
    WARNING with the reason, the good one's at INFO."""
    out = capture_logs("INFO")
    batch = [
        with_dedup(staged("g", f"m-{i}", f"s{i}"), message_shape.string_attribute(value))
        for i, value in enumerate(["task-7", "not one SQS takes"])
    ]
    stub = StubAws()
    outcome = run(batch, stub, queues=QF)
    assert outcome.ends == {"s0": "handed-over", "s1": "handed-over"}  # forwards end so
    sent = {
        m["MessageAttributes"][wire_format.MESSAGE_ID_ATTRIBUTE]["StringValue"]: m
        for m in stub.queues["orders.fifo"]
    }
    assert sent["m-0"]["MessageDeduplicationId"] == "task-7"
    assert sent["m-1"]["MessageDeduplicationId"] == fifo_dedup.forward_dedup_id("m-1", T + 5000)
    assert all(DEDUP not in m["MessageAttributes"] for m in sent.values())
    forwarded = {e["message_id"]: e for e in events(out, "delay.forwarded")}
    assert forwarded["m-0"]["level"] == "info"
    assert "deduplication_id_ignored" not in forwarded["m-0"]
    assert forwarded["m-1"]["level"] == "warning"
    assert "'not one SQS takes'" in forwarded["m-1"]["deduplication_id_ignored"]


def test_a_requeue_carries_on_the_due_time_it_came_with_even_one_this_hop_cannot_take() -> None:
    """The registry knows a copy of its send by the due time it carries (issue 58): a sender's
    clock ahead of the broker's, or a reschedule near the maximum delay, gives a due time
    further from this copy's send than any delay may be; this hop works out its own, and
    the requeue carries the one it came with, else the next hop dropped it as another send's."""
    lim = Limits(max_native_delay_seconds=900, max_attempts=5, max_delay_seconds=7200)
    ahead = T + 7200 * 1000 + 2000  # 2 s beyond the maximum, by the broker's SentTimestamp
    requeue = decide(msg("7200", due_at=ahead), local_now_ms=0, offset_ms=None, lim=lim)
    assert isinstance(requeue, Requeue)
    assert requeue.due_ms == T + 7200 * 1000  # worked out from the delay
    assert requeue.attributes[wire_format.DUE_AT_ATTRIBUTE]["StringValue"] == str(ahead)
