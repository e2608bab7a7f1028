"""Calls a flow asks its driver to make, and their answers (no I/O).

A flow is a generator in the manner of httpx's `Auth.auth_flow`: it yields a list of `Call`s,
which the driver makes concurrently, and is sent back the list of `Reply`s in the same order.
What it returns is the flow's result. `drive` and `adrive` are the only loops: the sync
(boto3) and asyncio (aioboto3) callers that make the calls live in `sqsdelay.aws.callers`,
and a test can answer the calls itself, with no server at all.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

T = TypeVar("T")
Service = Literal["sqs", "scheduler", "dynamodb", "clock"]


@dataclass(frozen=True)
class Call:
    """One API call. `queue` names an SQS queue; the caller adds its QueueUrl."""

    service: Service
    api: str  # as in the API reference: "SendMessageBatch"
    params: Mapping[str, Any]
    queue: str | None = None
    timeout: float | None = None  # seconds; None: the client's own timeouts (a long poll)


def pause(seconds: float) -> Call:
    """A pause, made by the driver with its own monotonic sleep: a flow never reads a wall
    clock to wait, so a jump of one cannot shorten the pause."""
    return Call("clock", "Wait", {"seconds": max(0.0, seconds)})


@dataclass(frozen=True)
class Fault:
    """Why a call failed. `answered` is False when no answer came (network, time limit):
    the call may still have taken effect."""

    code: str
    detail: str = ""
    status: int = 0  # HTTP status of the answer; 0 without one
    answered: bool = True
    # DynamoDB's ConditionalCheckFailedException carries the item as it was (asked for with
    # ReturnValuesOnConditionCheckFailure): the registry reads who won from it.
    item: Mapping[str, Any] | None = None

    def is_service_fault(self, codes: frozenset[str]) -> bool:
        """A failure of the service rather than of the request: one of `codes`, any 5xx,
        or no answer at all."""
        return self.code in codes or self.status >= 500 or not self.answered


@dataclass(frozen=True)
class Reply:
    response: Mapping[str, Any] = field(default_factory=dict)
    fault: Fault | None = None


Flow = Generator[list[Call], list[Reply], T]
SyncCall = Callable[[list[Call]], list[Reply]]
AsyncCall = Callable[[list[Call]], Awaitable[list[Reply]]]


def _check(calls: list[Call], replies: list[Reply]) -> list[Reply]:
    if len(replies) != len(calls):
        raise RuntimeError(f"{len(calls)} calls were answered with {len(replies)} replies")
    return replies


def drive(flow: Flow[T], call: SyncCall) -> T:
    """Run a flow to its end, making its calls with a synchronous caller."""
    try:
        calls = next(flow)
        while True:
            calls = flow.send(_check(calls, call(calls)) if calls else [])
    except StopIteration as stop:
        result: T = stop.value
        return result


async def adrive(flow: Flow[T], call: AsyncCall, *, pending: list[Call] | None = None) -> T:
    """As `drive`, with an asyncio caller. `pending`: resume a flow that has already asked
    for these calls (`adrive_until_pause`)."""
    try:
        calls = next(flow) if pending is None else pending
        while True:
            calls = flow.send(_check(calls, await call(calls)) if calls else [])
    except StopIteration as stop:
        result: T = stop.value
        return result


async def adrive_until_pause(flow: Flow[T], call: AsyncCall) -> list[Call] | None:
    """Run a flow until it asks for a `pause`: the calls it asked for, with which `adrive`
    resumes it (so the worker can poll again meanwhile); None when it ended first."""
    try:
        calls = next(flow)
        while not any(c.service == "clock" for c in calls):
            calls = flow.send(_check(calls, await call(calls)) if calls else [])
        return calls
    except StopIteration:
        return None


def gather(flows: list[Flow[T]]) -> Flow[list[T]]:
    """Run flows side by side: each round makes the calls of all of them at once."""
    results: dict[int, T] = {}
    waiting: dict[int, tuple[Flow[T], list[Call]]] = {}

    def advance(i: int, flow: Flow[T], replies: list[Reply] | None) -> None:
        try:
            waiting[i] = (flow, next(flow) if replies is None else flow.send(replies))
        except StopIteration as stop:
            waiting.pop(i, None)
            results[i] = stop.value

    for i, flow in enumerate(flows):
        advance(i, flow, None)
    while waiting:
        spans: dict[int, tuple[int, int]] = {}
        calls: list[Call] = []
        for i, (_, asked) in waiting.items():
            spans[i] = (len(calls), len(calls) + len(asked))
            calls += asked
        replies = yield calls
        for i, (flow, _) in list(waiting.items()):
            start, end = spans[i]
            advance(i, flow, replies[start:end])
    return [results[i] for i in range(len(flows))]
