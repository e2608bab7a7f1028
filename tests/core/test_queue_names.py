"""Queue names follow the NServiceBus SQS transport's rules.

The cases marked "NServiceBus" are the transport's own test cases, from
Particular/NServiceBus.AmazonSQS src/NServiceBus.Transport.SQS.Tests/QueueCacheTests.cs
(commit 090d31e8) and QueueNameGeneratorTests.cs (commit 5437e17c).
"""

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sqsdelay.core import quotas
from sqsdelay.core.queue_names import (
    check_group_id,
    delay_queue_name,
    destination_name,
    destination_of_delay_queue,
    destination_of_staging_queue,
    error_queue_name,
    is_fifo,
    physical_name,
    staging_queue_name,
)
from sqsdelay.errors import InvalidMessage, InvalidQueueName

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


# Names built from the pieces the naming rules look at, so that collisions are likely.
PIECES = st.lists(
    st.sampled_from(["a", "-delay", "-fifo", "-staging", "-fifo-staging"]), min_size=1, max_size=5
)
NAMES = st.builds(
    lambda parts, fifo: "".join(parts) + (".fifo" if fifo else ""), PIECES, st.booleans()
)


def queues_of(destination: str) -> set[str]:
    """Every queue a destination has: itself, its delay queue, a FIFO one's staging queue
    (those its length leaves room for)."""
    own = {destination}
    for name_of in (delay_queue_name, staging_queue_name):
        if name_of is delay_queue_name or is_fifo(destination):
            with contextlib.suppress(InvalidQueueName):
                own.add(name_of(destination))
    return own


@given(NAMES, NAMES)
def test_no_two_destinations_share_a_queue(one: str, other: str) -> None:
    """The FIFO and standard naming rules never collide: a name that would is refused."""
    try:
        a, b = destination_name(one), destination_name(other)
    except InvalidQueueName:
        return
    if a != b:
        assert not queues_of(a) & queues_of(b), (a, b)


@given(NAMES)
def test_no_queue_of_a_destination_can_be_another_destination(name: str) -> None:
    try:
        destination = destination_name(name)
    except InvalidQueueName:
        return
    for queue in queues_of(destination) - {destination}:
        with pytest.raises(InvalidQueueName, match="choose another name"):
            destination_name(queue)


@given(NAMES)
def test_every_queue_of_a_destination_leads_back_to_it(name: str) -> None:
    try:
        destination = destination_name(name)
    except InvalidQueueName as exc:
        assert "choose another name" in str(exc)
        return
    if len(destination) > 69:
        assert queues_of(destination) == {destination}  # delays of 0 s only
        return
    assert destination_of_delay_queue(delay_queue_name(destination)) == destination
    if is_fifo(destination):
        assert delay_queue_name(destination).endswith("-delay-fifo.fifo")
        assert destination_of_staging_queue(staging_queue_name(destination)) == destination


@pytest.mark.parametrize(
    ("name", "whose"),
    [
        ("orders-delay.fifo", "delay queue of the standard destination 'orders'"),
        ("orders-delay-fifo.fifo", "delay queue of the FIFO destination 'orders.fifo'"),
        ("orders-fifo-staging", "staging queue of the FIFO destination 'orders.fifo'"),
    ],
)
def test_a_name_of_the_other_rule_is_refused(name: str, whose: str) -> None:
    with pytest.raises(InvalidQueueName, match=whose):
        destination_name(name)


def test_a_fifo_destination_has_its_own_delay_and_staging_queues() -> None:
    assert delay_queue_name(destination_name("orders.fifo", "p-")) == "p-orders-delay-fifo.fifo"
    assert staging_queue_name("p-orders.fifo") == "p-orders-fifo-staging"
    assert delay_queue_name("p-orders") == "p-orders-delay.fifo"
    with pytest.raises(InvalidQueueName, match="at most 69"):
        delay_queue_name(destination_name("f" * 65 + ".fifo"))
    assert len(delay_queue_name(destination_name("f" * 64 + ".fifo"))) == 80
    with pytest.raises(InvalidQueueName, match="at most 69"):
        staging_queue_name(destination_name("f" * 68 + ".fifo"))


@pytest.mark.parametrize("good", ["g", "order-7", "a" * 128, "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"])
def test_group_ids_sqs_takes(good: str) -> None:
    assert check_group_id(good, "q.fifo") == good


@pytest.mark.parametrize("bad", [None, "", "a" * 129, "with space", "ünï", 7])
def test_group_ids_sqs_refuses_say_what_to_give(bad: object) -> None:
    with pytest.raises(InvalidMessage, match="needs a message group id"):
        check_group_id(bad, "q.fifo")


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
    from sqsdelay.aws.queue_urls import QueueResolver
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
