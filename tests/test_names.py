import pytest
from hypothesis import given
from hypothesis import strategies as st

from sqsdelay import limits
from sqsdelay.errors import InvalidQueueName
from sqsdelay.names import (
    delay_queue_name,
    destination_name,
    destination_of_delay_queue,
    error_queue_name,
)

VALID = st.text(alphabet="abcXYZ019_-", min_size=1, max_size=69)


@given(VALID)
def test_a_delay_queue_name_always_fits_80_characters(name: str) -> None:
    delay = delay_queue_name(destination_name(name))
    assert len(delay) <= limits.MAX_QUEUE_NAME_LENGTH
    assert delay.endswith("-delay.fifo")
    assert destination_of_delay_queue(delay) == name


def test_69_characters_is_the_longest_name() -> None:
    assert delay_queue_name("a" * 69) == "a" * 69 + "-delay.fifo"
    with pytest.raises(InvalidQueueName, match="at most 69"):
        destination_name("a" * 70)


def test_prefix_counts_towards_the_limit() -> None:
    with pytest.raises(InvalidQueueName, match="at most 69"):
        destination_name("a" * 60, prefix="p" * 10)


@pytest.mark.parametrize("bad", ["", "has space", "dot.name", "ünï", "x.fifo", "a/b"])
def test_bad_characters_are_refused_not_rewritten(bad: str) -> None:
    with pytest.raises(InvalidQueueName, match="not a valid SQS queue name"):
        destination_name(bad)


def test_error_queue_may_use_all_80_characters() -> None:
    assert error_queue_name("e" * 80) == "e" * 80
    with pytest.raises(InvalidQueueName):
        error_queue_name("e" * 81)


def test_not_a_delay_queue() -> None:
    with pytest.raises(InvalidQueueName, match=r"-delay\.fifo"):
        destination_of_delay_queue("orders.fifo")
