"""core/framework_queues.py: the one check the Celery, Dramatiq and taskiq brokers make."""

from __future__ import annotations

import pytest

from sqsdelay.core.framework_queues import check_no_prefix
from sqsdelay.errors import ConfigError


def test_no_prefix_passes() -> None:
    check_no_prefix("", "Celery", "Celery's SQS names")


@pytest.mark.parametrize("prefix", ["app-", " ", "x"])
def test_a_prefix_is_refused_with_the_frameworks_naming(prefix: str) -> None:
    with pytest.raises(ConfigError) as raised:
        check_no_prefix(prefix, "Dramatiq", "dramatiq-sqs's SQS names (<namespace>_<queue>)")
    text = str(raised.value)
    assert text.startswith("with Dramatiq, queue names are dramatiq-sqs's SQS names")
    assert f"leave SQSDELAY_QUEUE_PREFIX empty (it is {prefix!r})" in text
