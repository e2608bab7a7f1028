"""A model of the whole way (issue 58, section 2), checked by hypothesis's stateful testing:
messages sent with any delay, with a key or without, again with a used key, cancelled,
rescheduled, sent now, carried by the worker, parked and fired, handled by a consumer
(boto3's, or Lambda's through `handle_batch`) that succeeds, fails, retries later or gives
up (with or without the guard), refused by a destination and dead-lettered by the worker,
and replayed, all of the error queue or a selection; with calls failing, answers lost,
flows dying half-way and schedules firing twice; under a configuration drawn for each
example (registry, guard, parking: on or off; standard, fair-queue or FIFO destination;
raw or NServiceBus wire format; the ECS worker's step or the Lambda handler). Every flow
is production's, driven over moto in this process on a virtual clock
(tests/support/model_world.py).

Invariants, after every step: nothing is handed to its consumer before it is due (the
due time of its latest acknowledged reschedule; a replay, not before the message it
replays); an acknowledged cancel is never delivered, nor the body of any send of that id
before it that was not handed over yet; every delivery is in a group (tenant) it was sent
in; with the guard, a handler completes once per delivery (message id, attempt, replay)
unless a fault hit a consumer's flow; a duplicate delivery only where a met fault explains
it; a replay of a selection moves only the selected, and every one it could see. At the
end, with the faults gone and the destination taking everything: every message sent and
not cancelled was handled, after one replay of the error queue at most.

`make test` runs it small (MODEL_EXAMPLES, default 30: about 30 s on a quiet
machine, as the drawn sequences' lengths vary); `make test-model` 20 times as many.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from sqsdelay.aws.retry_later import RetryLater, RetryPolicy, handle_batch
from sqsdelay.aws.sender import Message
from sqsdelay.core import consumer_message, retries, wire_format
from sqsdelay.core.received import from_boto
from sqsdelay.core.replay import RECEIVE_VISIBILITY_SECONDS, replay_errors
from sqsdelay.core.retries import Backoff
from sqsdelay.core.retry_flows import backoff_flow, retry_flow
from sqsdelay.errors import GuardInProgress, SqsDelayError
from tests.support.lambda_events import lambda_record
from tests.support.model_world import ACCOUNT, Config, Crashed, VirtualClock, World, moto_on

ROOT = Path(__file__).resolve().parents[2]
# `make test-model`'s size. Not SQSDELAY_ names: tests/conftest.py drops every one of those
# (a developer's settings), and so dropped these too: make test-model ran make test's 30
# examples, the same ones, until 2026-11-28.
EXAMPLES = int(os.environ.get("MODEL_EXAMPLES", "30"))
STEPS = int(os.environ.get("MODEL_STEPS", "30"))
DELAYS = [0, 4, 10, 11, 25, 47, 95]  # direct (<= the 10 s cycle), one hop, several hops
BIG = 1500  # bytes: over the refusing destination's maximum
SMALL_MAXIMUM = 1024
FAULT_APIS = [
    "SendMessage",
    "SendMessageBatch",
    "DeleteMessage",
    "DeleteMessageBatch",
    "ChangeMessageVisibilityBatch",
    "ReceiveMessage",
    "BatchGetItem",
    "UpdateItem",
    "PutItem",
    "DeleteItem",
]
GIVE_UP = Backoff(base_seconds=2, cap_seconds=8, max_attempts=0)


@dataclass
class Sent:
    due_ms: int
    big: bool


@dataclass
class Model:
    """What each message's fate must be."""

    sent: dict[str, Sent] = field(default_factory=dict)  # acknowledged sends
    maybe: set[str] = field(default_factory=set)  # sends that failed or died: either way
    cancelled: set[str] = field(default_factory=set)  # acknowledged cancels
    # The earliest a delivery may come, by (id, attempt, replay): a send's or a retry's due.
    due: dict[tuple[str, str | None, str | None], int] = field(default_factory=dict)
    deliveries: Counter[tuple[str, str | None, str | None]] = field(default_factory=Counter)
    runs: Counter[tuple[str, str | None, str | None]] = field(default_factory=Counter)  # done
    left: Counter[tuple[str, str | None, str | None]] = field(default_factory=Counter)
    handled: set[str] = field(default_factory=set)
    consumer_faulted: bool = False
    # The copies a cancel can stop (sent through the delay queue), by id: (attempt, body);
    # and those an acknowledged cancel stopped, (id, attempt, body), never to be delivered.
    bodies: dict[str, set[tuple[str | None, str]]] = field(default_factory=dict)
    dead: set[tuple[str, str | None, str]] = field(default_factory=set)
    # Deliveries with a copy sent straight to the destination: no reschedule moves those.
    straight: set[tuple[str, str | None, str | None]] = field(default_factory=set)
    groups: dict[str, set[str]] = field(default_factory=dict)  # FIFO groups, fair tenants
    copies: Counter[tuple[str, str | None, str | None]] = field(default_factory=Counter)


def _key(message: dict[str, Any]) -> tuple[str, str | None, str | None]:
    attrs = message.get("MessageAttributes", {})

    def value(name: str) -> str | None:
        v = attrs.get(name)
        return v.get("StringValue") if v else None

    ident = value(wire_format.MESSAGE_ID_ATTRIBUTE)
    assert ident is not None, f"a delivery without sqsdelay's id: {sorted(attrs)}"
    return ident, value(wire_format.ATTEMPT_ATTRIBUTE), value(wire_format.REPLAY_ATTRIBUTE)


def _body(message: dict[str, Any]) -> str:
    """The body as sent: in NServiceBus's envelope, its `Body` (base64)."""
    body: str = message["Body"]
    if body.startswith("{"):
        with contextlib.suppress(ValueError, KeyError, TypeError):
            return base64.b64decode(json.loads(body)["Body"]).decode()
    return body


class WholeWay(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = VirtualClock()
        self._moto = moto_on(self.clock)
        self._moto.__enter__()
        self.world: World | None = None
        self.model = Model()
        self.count = 0
        self.refusing = False

    @property
    def w(self) -> World:
        assert self.world is not None
        return self.world

    @initialize(
        registry=st.booleans(),
        guard=st.booleans(),
        fifo=st.booleans(),
        lambda_driver=st.booleans(),
        parking=st.booleans(),
        nservicebus=st.booleans(),
        fair=st.booleans(),
    )
    def deploy(
        self,
        registry: bool,
        guard: bool,
        fifo: bool,
        lambda_driver: bool = False,
        parking: bool = False,
        nservicebus: bool = False,
        fair: bool = False,
    ) -> None:
        config = Config(
            registry, guard, fifo, lambda_driver, parking, nservicebus, fair and not fifo
        )
        self.world = World(config, self.clock)

    # -- the producer's side -------------------------------------------------------------

    @rule(delay=st.sampled_from(DELAYS), big=st.booleans(), keyed=st.booleans())
    def send(self, delay: int, big: bool, keyed: bool = True) -> None:
        """A send with the model's id, or (registry on, `keyed` False) with none: the sender
        draws one and answers it."""
        self.count += 1
        ident = f"k{self.count}"
        self._send(ident if keyed or not self.w.config.registry else None, delay, big)

    @precondition(lambda self: self.world is not None and self.w.config.registry)
    @rule(data=st.data(), delay=st.sampled_from(DELAYS))
    def send_again(self, data: st.DataObject, delay: int) -> None:
        """A send with the key of an earlier one: a duplicate while that one is scheduled
        (nothing sent), a new message of that id after it was handed over or cancelled."""
        if self.model.sent:
            self.count += 1
            self._send(data.draw(st.sampled_from(sorted(self.model.sent))), delay, False)

    def _send(self, ident: str | None, delay: int, big: bool) -> None:
        body = (f"{self.count} " + "x" * BIG) if big else f"body {self.count}"
        options: dict[str, Any] = {"delay": delay, "id": ident}
        if self.w.config.fifo:
            options["group_id"] = f"g{self.count % 2}"
        elif self.w.config.fair:
            options["group_id"] = f"tenant{self.count % 2}"
        if self.w.config.nservicebus:
            options["message_type"] = "Sales.OrderPlaced, Sales"
        now_ms = int(self.clock() * 1000)
        due = now_ms + delay * 1000
        if ident is not None:
            self._past_cancel(ident)
        try:
            result = self.w.run(
                self.w.sender.flows.send_flow(self.w.queue, Message(body, **options))
            )
        except (SqsDelayError, Crashed):
            if ident is not None:  # the user sees the failure; it may have gone out
                self.model.maybe.add(ident)
                self._may_come(ident, delay, body, options.get("group_id"))
            return
        if result.duplicate:  # the registry holds this id scheduled: nothing was sent
            return
        ident = result.message_id
        self.model.copies[(ident, None, None)] += 1
        self.model.cancelled.discard(ident)  # a new message of this id
        self.model.handled.discard(ident)  # it is handled again (a guard skips it: done)
        self.model.sent[ident] = Sent(due, big)
        self._may_come(ident, delay, body, options.get("group_id"))

    def _past_cancel(self, ident: str) -> None:
        """Before a send of a used id, which writes a new record (a new generation of the
        id): what was sent with it before is out of a cancel's reach once its record is no
        longer scheduled (handed over: in the destination, or a FIFO one's staging queue,
        and owed; without the registry, its schedule fired). A cancel that answers
        `cancelled` after the send stops the new generation, not those (docs/
        using-the-registry.md: once handed over, the id may be used again)."""
        if ident in self.model.bodies and not self.w.cancellable(ident):
            del self.model.bodies[ident]

    def _may_come(self, ident: str, delay: int, body: str, group: str | None) -> None:
        key = (ident, None, None)
        due = int(self.clock() * 1000) + delay * 1000
        self.model.due[key] = min(due, self.model.due.get(key, due))
        if delay > World.CYCLE:  # not sent straight: a cancel can stop it
            self.model.bodies.setdefault(ident, set()).add((None, body))
        else:
            self.model.straight.add(key)
        if group is not None:
            self.model.groups.setdefault(ident, set()).add(group)

    @precondition(lambda self: self.world is not None and _findable(self.w))
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        if not self.model.sent:
            return
        ident = data.draw(st.sampled_from(sorted(self.model.sent)))
        try:
            outcome = self.w.run(self.w.sender.scheduled_flows.cancel_flow(self.w.queue, ident))
        except (SqsDelayError, Crashed):
            return
        if outcome == "cancelled":
            self.model.cancelled.add(ident)
            # What was sent with this id before is never delivered, whatever is sent after.
            self.model.dead |= {(ident, a, b) for a, b in self.model.bodies.pop(ident, set())}

    @precondition(lambda self: self.world is not None and _findable(self.w))
    @rule(data=st.data(), delay=st.sampled_from(DELAYS))
    def reschedule(self, data: st.DataObject, delay: int) -> None:
        self._reschedule(data, delay)

    @precondition(lambda self: self.world is not None and _findable(self.w))
    @rule(data=st.data())
    def send_now(self, data: st.DataObject) -> None:
        """The console's "send now": a reschedule to now."""
        self._reschedule(data, 0)

    def _reschedule(self, data: st.DataObject, delay: int) -> None:
        """The record's due time moved: a copy not yet delivered comes at the new due time,
        not before. Unacknowledged, it may have moved: the earlier of the two bounds it."""
        if not self.model.sent:
            return
        ident = data.draw(st.sampled_from(sorted(self.model.sent)))
        due = int(self.clock() * 1000) + delay * 1000
        waiting = [
            k
            for k in self.model.due
            if k[0] == ident and not self.model.deliveries[k] and k not in self.model.straight
        ]
        try:
            flow = self.w.sender.scheduled_flows.reschedule_flow(self.w.queue, ident, delay=delay)
            outcome, due = self.w.run(flow)
        except (SqsDelayError, Crashed):
            for k in waiting:
                self.model.due[k] = min(self.model.due[k], due)
            return
        if outcome == "rescheduled":
            for k in waiting:
                self.model.due[k] = due

    # -- time and the worker ---------------------------------------------------------------

    @rule(seconds=st.sampled_from([1, 5, 10, 31, 120]))
    def tick(self, seconds: int) -> None:
        self.clock.advance(seconds)

    @rule(seconds=st.sampled_from([0, 20, 60]))
    def worker(self, seconds: int) -> None:
        """The worker running for a while: what is visible, then every 5 s of it."""
        end = self.clock() + seconds
        while True:
            try:
                for _ in range(5):
                    if self.w.worker_step() is None:
                        break
            except Crashed:
                pass  # what it held comes back after its visibility timeout
            if self.clock() >= end:
                return
            self.clock.advance(5)

    # -- the consumer's side -------------------------------------------------------------

    @rule(action=st.sampled_from(["succeed", "raise", "retry", "give-up"]), wait=st.integers(0, 40))
    def consume(self, action: str, wait: int) -> None:
        got = self.w.receive("destination", 1, World.CONSUMER_VISIBILITY)
        for message in got:
            self._deliver(message, action, wait)

    def _arrived(self, message: dict[str, Any]) -> tuple[str, str | None, str | None]:
        """A delivery to the consumer, checked: not early, not cancelled."""
        key = _key(message)
        now_ms = int(self.clock() * 1000)
        self.model.deliveries[key] += 1
        due = self.model.due.get(key)
        if due is None and key[2] is not None:
            # A replay: a new delivery, but never before the message it replays was due
            # (dead-lettered at a hop, it waits out its record's due time).
            due = self.model.due.get((key[0], key[1], None))
        assert due is None or now_ms >= due, f"{key} delivered {due - now_ms} ms early"
        assert (key[0], key[1], _body(message)) not in self.model.dead, (
            f"{key} delivered after its cancel"
        )
        self._past_cancel(key[0])  # a consumer's retry of it is a send of its id
        groups = self.model.groups.get(key[0])
        if groups:  # its FIFO group, or its tenant, on every delivery
            got = message.get("Attributes", {}).get("MessageGroupId")
            assert got in groups, f"{key} delivered in group {got!r}, sent in {groups}"
        return key

    @rule(
        actions=st.lists(
            st.sampled_from(["succeed", "raise", "retry", "give-up"]), min_size=1, max_size=3
        ),
        wait=st.integers(0, 40),
    )
    def consume_batch(self, actions: list[str], wait: int) -> None:
        """A Lambda consumer on `handle_batch` (partial-batch responses): `retry` raises
        `RetryLater`, `give-up` calls `RetryPolicy` (which gives up at once) and returns;
        Lambda then deletes every record not reported failed."""
        got = self.w.receive("destination", len(actions), World.CONSUMER_VISIBILITY)
        if not got:
            return
        now_ms = int(self.clock() * 1000)
        arn = f"arn:aws:sqs:us-east-1:{ACCOUNT}:{self.w.trio.destination}"
        keys = {m["MessageId"]: self._arrived(m) for m in got}
        todo = dict(zip((m["MessageId"] for m in got), actions, strict=False))
        met = len(self.w.faults.met)
        retried: set[str] = set()  # sqs ids whose handler asked for a retry

        def inner(record: dict[str, Any]) -> None:
            ident = record["messageId"]
            action = todo[ident]
            if action == "raise":
                raise RuntimeError("the handler failed")
            if action == "retry":
                retried.add(ident)
                raise RetryLater(wait)
            if action == "give-up":
                policy = RetryPolicy(GIVE_UP, draw=lambda: 0.5)
                policy.retry(record, "gave up", sender=self.w.sender)
            self.model.runs[keys[ident]] += 1
            self.model.handled.add(keys[ident][0])

        def handler(record: dict[str, Any]) -> None:
            if self.w.guard is None:
                inner(record)
                return
            outcome = self.w.guard.run(record, inner)
            if not outcome.ran:  # a copy ran it: done
                self.model.handled.add(keys[record["messageId"]][0])

        try:
            answer = handle_batch(
                {"Records": [lambda_record(m, arn) for m in got]}, handler, sender=self.w.sender
            )
            failed = {f["itemIdentifier"] for f in answer["batchItemFailures"]}
            deleted = self.w.lambda_deletes(
                self.w.trio.destination, [m for m in got if m["MessageId"] not in failed]
            )
        except Crashed:  # the function died: Lambda deletes nothing
            deleted = set()
        for m in got:
            key = keys[m["MessageId"]]
            if m["MessageId"] in retried:  # whatever went out is due no earlier than this
                attempt = retries.attempt_of(from_boto(m).attributes) + 1
                later = (key[0], str(attempt), key[2])
                self.model.due[later] = min(now_ms + wait * 1000, self.model.due.get(later, 2**62))
                self._retry_copy(key[0], str(attempt), m, wait)
            if m["MessageId"] not in deleted:
                self.model.left[key] += 1
        if len(self.w.faults.met) > met:
            self.model.consumer_faulted = True

    def _retry_copy(self, ident: str, attempt: str, message: dict[str, Any], wait: int) -> None:
        """A retry through the delay queue is a copy a cancel can stop."""
        if wait > World.CYCLE:
            self.model.bodies.setdefault(ident, set()).add((attempt, _body(message)))
        else:
            self.model.straight.add((ident, attempt, _key(message)[2]))

    def _deliver(self, message: dict[str, Any], action: str, wait: int) -> None:
        key = self._arrived(message)
        now_ms = int(self.clock() * 1000)
        incoming = consumer_message.read(message, self.w.urls["destination"])
        met = len(self.w.faults.met)

        def handler(_: object) -> None:
            if action == "raise":  # a failed run is released: the next copy runs again
                raise RuntimeError("the handler failed")
            self.model.runs[key] += 1

        finished = False  # deleted, retried or dead-lettered: it does not come back
        try:
            if self.w.guard is not None:
                outcome = _guarded(self.w, message, handler)
            else:
                handler(message)
                outcome = True
            if outcome is False:
                finished = True  # a copy had completed: deleted
                self.model.handled.add(key[0])
            elif outcome:
                if action == "succeed":
                    self.model.handled.add(key[0])
                    self.w.sqs.delete_message(
                        QueueUrl=self.w.urls["destination"], ReceiptHandle=message["ReceiptHandle"]
                    )
                elif action == "retry":
                    retried = self.w.run(
                        retry_flow(self.w.sender.flows, incoming, delay=wait, at=None)
                    )
                    self.model.due[(key[0], str(retried.attempt), key[2])] = now_ms + wait * 1000
                    self._retry_copy(key[0], str(retried.attempt), message, wait)
                elif action == "give-up":
                    self.w.run(backoff_flow(self.w.sender.flows, incoming, GIVE_UP, 0.5, "gave up"))
                finished = True
        except RuntimeError:
            pass  # the handler failed: not deleted, it comes back after its visibility
        except (SqsDelayError, Crashed):
            pass  # the consumer's call failed: the message comes back
        if not finished:
            self.model.left[key] += 1
        if len(self.w.faults.met) > met:
            self.model.consumer_faulted = True

    # -- the operator's side -------------------------------------------------------------

    @rule()
    def refuse_big_messages(self) -> None:
        """The destination's maximum size lowered: hand-overs of big messages are refused,
        and the worker dead-letters them after its attempts."""
        self._maximum(SMALL_MAXIMUM)
        self.refusing = True

    @rule()
    def take_big_messages(self) -> None:
        self._maximum(262_144)
        self.refusing = False

    def _maximum(self, size: int) -> None:
        self.w.sqs.set_queue_attributes(
            QueueUrl=self.w.urls["destination"], Attributes={"MaximumMessageSize": str(size)}
        )

    @rule()
    def replay(self) -> None:
        with contextlib.suppress(SqsDelayError, Crashed):
            self.w.run(replay_errors(self.w.trio.error, self.w.trio.delay))

    @rule(data=st.data())
    def replay_selected(self, data: st.DataObject) -> None:
        """The console's "replay selected": some of the error queue's messages, by id (one
        that is not there among them, as a page listed before a replay elsewhere)."""
        ids = self.w.error_ids()
        chosen = data.draw(st.lists(st.sampled_from([*ids, "gone"]), min_size=1, unique=True))
        visible = set(self.w.error_ids(visible=True)) & set(chosen)
        met = len(self.w.faults.met)
        try:
            result = self.w.run(
                replay_errors(
                    self.w.trio.error,
                    self.w.trio.delay,
                    limit=len(chosen),
                    only=frozenset(chosen),
                )
            )
        except (SqsDelayError, Crashed):
            return
        acted = set(result.replayed) | set(result.skipped) | set(result.failed)
        assert set(result.replayed) <= set(chosen), f"replayed unselected: {result}"
        if len(self.w.faults.met) == met:  # every selected one it could see, acted on
            assert visible <= acted, f"selected {sorted(visible - acted)} not found: {result}"

    # -- faults ----------------------------------------------------------------------------

    @rule(api=st.sampled_from(FAULT_APIS), kind=st.sampled_from(["fail", "lose"]))
    def fault(self, api: str, kind: str) -> None:
        self.w.faults.plan[api] = kind

    @precondition(lambda self: self.world is not None and self.w.config.parking)
    @rule()
    def scheduler_fires_twice(self) -> None:
        """Scheduler invokes at least once: the next firing sends its input twice."""
        self.w.fire_twice = True

    @rule(rounds=st.integers(0, 4))
    def crash_next_flow(self, rounds: int) -> None:
        self.w.faults.crash_after = rounds

    # -- invariants ------------------------------------------------------------------------

    @invariant()
    def a_guarded_handler_runs_once_per_delivery(self) -> None:
        if self.world is None or self.w.guard is None or self.model.consumer_faulted:
            return
        twice = {k: n for k, n in self.model.runs.items() if n > 1}
        assert not twice, f"guarded handler ran more than once: {twice}"

    @invariant()
    def a_duplicate_only_where_a_fault_explains_it(self) -> None:
        """Per (id, attempt, replay token): a replay of one dead letter twice is the same
        delivery. What explains a second copy: a lost answer (the call was done), a failed
        delete (the message comes back), a process that died between two calls. Failed
        sends, receives and registry reads, and a schedule fired twice, explain none."""
        if self.world is None or any(_explains_a_copy(*met) for met in self.w.faults.met):
            return
        # A delivery its consumer left (it raised, or another run held it) comes back; a
        # send of a used key after its hand-over is a copy of its own.
        twice = {
            k: n
            for k, n in self.model.deliveries.items()
            if n - self.model.left[k] > max(1, self.model.copies[k])
        }
        assert not twice, f"delivered twice, no fault explains it: {twice}"

    def teardown(self) -> None:
        try:
            if self.world is not None:
                self._settle()
        finally:
            self._moto.__exit__(None, None, None)

    def _settle(self) -> None:
        """The faults gone and the destination taking everything: drain, replay the error
        queue once, drain again; then every message sent and not cancelled was handled."""
        self.w.faults.plan.clear()
        self.w.faults.crash_after = None
        self._maximum(262_144)
        self._drain()
        # What an earlier scan held and could not release (a faulted ChangeMessageVisibility)
        # is back once its receive's visibility ran out: an operator's replay-errors run then.
        self.clock.advance(RECEIVE_VISIBILITY_SECONDS + 1)
        self.w.run(replay_errors(self.w.trio.error, self.w.trio.delay))
        self._drain()
        lost = set(self.model.sent) - self.model.cancelled - self.model.handled
        assert not lost, (
            f"never handled: {sorted(lost)}; queues {self.w.counts()}; faults met "
            f"{self.w.faults.met}"
        )
        left = self.w.counts()
        assert not any(left.values()), left

    def _drain(self) -> None:
        horizon = self.clock() + max(DELAYS) + 40 * 8 + 600  # retries' waits, visibilities
        while self.clock() < horizon:
            moved = False
            while self.w.worker_step() is not None:
                moved = True
            while got := self.w.receive("destination", 10, World.CONSUMER_VISIBILITY):
                moved = True
                for message in got:
                    self._deliver(message, "succeed", 0)
            if moved:
                continue
            # The error queue waits for the replay that follows; a parked message, for its
            # schedule to fire.
            busy = any(n for role, n in self.w.counts().items() if role != "error")
            if not busy and not self.w.schedules():
                return
            self.clock.advance(15)


def _explains_a_copy(api: str, kind: str, _: str | None) -> bool:
    return kind == "lose" or api == "crash" or api.startswith("Delete")


def _findable(world: World) -> bool:
    """Cancel and reschedule find a message by its record, or by its schedule when parked."""
    return world.config.registry or world.config.parking


def _guarded(world: World, message: dict[str, Any], handler: Any) -> bool | None:
    """The guard's run: True when the handler ran and returned now, False when a copy ran it
    (the message is then deleted, as a guarded consumer does), None when another run holds
    it (left to come back)."""
    assert world.guard is not None
    try:
        outcome = world.guard.run(message, handler, queue_url=world.urls["destination"])
    except GuardInProgress:
        return None
    if not outcome.ran:
        world.sqs.delete_message(
            QueueUrl=world.urls["destination"], ReceiptHandle=message["ReceiptHandle"]
        )
        return False
    return True


def run_model(examples: int, steps: int) -> None:
    print(f"the model: {examples} examples of up to {steps} steps")
    run_state_machine_as_test(
        WholeWay,
        settings=settings(
            max_examples=examples,
            stateful_step_count=steps,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            database=None,
            # `make test` runs the same sequences every time (a suite that fails at random is
            # a failing suite); `make test-model`, which sets the size, draws new ones.
            derandomize="MODEL_EXAMPLES" not in os.environ,
        ),
    )


def _in_a_process_of_its_own(call: str) -> None:
    """Run `call` (code of this module) in a new Python process: moto in-process shares its
    backends with, and patches the clock of, whatever else the process holds, and a pytest
    worker holds the suite's emulator (a moto server thread, whose SQS the emulator mends to
    read the wall clock) and its queues."""
    code = f"from tests.aws.test_whole_way import *; {call}"
    done = subprocess.run(
        # At nice 10, as the suite's Spark files: one core's worth of CPU-bound work for up
        # to a minute, beside the timing tests of the worker (tests/conftest.py).
        ["nice", "-n", "10", sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, "SQSDELAY_LOG_LEVEL": "error"},
        capture_output=True,
        text=True,
        timeout=3600,
    )
    # The falsifying sequence hypothesis prints is at the end of stderr.
    assert done.returncode == 0, done.stderr[-12_000:]
    print(done.stdout[-2000:])  # its size, for make test-model's summary


@pytest.mark.model
def test_the_whole_way_holds_under_every_combination() -> None:
    _in_a_process_of_its_own(f"run_model({EXAMPLES}, {STEPS})")


# -- what the machine found, kept as plain regression tests ---------------------------------


@pytest.mark.parametrize("registry", [False, True])
def test_a_forward_its_fifo_destination_refused_is_replayed(registry: bool) -> None:
    """Found by the machine: a FIFO destination refuses the forward from its staging queue
    (here: too big), the worker dead-letters it from the staging queue, and replay-errors
    skipped it for ever ("belongs to '...-fifo-staging'", and its hand-over had left no
    delay to restore): the documented recovery could not bring it back."""
    _in_a_process_of_its_own(f"refused_forward_is_replayed({registry})")


def refused_forward_is_replayed(registry: bool) -> None:
    machine = WholeWay()
    machine.deploy(registry=registry, guard=False, fifo=True)
    machine.refuse_big_messages()
    machine.send(delay=15, big=True)
    for _ in range(30):
        machine.tick(5)
        machine.worker(0)
    assert machine.w.counts()["error"] == 1
    machine.teardown()  # the destination takes it again, one replay, then all handled


@dataclass
class _Drawn:
    """What a rule's `data.draw` gives, in a plain test: these values, in order."""

    values: list[Any]

    def draw(self, _: object) -> Any:
        return self.values.pop(0)


@pytest.mark.parametrize("fifo", [False, True])
def test_a_copy_handed_over_before_its_id_was_used_again_is_not_cancelled(fifo: bool) -> None:
    """Found by `make test-model` (FIFO, registry, the Lambda driver): a message is handed
    over (its record `handed-over`: in the destination, or a FIFO one's staging queue); a
    send with its id is then a new message, sent now, and a cancel answers `cancelled` for
    that one. The first copy was owed since its hand-over (a cancel then answered `too-late`),
    and is delivered; the model counted it cancelled, as a copy in the delay queue, and
    failed with "delivered after its cancel"."""
    _in_a_process_of_its_own(f"handed_over_then_id_used_again({fifo})")


def handed_over_then_id_used_again(fifo: bool) -> None:
    machine = WholeWay()
    machine.deploy(registry=True, guard=False, fifo=fifo, lambda_driver=True)
    machine.send(delay=47, big=False)
    for _ in range(20):  # until its hand-over (due at 47 s: within a cycle of it)
        if not machine.w.cancellable("k1"):
            break
        machine.tick(5)
        machine.worker(0)
    assert machine.w.counts()["staging" if fifo else "destination"] == 1
    machine.send_again(_Drawn(["k1"]), delay=25)
    machine.send_now(_Drawn(["k1"]))
    machine.cancel(_Drawn(["k1"]))
    assert machine.model.cancelled == {"k1"}
    machine.teardown()  # the first copy delivered, the second never
    assert machine.model.deliveries[("k1", None, None)] == 1


def test_a_send_at_once_and_a_send_now_due_at_one_millisecond_both_arrive() -> None:
    """Found by `make test-model MODEL_EXAMPLES=300` (FIFO, registry, parking, guard): an id
    scheduled through the delay queue is sent again at once (a direct send into the FIFO
    destination, outside the registry), then its scheduled copy is sent now, due at the
    same millisecond; the consumer asks for a retry of the first (nothing sent: the id is
    scheduled). Both sends had the forward key of (id, due), so the staging queue's forward
    was dropped by SQS inside its five minutes, the record said delivered, and the id was
    never handled. The hand-over now carries a key of its registry claim."""
    _in_a_process_of_its_own("send_at_once_and_send_now_due_together()")


def send_at_once_and_send_now_due_together() -> None:
    machine = WholeWay()
    machine.deploy(registry=True, guard=False, fifo=True)
    machine.send(delay=95, big=False, keyed=False)
    ident = f"{1:032d}"  # the model's first drawn id
    assert ident in machine.model.sent
    machine.send_again(_Drawn([ident]), delay=0)
    machine.send_now(_Drawn([ident]))
    machine.consume_batch(actions=["retry"], wait=30)
    machine.teardown()  # "never handled" before the fix
    assert machine.model.deliveries[(ident, None, None)] == 2


@pytest.mark.parametrize("fifo", [False, True])
def test_a_cancelled_copy_is_not_delivered_in_place_of_a_new_send_of_its_id(fifo: bool) -> None:
    """Found by `make test-model MODEL_EXAMPLES=300` (registry, guard, fair queues): a message
    is cancelled while its copy is in the delay queue, and its id is sent again. The copy met
    the new send's record (`scheduled`), claimed it and was delivered with the cancelled
    body; the new send's copy then found the record handed over and was dropped. Each copy
    now carries its send's due time, which the record knows (`Record.of_generation`)."""
    _in_a_process_of_its_own(f"cancelled_then_id_sent_again({fifo})")


def cancelled_then_id_sent_again(fifo: bool) -> None:
    machine = WholeWay()
    machine.deploy(registry=True, guard=False, fifo=fifo)
    machine.send(delay=25, big=False, keyed=True)
    machine.cancel(_Drawn(["k1"]))
    assert machine.model.cancelled == {"k1"}
    machine.send_again(_Drawn(["k1"]), delay=95)
    machine.teardown()  # "delivered after its cancel" before the fix
    assert machine.model.deliveries[("k1", None, None)] == 1


def test_a_cancelled_send_and_a_new_one_due_at_one_millisecond_are_told_apart() -> None:
    """As above, with the new send due at the very millisecond of the cancelled one (the
    model's clock stands still; in production, one `at=` for both): the registry moves the
    new send a millisecond on (`registry.put` answers `due-taken`)."""
    _in_a_process_of_its_own("cancelled_then_id_sent_again_due_together()")


def cancelled_then_id_sent_again_due_together() -> None:
    machine = WholeWay()
    machine.deploy(registry=True, guard=False, fifo=False)
    machine.send(delay=25, big=False, keyed=True)
    machine.cancel(_Drawn(["k1"]))
    machine.send_again(_Drawn(["k1"]), delay=25)
    machine.teardown()
    assert machine.model.deliveries[("k1", None, None)] == 1


@pytest.mark.timeout(960)
def test_make_test_model_runs_the_machine_at_the_size_it_is_given() -> None:
    """`make test-model` as the README writes it, at the size it is given (`MODEL_EXAMPLES`,
    and `MODEL_STEPS` three: the steps are the in-process run's to cover, not this one's)."""
    done = subprocess.run(
        ["make", "--no-print-directory", "test-model", "MODEL_EXAMPLES=1", "MODEL_STEPS=3"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,  # a guard against a hang, not a bar
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "the model: 1 examples of up to 3 steps" in done.stdout and "1 passed" in done.stdout
