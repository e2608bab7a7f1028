"""What can be wrong with a queue's attributes, and its fix (core/queue_checks.py), without
SQS: a queue as the installer creates it has no problem, and each problem's fix, applied,
leaves none."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sqsdelay.core import queue_trios
from sqsdelay.core.queue_checks import check_queue
from sqsdelay.core.queue_trios import QueueConfig, QueueSpec

FIX = "sqsdelay install orders --fix"
configs = st.builds(
    QueueConfig,
    max_native_delay_seconds=st.integers(1, 900),
    delay_queue_retention_seconds=st.integers(345_600, 1_209_600),
    kms_key_id=st.none() | st.just("alias/sqsdelay"),
)


def specs(queue: str) -> list[QueueSpec]:
    return queue_trios.specs([queue_trios.trio(queue, "p-", "error")])


def created(spec: QueueSpec, config: QueueConfig) -> dict[str, str]:
    """The attributes SQS reports for a queue created as the installer creates it."""
    attrs = {"MessageRetentionPeriod": "345600", "DelaySeconds": "0", "FifoQueue": "false"}
    if spec.name.endswith(".fifo"):
        attrs["FifoQueue"] = "true"
    return {**attrs, **queue_trios.expected_attributes(spec, config)}


@given(config=configs, queue=st.sampled_from(["orders", "orders.fifo"]))
def test_a_queue_as_installed_has_no_problem(config: QueueConfig, queue: str) -> None:
    for spec in specs(queue):
        problems = check_queue(spec, created(spec, config), config, FIX)
        assert [p for p in problems if not p.warning] == [], spec


@pytest.mark.parametrize(
    ("broken", "value"),
    [("DelaySeconds", "0"), ("MessageRetentionPeriod", "60"), ("SqsManagedSseEnabled", "false")],
)
def test_a_broken_delay_queue_says_what_is_wrong_and_its_fix_mends_it(
    broken: str, value: str
) -> None:
    config = QueueConfig(900, 345_600, None)
    [spec] = [s for s in specs("orders") if s.role == "delay"]
    attrs = {**created(spec, config), broken: value}
    problems = [p for p in check_queue(spec, attrs, config, FIX) if not p.warning]
    assert problems and all(p.fix == FIX and p.queue == spec.name for p in problems)
    for p in problems:
        attrs |= p.attributes
    assert [p for p in check_queue(spec, attrs, config, FIX) if not p.warning] == []


def test_an_error_queue_that_keeps_failures_briefly_is_only_a_warning() -> None:
    config = QueueConfig(900, 345_600, None)
    [spec] = [s for s in specs("orders") if s.role == "error"]
    [problem] = check_queue(spec, {"MessageRetentionPeriod": "60"}, config, FIX)
    assert problem.warning and problem.attributes == {
        "MessageRetentionPeriod": str(queue_trios.ERROR_QUEUE_RETENTION_SECONDS)
    }


@given(config=configs)
def test_a_staging_queue_keeps_what_the_delay_queue_keeps_or_is_warned_about(
    config: QueueConfig,
) -> None:
    """A pause holds a FIFO destination's forwards in its staging queue as long as it holds
    the delay queue's messages: created with the delay queue's retention; shorter (SQS's
    default 4 days, as before) is a warning whose fix raises it."""
    [spec] = [s for s in specs("orders.fifo") if s.role == "staging"]
    attrs = created(spec, config)
    assert attrs["MessageRetentionPeriod"] == str(config.delay_queue_retention_seconds)
    assert check_queue(spec, attrs, config, FIX) == []
    short = {**attrs, "MessageRetentionPeriod": str(config.delay_queue_retention_seconds - 1)}
    [warning] = check_queue(spec, short, config, FIX)
    assert warning.warning and warning.fix == FIX
    assert "a pause of the destination longer than" in warning.problem
    # It compares with the setting, and says so: the delay queue's own value is not read.
    assert "shorter than SQSDELAY_DELAY_QUEUE_RETENTION_SECONDS" in warning.problem
    assert "delay queue's" not in warning.problem
    assert check_queue(spec, short | warning.attributes, config, FIX) == []
