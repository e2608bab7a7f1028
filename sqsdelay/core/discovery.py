"""Which delay queues a fleet drains: every `<prefix><destination>-delay.fifo` (and FIFO
destination's `<prefix><base>-delay-fifo.fifo`) that SQS lists under the queue prefix
(pure). `SQSDELAY_QUEUES=*` or `sqsdelay worker --all`."""

from collections.abc import Iterable, Sequence

from sqsdelay.core.queue_trios import DELAY_QUEUE_ENDINGS

ALL = "*"


def is_all(queues: Sequence[str]) -> bool:
    return list(queues) == [ALL]


def delay_queues(listed: Iterable[str], prefix: str) -> list[str]:
    """The delay queues among ListQueues' URLs (or names): the prefix's, with a destination
    name before the suffix. Sorted, so that a refresh logs in a stable order."""
    names = {url.rstrip("/").rsplit("/", 1)[-1] for url in listed}
    return sorted(
        n
        for n in names
        for suffix, _ in DELAY_QUEUE_ENDINGS
        if n.startswith(prefix) and n.endswith(suffix) and len(n) > len(prefix + suffix)
    )


def changes(current: Iterable[str], found: Iterable[str]) -> tuple[list[str], list[str]]:
    """(added, removed) delay queues, each sorted."""
    now, then = set(found), set(current)
    return sorted(now - then), sorted(then - now)
