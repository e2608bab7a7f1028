"""sqsdelay.taskiq's kick without I/O: whatever a producer kicks, the sqsdelay route sends the
body, group and id taskiq-aio-sqs would have sent, and the task reads back what was kicked."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from taskiq_aio_sqs import SQSQueue

from sqsdelay.taskiq import SQSBroker

FIFO = "orders.fifo"


class FakeSender:
    """Stands in for AsyncSender: records each send."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, dict[str, Any]]] = []

    async def send(self, queue: str, body: str, **options: Any) -> None:
        self.sent.append((queue, body, options))


def started_broker() -> tuple[SQSBroker, FakeSender]:
    """A broker as startup leaves it, with its queue URLs known and a fake sender."""
    broker = SQSBroker(
        "orders", endpoint_url="http://127.0.0.1:9", sqsdelay={"max_native_delay_seconds": 2}
    ).with_queues(SQSQueue(name=FIFO, is_fifo=True))
    assert isinstance(broker, SQSBroker)
    broker._queue_urls = {"orders": "http://q/orders", FIFO: f"http://q/{FIFO}"}
    broker._sqs_queue_url = "http://q/orders"
    fake = FakeSender()
    broker._sqsdelay_sender = fake  # type: ignore[assignment]
    return broker, fake


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)


@settings(max_examples=60, deadline=None)
@given(
    args=st.lists(json_values, max_size=3),
    kwargs=st.dictionaries(st.from_regex(r"[a-z_]{1,8}", fullmatch=True), json_values),
    delay=st.decimals(min_value="2.001", max_value=10**8, places=3),
    fifo=st.booleans(),
    group=st.from_regex(r"[A-Za-z0-9_-]{1,20}", fullmatch=True),
)
def test_whatever_is_kicked_the_task_reads_it_back(
    args: list[Any], kwargs: dict[str, Any], delay: Any, fifo: bool, group: str
) -> None:
    broker, fake = started_broker()

    async def task(*_: Any, **__: Any) -> None:
        pass

    decorated = broker.register_task(task, task_name="app.task")
    labels: dict[str, Any] = {"delay": str(delay)}
    if fifo:
        labels |= {"queue": FIFO, "group_id": group}
    kicked = asyncio.run(decorated.kicker().with_labels(**labels).kiq(*args, **kwargs))
    [(queue, body, options)] = fake.sent
    assert queue == (FIFO if fifo else "orders")
    assert options["id"] == kicked.task_id
    assert options["group_id"] == (group if fifo else None)
    assert options["delay"] == timedelta(milliseconds=int(delay * 1000))  # exact, to the ms
    received = broker.formatter.loads(body.encode())
    assert (received.args, received.kwargs) == (args, kwargs)
    assert received.labels["delay"] == str(delay)  # the task sees the labels it was kicked with
