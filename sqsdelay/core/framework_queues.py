"""The task frameworks' queues (Celery, Dramatiq, taskiq): each integration sends to the SQS
names its framework gives its queues, so sqsdelay adds no prefix of its own. One check for
the three brokers, with the framework's own naming in its message.
"""

from __future__ import annotations

from sqsdelay.errors import ConfigError


def check_no_prefix(prefix: str, framework: str, names: str) -> None:
    """Refuse SQSDELAY_QUEUE_PREFIX with a task framework: the queue names are `names` (the
    framework's SQS names, its own prefix included), and a second prefix would send each
    delayed task to a delay queue no worker of that framework's queue reads."""
    if prefix:
        raise ConfigError(
            f"with {framework}, queue names are {names}: leave SQSDELAY_QUEUE_PREFIX empty "
            f"(it is {prefix!r})"
        )
