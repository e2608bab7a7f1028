"""The two senders (aws/sender.py) are the same shell: the same public methods and
arguments, each async where `AsyncSender`'s is; both context managers that close what they
made and leave a given client open; both driven by a given caller."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest

from sqsdelay.aws import sender as sender_module
from sqsdelay.aws.sender import AsyncSender, Sender
from sqsdelay.core.flows import Call, Fault, Reply, adrive
from sqsdelay.core.registry_pages import PageQuery
from sqsdelay.core.send import Message
from sqsdelay.settings import Settings
from tests.support.stub import StubAws

SETTINGS = Settings(region="us-east-1")


def _public(cls: type) -> dict[str, Any]:
    return {n: m for n, m in inspect.getmembers(cls, callable) if not n.startswith("_")}


def test_the_two_senders_have_the_same_methods_and_arguments() -> None:
    sync, async_ = _public(Sender), _public(AsyncSender)
    assert sorted(sync) == sorted(async_)
    assert {"send", "send_batch", "cancel", "scheduled_page", "parked", "close"} <= set(sync)
    for name in sync:
        assert not inspect.iscoroutinefunction(sync[name]), name
        assert inspect.iscoroutinefunction(async_[name]), name
        assert inspect.signature(sync[name]).parameters.keys() == (
            inspect.signature(async_[name]).parameters.keys()
        ), name
    made = inspect.signature(Sender.__init__).parameters.keys()
    assert made == inspect.signature(AsyncSender.__init__).parameters.keys()
    assert hasattr(Sender, "__enter__") and hasattr(AsyncSender, "__aenter__")


class Client:
    """A client as far as closing goes."""

    def __init__(self) -> None:
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


def test_with_closes_what_the_sender_made_and_not_a_given_client(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made = Client()
    monkeypatch.setattr(
        sender_module,
        "sync_clients",
        lambda settings, given: {"sqs": given["sqs"] or made},
    )
    with Sender(SETTINGS) as sender:
        assert sender._client is made
    assert made.closed == 1
    given = Client()
    with Sender(SETTINGS, client=given):
        pass
    assert given.closed == 0


def test_both_senders_are_driven_by_a_given_caller() -> None:
    stub = StubAws()

    async def acall(calls: list[Call]) -> list[Reply]:
        return stub(calls)

    with Sender(SETTINGS, caller=stub) as sender:
        first = sender.send("orders", "one", delay=0)

    async def send() -> str:
        async with AsyncSender(SETTINGS, caller=acall) as sender:
            return (await sender.send("orders", "two", delay=0)).queue

    assert (first.queue, asyncio.run(send())) == ("orders", "orders")
    assert [m["MessageBody"] for m in stub.queues["orders"]] == ["one", "two"]


def test_an_async_sender_with_its_clients_given_makes_none_and_closes_none() -> None:
    given = Client()

    async def use() -> None:
        sender = AsyncSender(SETTINGS, client=given)
        with pytest.raises(RuntimeError, match="async with"):
            await sender.send("orders", "x")
        async with sender:
            assert sender._client is given and sender._session is None
        with pytest.raises(RuntimeError, match="async with"):
            await sender.send("orders", "x")

    asyncio.run(use())
    assert given.closed == 0


class _Listing(StubAws):
    """`StubAws`, answering the registry's and Scheduler's listings as empty."""

    def _do(self, call: Call, rule: Any) -> Any:
        if call.api == "Query":
            return {"Items": [], "Count": 0}
        if call.api == "ListSchedules":
            return {"Schedules": []}
        if call.api == "UpdateItem":  # no record of that id
            return Fault("ConditionalCheckFailedException")
        return super()._do(call, rule)


FULL = Settings(
    region="us-east-1",
    parking="scheduler",
    scheduler_role_arn="arn:aws:iam::123456789012:role/park",
    registry="dynamodb",
    registry_table="reg",
)
# The flow makers the senders had before the flows moved (issue 60 §1), with arguments.
OLD_FLOWS: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {
    "send_flow": (("orders", Message("one", delay=0)), {}),
    "send_batch_flow": (("orders", [Message("two", delay=0)], True), {}),
    "cancel_flow": (("orders", "nope"), {}),
    "cancel_tagged_flow": (("orders", ("team", "a")), {}),
    "reschedule_flow": (("orders", "nope"), {"delay": 60}),
    "scheduled_flow": (("orders",), {}),
    "scheduled_page_flow": ((PageQuery("orders"),), {}),
    "parked_flow": (("orders",), {}),
    "tagged_flow": (("orders", ("team", "a")), {}),
}


@pytest.mark.parametrize("name", sorted(OLD_FLOWS))
def test_the_old_flow_makers_warn_and_give_a_flow_run_accepts(name: str) -> None:
    """Review finding 4: they went with no deprecated alias, and `run(flow)` needs one."""
    stub = _Listing()
    with Sender(FULL, caller=stub) as sender:
        with pytest.warns(DeprecationWarning, match=rf"Sender\.{name} is deprecated") as seen:
            args, kwargs = OLD_FLOWS[name]
            flow = getattr(sender, name)(*args, **kwargs)
        assert seen[0].filename == __file__  # the warning names the caller's line
        before = len(stub.calls)
        result = sender.run(flow)
    assert len(stub.calls) > before and result is not None  # driven by the sender's caller


def test_the_async_senders_old_caller_warns_and_drives_a_flow() -> None:
    stub = StubAws()

    async def acall(calls: list[Call]) -> list[Reply]:
        return stub(calls)

    async def send() -> str:
        async with AsyncSender(SETTINGS, caller=acall) as sender:
            with pytest.warns(DeprecationWarning, match=r"AsyncSender\.caller is deprecated"):
                caller = sender.caller
            with pytest.warns(DeprecationWarning, match=r"AsyncSender\.send_flow"):
                flow = sender.send_flow("orders", Message("three", delay=0))
            return (await adrive(flow, caller)).queue

    assert asyncio.run(send()) == "orders"
    assert [m["MessageBody"] for m in stub.queues["orders"]] == ["three"]
