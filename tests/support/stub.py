"""A stub SQS, EventBridge Scheduler and registry table that answer a core flow's calls in memory.

In the spirit of dramatiq's StubBroker: no server, and every call can be made to fail on
demand. `fail(api, code)` answers with an error (nothing happens), `timeout(api)` gives no
answer (nothing happens), `drop(api)` does the call and loses the answer, `fail_entries`
refuses entries of a batch one by one. Rules apply to `times` calls (None: all).
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqsdelay.core.flows import Call, Fault, Reply


@dataclass
class _Rule:
    api: str
    fault: Fault
    queue: str | None = None
    times: int | None = None
    effect: bool = False  # the call takes effect although its answer is lost
    entries: bool = False  # refuse each entry instead of the whole call
    when: Callable[[Call], bool] | None = None  # only calls that match


@dataclass
class StubAws:
    advance: Callable[[float], None] | None = None  # a virtual clock moved by call time
    clock: Callable[[], float] | None = None  # that clock's time, to stamp what is sent
    queues: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    deleted: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    hidden: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    in_flight: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    schedules: dict[str, dict[str, Any]] = field(default_factory=dict)
    items: dict[str, dict[str, Any]] = field(default_factory=dict)  # the registry, by id
    calls: list[Call] = field(default_factory=list)
    rounds: list[list[Call]] = field(default_factory=list)
    rules: list[_Rule] = field(default_factory=list)
    _ids: itertools.count[int] = field(default_factory=itertools.count)

    # -- faults on demand ------------------------------------------------------------------

    def fail(
        self,
        api: str,
        code: str,
        *,
        queue: str | None = None,
        times: int | None = None,
        status: int = 400,
        when: Callable[[Call], bool] | None = None,
    ) -> None:
        fault = Fault(code, "stubbed", status)
        self.rules.append(_Rule(api, fault, queue, times, when=when))

    def throttle(self, api: str, *, queue: str | None = None, times: int | None = None) -> None:
        self.fail(api, "ThrottlingException", queue=queue, times=times)

    def timeout(self, api: str, *, queue: str | None = None, times: int | None = None) -> None:
        fault = Fault("TimeoutError", "no answer", answered=False)
        self.rules.append(_Rule(api, fault, queue, times))

    def drop(self, api: str, *, queue: str | None = None, times: int | None = None) -> None:
        fault = Fault("ReadTimeoutError", "answer lost", answered=False)
        self.rules.append(_Rule(api, fault, queue, times, effect=True))

    def fail_entries(self, api: str, code: str, *, queue: str | None = None) -> None:
        self.rules.append(_Rule(api, Fault(code, "stubbed entry"), queue, entries=True))

    # -- the calls -------------------------------------------------------------------------

    def __call__(self, calls: list[Call]) -> list[Reply]:
        self.rounds.append(list(calls))
        replies = [self._one(c) for c in calls]
        if self.advance is not None and calls:
            # A round lasts as long as its slowest call: an unanswered one, its whole limit.
            waited = [
                c.timeout or 0.0
                for c, r in zip(calls, replies, strict=True)
                if r.fault is not None and not r.fault.answered
            ]
            waited += [float(c.params["seconds"]) for c in calls if c.service == "clock"]
            self.advance(max(waited, default=0.01))
        return replies

    def _rule(self, call: Call) -> _Rule | None:
        for rule in self.rules:
            if (
                rule.api == call.api
                and rule.queue in (None, call.queue)
                and rule.times != 0
                and (rule.when is None or rule.when(call))
            ):
                if rule.times is not None:
                    rule.times -= 1
                return rule
        return None

    def _one(self, call: Call) -> Reply:
        self.calls.append(call)
        rule = self._rule(call)
        if rule is not None and not rule.entries:
            if rule.effect:
                self._do(call, None)
            return Reply(fault=rule.fault)
        answer = self._do(call, rule)
        return Reply(fault=answer) if isinstance(answer, Fault) else Reply(answer)

    def _do(self, call: Call, rule: _Rule | None) -> dict[str, Any] | Fault:
        p = call.params
        if call.service == "clock":  # the round advances the virtual clock by the wait
            return {}
        queue = call.queue or ""
        if call.api == "GetQueueUrl":
            return {"QueueUrl": f"https://sqs.stub/123456789012/{p['QueueName']}"}
        if call.api in ("SendMessageBatch", "DeleteMessageBatch", "ChangeMessageVisibilityBatch"):
            ok, failed = [], []
            for entry in p["Entries"]:
                if rule is not None and rule.entries:
                    failed.append(
                        {
                            "Id": entry["Id"],
                            "Code": rule.fault.code,
                            "Message": rule.fault.detail,
                            "SenderFault": True,
                        }
                    )
                    continue
                if call.api == "SendMessageBatch":
                    message = {k: v for k, v in entry.items() if k != "Id"}
                    message["MessageId"] = f"m{next(self._ids)}"
                    if self.clock is not None:  # when the round started: the earliest it was sent
                        message["SentAt"] = self.clock()
                    self.queues[queue].append(message)
                    ok.append({"Id": entry["Id"], "MessageId": message["MessageId"]})
                elif call.api == "DeleteMessageBatch":
                    self.deleted[queue].append(entry["ReceiptHandle"])
                    ok.append({"Id": entry["Id"]})
                else:
                    self.hidden[queue].append(entry)
                    if entry.get("VisibilityTimeout") == 0:  # visible again at once
                        self.in_flight[queue].discard(entry["ReceiptHandle"])
                    ok.append({"Id": entry["Id"]})
            return {"Successful": ok, "Failed": failed}
        if call.api == "ReceiveMessage":
            return self._receive(queue, int(p.get("MaxNumberOfMessages", 1)))
        if call.api == "DeleteMessage":
            self.deleted[queue].append(p["ReceiptHandle"])
            self.in_flight[queue].discard(p["ReceiptHandle"])
            return {}
        if call.api == "SendMessage":
            message = {**p, "MessageId": f"m{next(self._ids)}"}
            self.queues[queue].append(message)
            return {"MessageId": message["MessageId"]}
        if call.api == "CreateSchedule":
            if p["Name"] in self.schedules:
                return Fault("ConflictException", "schedule exists", 409)
            self.schedules[p["Name"]] = dict(p)
            return {"ScheduleArn": f"arn:aws:scheduler:::schedule/{p['GroupName']}/{p['Name']}"}
        if call.api in ("GetSchedule", "DeleteSchedule"):
            if p["Name"] not in self.schedules:
                return Fault("ResourceNotFoundException", "no such schedule", 404)
            found = self.schedules[p["Name"]]
            if call.api == "DeleteSchedule":
                del self.schedules[p["Name"]]
            return dict(found)
        if call.api == "BatchGetItem":
            [(table, request)] = p["RequestItems"].items()
            found = [
                self.items[k["id"]["S"]] for k in request["Keys"] if k["id"]["S"] in self.items
            ]
            return {"Responses": {table: found}, "UnprocessedKeys": {}}
        if call.api == "UpdateItem" and ":handed" in p["ExpressionAttributeValues"]:
            return self._claim(p)
        if call.api == "UpdateItem" and p["UpdateExpression"] == "SET delivered = :true":
            return self._delivered(p)
        if call.api == "UpdateItem" and p["UpdateExpression"] == "ADD dead_lettered :mids":
            return self._dead_lettered(p)
        if call.api == "UpdateItem" and p["UpdateExpression"].startswith("SET sent = :true"):
            return self._mark_sent(p)
        if call.api == "GetItem":
            found = self.items.get(p["Key"]["id"]["S"])
            return {"Item": dict(found)} if found is not None else {}
        if call.api == "TransactWriteItems":
            return self._transact(p["TransactItems"])
        raise AssertionError(f"the stub does not answer {call.api}")

    def _mark_sent(self, p: dict[str, Any]) -> dict[str, Any] | Fault:
        """`registry.mark_sent`: on condition that the record exists."""
        assert p["ConditionExpression"] == "attribute_exists(id)"
        item = self.items.get(p["Key"]["id"]["S"])
        if item is None:
            return Fault("ConditionalCheckFailedException", "The conditional request failed", 400)
        item["sent"] = {"BOOL": True}
        if ":route" in p["ExpressionAttributeValues"]:
            item["route"] = p["ExpressionAttributeValues"][":route"]
        return {}

    def _transact(self, actions: list[dict[str, Any]]) -> dict[str, Any] | Fault:
        """`core/debounce.py`'s transaction, all or nothing, with DynamoDB's reasons: a
        Put on `attribute_not_exists(id)` or `generation = :g`, the cancel's Update on
        `#s = :scheduled`."""
        reasons = [self._holds(a) for a in actions]
        if not all(reasons):
            shown = ", ".join("None" if ok else "ConditionalCheckFailed" for ok in reasons)
            detail = (
                "Transaction cancelled, please refer cancellation reasons for specific "
                f"reasons [{shown}]"
            )
            return Fault("TransactionCanceledException", detail, 400)
        for action in actions:
            if "Put" in action:
                item = action["Put"]["Item"]
                self.items[item["id"]["S"]] = dict(item)
            else:
                update = action["Update"]
                assert update["UpdateExpression"] == "SET #s = :cancelled, updated_ms = :now"
                item = self.items[update["Key"]["id"]["S"]]
                item["state"] = {"S": "cancelled"}
                item["updated_ms"] = update["ExpressionAttributeValues"][":now"]
        return {}

    def _holds(self, action: dict[str, Any]) -> bool:
        [(kind, body)] = action.items()
        ident = (body["Item"] if kind == "Put" else body["Key"])["id"]["S"]
        item = self.items.get(ident)
        condition = body["ConditionExpression"]
        if condition == "attribute_not_exists(id)":
            return item is None
        if condition == "generation = :g":
            return (
                item is not None
                and item.get("generation") == body["ExpressionAttributeValues"][":g"]
            )
        assert condition == "#s = :scheduled", condition
        return item is not None and item.get("state") == {"S": "scheduled"}

    def _receive(self, queue: str, most: int) -> dict[str, Any]:
        """The queue's messages that are neither deleted nor in flight, oldest first, each
        in flight until deleted or made visible again (a receipt handle is its position)."""
        got = []
        for position, message in enumerate(self.queues[queue]):
            handle = f"{queue}#{position}"
            if handle in self.deleted[queue] or handle in self.in_flight[queue]:
                continue
            self.in_flight[queue].add(handle)
            got.append(
                {
                    "MessageId": message["MessageId"],
                    "ReceiptHandle": handle,
                    "Body": message.get("MessageBody", ""),
                    "MessageAttributes": message.get("MessageAttributes", {}),
                    "Attributes": {},
                }
            )
            if len(got) == most:
                break
        return {"Messages": got} if got else {}

    def _claim(self, p: dict[str, Any]) -> dict[str, Any] | Fault:
        """The registry's claim (`registry.claim_call`'s condition, as DynamoDB reads it: a
        missing attribute compares false): scheduled with the same due time; or claimed by
        the same SQS message and either the same receive, or undelivered with its lease run
        out; or, for a replay, handed over in another generation. Never by an SQS message a
        worker dead-lettered (`dead_lettered`)."""
        values = p["ExpressionAttributeValues"]
        item = self.items.get(p["Key"]["id"]["S"])
        state = item["state"]["S"] if item else None
        mine = item is not None and item.get("claimed_by") == values[":mid"]
        lease = int(item["lease_ms"]["N"]) if item and "lease_ms" in item else None
        taken_over = (
            item is not None
            and item.get("delivered") != {"BOOL": True}
            and (lease is None or lease < int(values[":now"]["N"]))
        )
        replay = values.get(":replay")
        dead = values[":mid"]["S"] in (item or {}).get("dead_lettered", {}).get("SS", ())
        ok = item is not None and (
            (not dead and state == "scheduled" and item["due_ms"] == values[":due"])
            or (
                not dead
                and state == "handed-over"
                and mine
                and (item.get("attempt") == values[":attempt"] or taken_over)
            )
            or (state == "handed-over" and replay is not None and item.get("replay") != replay)
        )
        if not ok:
            fault = Fault("ConditionalCheckFailedException", "The conditional request failed")
            return Fault(fault.code, fault.detail, 400, item=dict(item) if item else None)
        assert item is not None
        item.update(
            state={"S": "handed-over"},
            claimed_by=values[":mid"],
            attempt=values[":attempt"],
            lease_ms=values[":lease"],
            delivered={"BOOL": False},
        )
        if replay is not None:
            item["replay"] = replay
        return {}

    def _dead_lettered(self, p: dict[str, Any]) -> dict[str, Any] | Fault:
        """`registry.dead_lettered_call`: ADD the SQS message id to the item's set."""
        item = self.items.get(p["Key"]["id"]["S"])
        if item is None:
            return Fault("ConditionalCheckFailedException", "The conditional request failed", 400)
        had = item.get("dead_lettered", {}).get("SS", [])
        added = p["ExpressionAttributeValues"][":mids"]["SS"]
        item["dead_lettered"] = {"SS": sorted({*had, *added})}
        return {}

    def _delivered(self, p: dict[str, Any]) -> dict[str, Any] | Fault:
        values = p["ExpressionAttributeValues"]
        item = self.items.get(p["Key"]["id"]["S"])
        if item is None or (item.get("claimed_by"), item.get("attempt")) != (
            values[":mid"],
            values[":attempt"],
        ):
            return Fault("ConditionalCheckFailedException", "The conditional request failed", 400)
        item["delivered"] = {"BOOL": True}
        return {}

    def count(self, api: str, queue: str | None = None) -> int:
        return sum(1 for c in self.calls if c.api == api and queue in (None, c.queue))
