"""A whole sqsdelay deployment in one process, for the state machine of the whole way
(tests/aws/test_whole_way.py): moto's SQS and DynamoDB in memory (no server: every call is
a function call), on a virtual clock that moto's SQS reads too, so delays, visibility
timeouts and broker timestamps follow the test's time, not the machine's.

Every flow is the one production runs: the sender's (`core/send_flows.py`), the worker's step
(`BatchRunner`, as both drivers hold it), `retry_later`'s, the guard's, `replay-errors`'.
They make their calls through `FaultyCaller`, which can fail a call (nothing happens), lose
its answer (it happens, the flow sees a time-out) or stop the flow between two rounds (the
process died there), as the test draws them.
"""

from __future__ import annotations

import itertools
import os
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, TypeVar
from unittest import mock

import boto3

from sqsdelay.aws.batch_runner import BatchRunner
from sqsdelay.aws.callers import SyncCaller
from sqsdelay.aws.guard import Guard
from sqsdelay.aws.installer import Installer
from sqsdelay.aws.lambda_driver import Handler
from sqsdelay.aws.queue_urls import QueueResolver
from sqsdelay.aws.sender import Sender
from sqsdelay.core import identity, parking, registry
from sqsdelay.core.flows import Call, Fault, Flow, Reply
from sqsdelay.core.outcomes import BatchEnds
from sqsdelay.core.parking import min_park_after_seconds
from sqsdelay.core.received import SYSTEM_ATTRIBUTES, from_boto
from sqsdelay.settings import Settings
from tests.support.consumerkit import guard_table
from tests.support.lambda_events import lambda_record

T = TypeVar("T")
# The virtual clock starts at the machine's second: CloudWatch's EMF refuses timestamps
# more than two hours ahead of the wall clock the metrics writer reads.
START = float(int(time.time()))
ACCOUNT = "123456789012"  # moto's


class Crashed(BaseException):
    """The process running a flow died between two of its rounds: a BaseException, so that
    no `except Exception` of the code under test (`handle_batch`'s) takes it for a failure
    it reports; the process is gone."""


@dataclass
class VirtualClock:
    now: float = START

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Faults:
    """What the next calls meet: `plan` maps an API name to the fault its next call gets
    ("fail": refused, nothing done; "lose": done, its answer lost), once each; `crash_after`
    stops the next flow driven after that many rounds. What was met is kept in `met`."""

    plan: dict[str, str] = field(default_factory=dict)
    crash_after: int | None = None
    met: list[tuple[str, str, str | None]] = field(default_factory=list)

    def take(self, call: Call) -> str | None:
        kind = self.plan.pop(call.api, None)
        if kind is not None:
            self.met.append((call.api, kind, call.queue))
        return kind


DEDUP_WINDOW_SECONDS = 300


class FaultyCaller:
    """A `SyncCaller` whose calls meet the drawn faults, and whose waits (`core.flows.pause`)
    move the virtual clock instead of sleeping.

    It also keeps SQS's deduplication window on FIFO queues as SQS keeps it: five minutes
    per `MessageDeduplicationId`, even after the first copy was deleted, which moto forgets
    (SQS-FACTS.md). A send within the window is answered as sent and not enqueued."""

    def __init__(self, inner: SyncCaller, faults: Faults, clock: VirtualClock) -> None:
        self.inner = inner
        self.faults = faults
        self.clock = clock
        self.dedup_seen: dict[tuple[str, str], float] = {}
        self.deduplicated: list[tuple[str, str]] = []

    def _dedup(self, call: Call) -> tuple[Call | None, list[dict[str, Any]]]:
        """The call without its entries SQS would drop as duplicates, and their answers."""
        queue = call.queue or ""
        if not queue.endswith(".fifo") or call.api not in ("SendMessage", "SendMessageBatch"):
            return call, []
        entries = call.params["Entries"] if call.api == "SendMessageBatch" else [call.params]
        kept, dropped = [], []
        for entry in entries:
            dedup = entry.get("MessageDeduplicationId")
            seen = self.dedup_seen.get((queue, dedup)) if dedup else None
            if seen is not None and self.clock() - seen < DEDUP_WINDOW_SECONDS:
                dropped.append(entry)
                self.deduplicated.append((queue, str(dedup)))
            else:
                kept.append(entry)
        if not dropped:
            return call, []
        answers = [{"Id": e.get("Id", ""), "MessageId": "deduplicated"} for e in dropped]
        if call.api == "SendMessage" or not kept:
            return None, answers
        return Call(
            call.service, call.api, {**call.params, "Entries": kept}, queue, call.timeout
        ), answers

    def _remember(self, call: Call, reply: Reply) -> None:
        queue = call.queue or ""
        if reply.fault is not None or not queue.endswith(".fifo"):
            return
        if call.api == "SendMessage":
            sent = [call.params]
        elif call.api == "SendMessageBatch":
            ok = {a["Id"] for a in (reply.response or {}).get("Successful", [])}
            sent = [e for e in call.params["Entries"] if e["Id"] in ok]
        else:
            return
        for entry in sent:
            if entry.get("MessageDeduplicationId"):
                self.dedup_seen.setdefault((queue, entry["MessageDeduplicationId"]), self.clock())

    def _one(self, call: Call) -> Reply:
        trimmed, dropped = self._dedup(call)
        if trimmed is None:
            if call.api == "SendMessage":
                return Reply({"MessageId": "deduplicated"})
            return Reply({"Successful": dropped, "Failed": []})
        [reply] = self.inner([trimmed])
        self._remember(trimmed, reply)
        if dropped and reply.fault is None:
            answer = dict(reply.response or {})
            answer["Successful"] = [*answer.get("Successful", []), *dropped]
            reply = Reply(answer)
        return reply

    def __call__(self, calls: list[Call]) -> list[Reply]:
        replies: list[Reply] = []
        for call in calls:
            if call.service == "clock":
                self.clock.advance(float(call.params["seconds"]))
                replies.append(Reply())
                continue
            if call.api == "ReceiveMessage":  # a long poll answers at once in virtual time
                call = Call(
                    call.service,
                    call.api,
                    {**call.params, "WaitTimeSeconds": 0},
                    call.queue,
                    call.timeout,
                )
            kind = self.faults.take(call)
            if kind == "fail":
                replies.append(Reply(fault=Fault("ServiceUnavailable", "drawn fault", 503)))
                continue
            reply = self._one(call)
            if kind == "lose":
                reply = Reply(fault=Fault("ReadTimeoutError", "drawn: answer lost", answered=False))
            replies.append(reply)
        return replies


def drive(flow: Flow[T], caller: FaultyCaller) -> T:
    """`core.flows.drive`, but a drawn crash stops the flow after that many rounds."""
    crash_after, caller.faults.crash_after = caller.faults.crash_after, None
    rounds = 0
    try:
        calls = next(flow)
        while True:
            if crash_after is not None and rounds >= crash_after:
                flow.close()
                caller.faults.met.append(("crash", f"after {rounds} rounds", None))
                raise Crashed(rounds)
            replies = caller(calls)
            rounds += 1
            calls = flow.send(replies)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


@contextmanager
def moto_on(clock: VirtualClock) -> Iterator[None]:
    """moto in this process, its SQS on the virtual clock. Its ids (SQS message ids, receipt
    handles) and the ids the sender draws for a message sent without one come from seeded
    generators, new for each machine: hypothesis picks messages from sorted lists of them,
    and a random id made its replay of a failing example pick others (a FlakyFailure that
    could not shrink)."""
    import moto
    import moto.sqs.models as sqs_models
    from moto.moto_api._internal import mock_random

    drawn = itertools.count(1)

    env = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    with (
        mock.patch.dict(os.environ, env),
        moto.mock_aws(),
        mock.patch.object(sqs_models, "unix_time", lambda *_: clock()),
        mock.patch.object(sqs_models, "unix_time_millis", lambda *_: clock() * 1000),
        # identity.new_message_id's uuid4 (that function is send.plan's default, bound at
        # import), and no other module's
        mock.patch.object(
            identity, "uuid", SimpleNamespace(uuid4=lambda: uuid.UUID(int=next(drawn)))
        ),
    ):
        mock_random.seed(0)
        yield


@dataclass(frozen=True)
class Config:
    registry: bool
    guard: bool
    fifo: bool
    lambda_driver: bool = False  # the Lambda handler instead of the ECS worker's loop
    parking: bool = False  # long delays wait in EventBridge Scheduler (the World fires them)
    nservicebus: bool = False  # SQSDELAY_WIRE_FORMAT=nservicebus: bodies in the envelope
    fair: bool = False  # a standard destination's sends carry a tenant (an SQS fair queue)


class World:
    """One deployment: a destination (`orders`, or `orders.fifo`), its delay and error
    queues, the registry table when on, a guard table, a sender, a worker and a consumer,
    all on one virtual clock and one `Faults`."""

    CYCLE = 10  # SQSDELAY_MAX_NATIVE_DELAY_SECONDS: a hop's longest wait
    CONSUMER_VISIBILITY = 30

    def __init__(self, config: Config, clock: VirtualClock) -> None:
        self.config = config
        self.clock = clock
        self.faults = Faults()
        self.queue = "orders.fifo" if config.fifo else "orders"
        values: dict[str, Any] = {
            "region": "us-east-1",
            "queue_prefix": "m-",
            "error_queue": "error",
            "max_native_delay_seconds": self.CYCLE,
            "visibility_timeout_seconds": 30,
            "wait_time_seconds": 0,
            # Dead-letter after one refused send, at the next receive: a worker's own
            # dead-lettering within the few steps a drawn sequence has.
            "max_attempts": 1,
        }
        if config.registry:
            values.update(registry="dynamodb", registry_table="m-scheduled")
        if config.nservicebus:
            values["wire_format"] = "nservicebus"
        if config.parking:
            values.update(
                parking="scheduler",
                scheduler_role_arn=f"arn:aws:iam::{ACCOUNT}:role/sqsdelay-scheduler",
                # The least the settings take with this cycle: the drawn delays over it park.
                park_after_seconds=min_park_after_seconds(self.CYCLE),
            )
        self.settings = Settings(**values)
        self.sqs = boto3.client("sqs", region_name="us-east-1")
        self.dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        self.scheduler = boto3.client("scheduler", region_name="us-east-1")
        installer = Installer(self.settings, client=self.sqs, scheduler=self.scheduler)
        installer.run([self.queue])
        if config.parking:
            installer.schedule_group([self.queue])
        self.fired: list[str] = []  # schedules fired, by name
        self.fire_twice = False  # the next firing is invoked twice (Scheduler: at least once)
        if config.registry:
            assert installer.registry_table([self.queue], dynamodb=self.dynamodb).problems == []
        resolver = QueueResolver(self.settings)
        self.trio = resolver.trio(self.queue)
        roles = [
            ("destination", self.trio.destination),
            ("delay", self.trio.delay),
            ("error", self.trio.error),
        ]
        if config.fifo:  # the hand-overs' standard queue, which the worker forwards from
            roles.append(("staging", str(self.trio.staging)))
        self.urls = {
            role: self.sqs.get_queue_url(QueueName=name)["QueueUrl"] for role, name in roles
        }
        clients = {"sqs": self.sqs, "dynamodb": self.dynamodb, "scheduler": self.scheduler}
        self.caller = FaultyCaller(SyncCaller(clients, resolver), self.faults, clock)
        self.sender = Sender(
            self.settings,
            client=self.sqs,
            dynamodb=self.dynamodb,
            scheduler=self.scheduler,
            clock=clock,
        )
        self.sender._caller = self.caller  # type: ignore[assignment]
        # `Sender.run` (what `retry_later` and `handle_batch` drive their flows with) meets
        # drawn crashes too.
        self.sender.run = self.run  # type: ignore[method-assign]
        self.runner = BatchRunner(self.settings, resolver, delete=True, clock=clock)
        self.handler = Handler(
            self.settings,
            client=self.sqs,
            dynamodb=self.dynamodb,
            scheduler=self.scheduler,
            clock=clock,
            monotonic=clock,
            write_metrics=lambda _: None,
        )
        self.handler._callers[ACCOUNT] = self.caller  # type: ignore[assignment]
        self.guard: Guard | None = None
        if config.guard:
            table = guard_table(self.dynamodb, "m-guard")
            self.guard = Guard(table, name="model", client=self.dynamodb, clock=clock)
            self.guard._caller = self.caller  # type: ignore[assignment]

    def run(self, flow: Flow[T]) -> T:
        return drive(flow, self.caller)

    def receive(self, role: str, most: int, visibility: int) -> list[dict[str, Any]]:
        """A receive as the worker or a consumer makes it (a drawn fault loses what it took:
        in flight until its visibility ends)."""
        params = {
            "MaxNumberOfMessages": most,
            "WaitTimeSeconds": 0,
            "VisibilityTimeout": visibility,
            "MessageAttributeNames": ["All"],
            "MessageSystemAttributeNames": (
                ["All"] if role == "destination" else list(SYSTEM_ATTRIBUTES)
            ),
        }
        name = {
            "destination": self.trio.destination,
            "delay": self.trio.delay,
            "staging": str(self.trio.staging),
        }[role]
        [reply] = self.caller([Call("sqs", "ReceiveMessage", params, name)])
        if reply.fault is not None:
            return []
        messages: list[dict[str, Any]] = reply.response.get("Messages", [])
        return messages

    def worker_step(self) -> BatchEnds | None:
        """One receive of each queue the worker drains (the delay queue; a FIFO destination's
        staging queue too, by its forwarding trio) and the step on what came, as the ECS
        worker's loops make them (the Lambda handler runs the same step on the records
        Lambda received). None when nothing came."""
        self.fire_due()
        outcome = None
        drained = [("delay", self.trio)]
        if self.config.fifo:
            drained.append(("staging", self.trio.forwarding()))
        for role, trio in drained:
            got = self.receive(role, 10, self.settings.visibility_timeout_seconds)
            if not got:
                continue
            if self.config.lambda_driver:
                outcome = self._invoke(role, trio.delay, got)
                continue
            flow = self.runner.flow(
                [from_boto(m) for m in got],
                trio,
                self.sqs,
                local_ms=int(self.clock() * 1000),
                deadline=self.clock() + self.settings.visibility_timeout_seconds * 0.8,
            )
            outcome = self.run(flow)
        return outcome

    def _invoke(self, role: str, queue: str, got: list[dict[str, Any]]) -> BatchEnds:
        """What Lambda's poller does with a batch: invoke the handler with the records, then
        delete those it did not report failed (a failed delete leaves it to come back)."""
        arn = f"arn:aws:sqs:us-east-1:{ACCOUNT}:{queue}"
        answer = self.handler({"Records": [lambda_record(m, arn) for m in got]})
        failed = {f["itemIdentifier"] for f in answer["batchItemFailures"]}
        self.lambda_deletes(queue, [m for m in got if m["MessageId"] not in failed])
        return BatchEnds()

    def schedules(self) -> list[str]:
        """The names of the schedules still waiting to fire."""
        if not self.config.parking:
            return []
        group = self.settings.schedule_group
        return [s["Name"] for s in self.scheduler.list_schedules(GroupName=group)["Schedules"]]

    def fire_due(self) -> int:
        """What EventBridge Scheduler does, which moto does not: every enabled `at(...)`
        schedule whose time has come on the virtual clock sends its input (the universal
        target's SendMessage), then is deleted (`ActionAfterCompletion: DELETE`). The send
        keeps SQS's deduplication window, and meets no drawn fault (Scheduler retries for
        a day). How many fired."""
        if not self.config.parking:
            return 0
        group = self.settings.schedule_group
        fired = 0
        for summary in self.scheduler.list_schedules(GroupName=group).get("Schedules", []):
            schedule = self.scheduler.get_schedule(Name=summary["Name"], GroupName=group)
            when = parking.fire_ms_of(schedule.get("ScheduleExpression", ""))
            if schedule.get("State") != "ENABLED" or when is None or when > self.clock() * 1000:
                continue
            request = parking.send_message_of(schedule["Target"]["Input"])
            queue = request.pop("QueueUrl").rsplit("/", 1)[1]
            for _ in range(2 if self.fire_twice else 1):
                reply = self.caller._one(Call("sqs", "SendMessage", request, queue))
                assert reply.fault is None, reply.fault
            self.fire_twice = False
            self.scheduler.delete_schedule(Name=summary["Name"], GroupName=group)
            self.fired.append(summary["Name"])
            fired += 1
        return fired

    def lambda_deletes(self, queue: str, done: list[dict[str, Any]]) -> set[str]:
        """Lambda's poller deleting the records a batch did not report failed: the message
        ids deleted (a failed delete leaves its message to come back)."""
        deleted: set[str] = set()
        for start in range(0, len(done), 10):
            chunk = done[start : start + 10]
            entries = [
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(chunk)
            ]
            [reply] = self.caller([Call("sqs", "DeleteMessageBatch", {"Entries": entries}, queue)])
            if reply.fault is None:
                ok = {int(a["Id"]) for a in reply.response.get("Successful", [])}
                deleted |= {m["MessageId"] for i, m in enumerate(chunk) if i in ok}
        return deleted

    def cancellable(self, message_id: str) -> bool:
        """Whether a cancel now would stop what was sent with this id (read past the faults):
        its record scheduled; without the registry, its schedule not yet fired."""
        if self.config.registry:
            found = self.dynamodb.get_item(
                TableName=str(self.settings.registry_table),
                Key=registry.key(self.trio.destination, message_id),
                ConsistentRead=True,
            ).get("Item")
            record = registry.record_of(found) if found else None
            return record is not None and record.state == "scheduled"
        if self.config.parking:
            name = identity.schedule_name(self.trio.delay, message_id)
            return name in self.schedules()
        return False

    def error_ids(self, *, visible: bool = False) -> list[str]:
        """The error queue's SQS message ids (`visible`: only those a receive can take now),
        read from moto's memory, since a receive would hide them: what the console's
        dead-letter list offers to select."""
        import moto.sqs.models as sqs_models

        queue = sqs_models.sqs_backends[ACCOUNT]["us-east-1"].queues[self.trio.error]
        return sorted(m.id for m in queue._messages if m.visible or not visible)

    def counts(self) -> dict[str, int]:
        """Messages in each queue, visible or not (moto's attributes)."""
        out = {}
        for role, url in self.urls.items():
            attrs = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])[
                "Attributes"
            ]
            out[role] = sum(
                int(attrs[k])
                for k in (
                    "ApproximateNumberOfMessages",
                    "ApproximateNumberOfMessagesNotVisible",
                    "ApproximateNumberOfMessagesDelayed",
                )
            )
        return out
