"""Queue names follow the NServiceBus SQS transport's rules.

The cases marked "NServiceBus" are the transport's own test cases, from
Particular/NServiceBus.AmazonSQS src/NServiceBus.Transport.SQS.Tests/QueueCacheTests.cs
(commit 090d31e8) and QueueNameGeneratorTests.cs (commit 5437e17c).
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sqsdelay.core import quotas
from sqsdelay.core.names import (
    delay_queue_name,
    destination_name,
    destination_of_delay_queue,
    error_queue_name,
    physical_name,
)
from sqsdelay.errors import InvalidQueueName

VALID = st.text(alphabet="abcXYZ019_-", min_size=1, max_size=69)
ANY = st.text(alphabet="abcXYZ019_-.!?@$%^&* ", min_size=1, max_size=80)
LONG = "really-" * 15 + "really"  # 111 characters


@given(VALID)
def test_a_delay_queue_name_always_fits_80_characters(name: str) -> None:
    delay = delay_queue_name(destination_name(name))
    assert len(delay) <= quotas.MAX_QUEUE_NAME_LENGTH
    assert delay.endswith("-delay.fifo")
    assert destination_of_delay_queue(delay) == name


@given(ANY, st.sampled_from(["", "PREFIX", "p-"]))
def test_physical_name_is_idempotent_and_valid(name: str, prefix: str) -> None:
    # NServiceBus: QueueNameGeneratorTests.Default_queue_name_generator_is_idempotent
    try:
        once = physical_name(name, prefix)
    except InvalidQueueName:
        return
    assert physical_name(once, prefix) == once
    assert len(once) <= quotas.MAX_QUEUE_NAME_LENGTH


@pytest.mark.parametrize("prefix", ["", "PREFIX"])
def test_longer_than_80_characters_is_refused(prefix: str) -> None:
    # NServiceBus: QueueCacheTests.ThrowsWhenLongerThanEightyChars
    with pytest.raises(InvalidQueueName, match="characters with the prefix"):
        physical_name(prefix + LONG, prefix)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        # NServiceBus: QueueCacheTests.Preserves_FifoQueue
        ("destination-delay.fifo", "destination-delay.fifo"),
        ("destination-delay.blurb", "destination-delay-blurb"),
        ("destination-delay.blurb.fifo", "destination-delay-blurb.fifo"),
        ("destination-delay.fifo.fifo", "destination-delay-fifo.fifo"),
        # NServiceBus: QueueCacheTests.ReplacesNonDigitsWithDash
        ("destination-1", "destination-1"),
        ("destination.1", "destination-1"),
        ("destination!1", "destination-1"),
        ("destination?1", "destination-1"),
        ("destination@1", "destination-1"),
        ("destination$1", "destination-1"),
        ("destination%1", "destination-1"),
        ("destination^1", "destination-1"),
        ("destination&1", "destination-1"),
        ("destination*1", "destination-1"),
        ("destination_1", "destination_1"),
        # the example
        ("Sales.Orders", "Sales-Orders"),
    ],
)
def test_nservicebus_physical_names(name: str, expected: str) -> None:
    assert physical_name(name) == expected
    assert physical_name(expected) == expected


def test_prefix_is_added_only_when_absent() -> None:
    # NServiceBus: QueueCacheTests.GetQueueUrl_caches ("fakeQueueName" -> "PREFIXfakeQueueName")
    assert physical_name("fakeQueueName", "PREFIX") == "PREFIXfakeQueueName"
    assert physical_name("PREFIXfakeQueueName", "PREFIX") == "PREFIXfakeQueueName"
    assert destination_name("p-orders", "p-") == "p-orders"
    assert error_queue_name("error", "p-") == "p-error"


def test_destinations_of_70_to_80_characters_are_for_direct_sends_only() -> None:
    assert destination_name("a" * 80) == "a" * 80
    assert delay_queue_name("a" * 69) == "a" * 69 + "-delay.fifo"
    with pytest.raises(InvalidQueueName, match="at most 69") as exc:
        delay_queue_name(destination_name("a" * 70))
    assert "900 s or less need no delay queue" in str(exc.value)
    with pytest.raises(InvalidQueueName, match="at most 69"):
        delay_queue_name(destination_name("a" * 60, prefix="p" * 10))


@pytest.mark.parametrize("bad", ["", "   ", "ünï", "日本"])
def test_names_sqs_refuses_are_refused_with_the_rule(bad: str) -> None:
    with pytest.raises(InvalidQueueName, match=r"empty|SQS refuses"):
        destination_name(bad)


def test_a_destination_cannot_be_a_fifo_queue() -> None:
    with pytest.raises(InvalidQueueName, match="standard queues"):
        destination_name("x.fifo")


def test_error_queue_may_use_all_80_characters() -> None:
    assert error_queue_name("e" * 80) == "e" * 80
    with pytest.raises(InvalidQueueName):
        error_queue_name("e" * 81)


def test_not_a_delay_queue() -> None:
    with pytest.raises(InvalidQueueName, match=r"-delay\.fifo"):
        destination_of_delay_queue("orders.fifo")
    with pytest.raises(InvalidQueueName, match="not a valid delay queue"):
        destination_of_delay_queue("sales.orders-delay.fifo")


def test_a_rewritten_name_is_said_once() -> None:
    import io
    import json

    from sqsdelay import logs
    from sqsdelay.aws.queues import QueueResolver
    from sqsdelay.settings import Settings

    out = io.StringIO()
    logs.configure("json", "INFO", stream=out)
    resolver = QueueResolver(Settings(queue_prefix="p-"))
    assert resolver.trio("Sales.Orders").delay == "p-Sales-Orders-delay.fifo"
    resolver.trio("Sales.Orders")
    resolver.trio("orders")
    logged = [json.loads(line) for line in out.getvalue().splitlines()]
    rewritten = [e for e in logged if e["event"] == "queue.name_rewritten"]
    assert [(e["level"], e["queue"], e["destination"]) for e in rewritten] == [
        ("warning", "Sales.Orders", "p-Sales-Orders")
    ]
