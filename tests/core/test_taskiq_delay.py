"""taskiq's `delay` label → route (core/taskiq_delay.py): never early, the native delay only
within the cycle and never on a FIFO queue, and bad labels refused with what to give; a large
task's pointer (core/taskiq_offload.py) as taskiq-aio-sqs writes it."""

from __future__ import annotations

import math
from datetime import timedelta
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sqsdelay.core import send, taskiq_offload
from sqsdelay.core.taskiq_delay import (
    TaskiqRoute,
    cancellable,
    label_milliseconds,
    taskiq_route,
)
from sqsdelay.errors import InvalidDelay

NATIVE = 900


@pytest.mark.parametrize(
    ("label", "fifo", "expected"),
    [
        (None, False, TaskiqRoute("native", 0, 0)),
        ("", False, TaskiqRoute("native", 0, 0)),
        ("0", True, TaskiqRoute("native", 0, 0)),  # no delay: taskiq-aio-sqs, in its group
        ("2.5", False, TaskiqRoute("native", 2500, 3)),  # taskiq-aio-sqs would send 2
        ("1.4", False, TaskiqRoute("native", 1400, 2)),
        ("900", False, TaskiqRoute("native", 900_000, 900)),
        ("900.001", False, TaskiqRoute("sqsdelay", 900_001, 901)),  # a fraction beyond
        (" 86400 ", False, TaskiqRoute("sqsdelay", 86_400_000, 86_400)),
        (3, True, TaskiqRoute("sqsdelay", 3000, 3)),  # FIFO: no native delay at all
        (2.0005, False, TaskiqRoute("native", 2001, 3)),
        (Decimal("1e-9"), False, TaskiqRoute("native", 1, 1)),
    ],
)
def test_label_to_route(label: Any, fifo: bool, expected: TaskiqRoute) -> None:
    assert taskiq_route(label, max_native_delay=NATIVE, fifo=fifo) == expected


def test_the_lowered_cycle_moves_the_boundary() -> None:
    assert taskiq_route("2", max_native_delay=2, fifo=False).how == "native"
    assert taskiq_route("2.001", max_native_delay=2, fifo=False).how == "sqsdelay"


@pytest.mark.parametrize(
    ("label", "says"),
    [
        ("soon", "is not a number of seconds"),
        ("True", "is not a number of seconds"),  # with_labels(delay=True), serialised
        (True, "is a bool"),
        ([5], "is a list"),
        ("-1", "must not be negative"),
        (-0.001, "must not be negative"),
        ("inf", "is not a finite number"),
        ("NaN", "is not a finite number"),
        ("sNaN", "is not a finite number"),
        ("1e400", "beyond any date"),
        (10**20, "beyond any date"),
    ],
)
def test_a_bad_label_is_refused_with_what_to_give(label: Any, says: str) -> None:
    with pytest.raises(InvalidDelay) as raised:
        taskiq_route(label, max_native_delay=NATIVE, fifo=False)
    assert says in str(raised.value)
    assert "with_labels(delay=" in str(raised.value) or "SQSDELAY_MAX_DELAY_SECONDS" in str(
        raised.value
    )


labels = st.one_of(
    st.integers(min_value=0, max_value=10**9),
    st.floats(min_value=0, max_value=1e9, allow_nan=False),
    st.decimals(min_value=0, max_value=10**9, allow_nan=False, allow_infinity=False),
    st.decimals(min_value=0, max_value=10**9, allow_nan=False, allow_infinity=False).map(str),
    st.floats(min_value=0, max_value=1e9, allow_nan=False).map(str),  # as taskiq sends it
)


@given(label=labels, fifo=st.booleans(), native=st.integers(min_value=0, max_value=900))
def test_whatever_the_label_no_task_is_early_and_the_route_is_the_rule(
    label: Any, fifo: bool, native: int
) -> None:
    route = taskiq_route(label, max_native_delay=native, fifo=fifo)
    exact = Fraction(Decimal(label.strip() if isinstance(label, str) else label))
    assert Fraction(route.delay_ms, 1000) >= exact > Fraction(route.delay_ms - 1, 1000)  # ms, up
    assert route.delay_seconds == math.ceil(Fraction(route.delay_ms, 1000))  # whole s, up
    if route.delay_ms == 0:
        assert route.how == "native"
    elif fifo or route.delay_ms > native * 1000:
        assert route.how == "sqsdelay"
    else:
        assert route.how == "native" and route.delay_seconds <= native


@given(text=st.text(max_size=20))
def test_any_text_is_a_route_or_an_invalid_delay(text: str) -> None:
    try:
        route = taskiq_route(text, max_native_delay=NATIVE, fifo=False)
    except InvalidDelay as exc:
        assert "taskiq's delay label" in str(exc)
    else:
        assert route.delay_ms >= 0
        assert label_milliseconds(text) == route.delay_ms


def test_a_body_is_offloaded_from_taskiq_aio_sqs_s_size_with_its_pointer() -> None:
    from taskiq_aio_sqs import constants

    assert taskiq_offload.MAX_SQS_MESSAGE_SIZE == constants.MAX_SQS_MESSAGE_SIZE
    assert not taskiq_offload.offloaded("x" * (constants.MAX_SQS_MESSAGE_SIZE - 1))
    assert taskiq_offload.offloaded("x" * constants.MAX_SQS_MESSAGE_SIZE)
    mine = {"tenant": {"DataType": "String", "StringValue": "a"}}
    p = taskiq_offload.pointer("big", "t1", mine, unique="k1")
    assert (p.bucket, p.key) == ("big", "t1.k1.json")  # a key per kick
    assert p.body == '{"s3_bucket": "big", "s3_key": "t1.k1.json"}'
    assert p.attributes == {
        **mine,
        "s3_extended_message": {"DataType": "String", "StringValue": "True"},
    }


@given(
    ms=st.integers(min_value=0, max_value=10**7),
    native=st.integers(min_value=1, max_value=900),
    fifo=st.booleans(),
)
def test_a_task_is_cancellable_exactly_when_the_sender_records_it(
    ms: int, native: int, fifo: bool
) -> None:
    """`cancellable` (DelayedSource's unschedule) agrees with the sender's plan: only a
    delay-queue send has a registry record; within the native delay (a FIFO queue: through its
    staging queue) nothing can take it back."""
    limits = send.SendLimits("", 10**9, native, True, "raw", 1_048_576, lambda q: q)
    message = send.Message("x", delay=timedelta(milliseconds=ms), group_id="g" if fifo else None)
    planned = send.plan("orders.fifo" if fifo else "orders", message, limits, now=1.0)
    assert cancellable(ms, max_native_delay=native) == (planned.route == "delay-queue")
