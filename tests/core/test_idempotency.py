"""The guard's rules (core/idempotency.py): its key, the one Powertools' idempotency utility
computes from the same record, so both read each other's records; the claim, its end and
the reading of every answer of DynamoDB; and the guard's settings. The guard's runs are
tests/aws/test_guard.py's."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig
from aws_lambda_powertools.utilities.idempotency.persistence.base import BasePersistenceLayer
from hypothesis import given, settings
from hypothesis import strategies as st

from sqsdelay.core import consumer_message, idempotency, wire_format
from sqsdelay.core.flows import Call, Fault, Reply, drive
from sqsdelay.core.types import Attributes
from sqsdelay.errors import (
    ConfigError,
    GuardError,
    GuardInProgress,
    GuardTableMissing,
    InvalidInput,
)
from tests.support.consumerkit import (
    attribute_names,
    attribute_values,
    boto3_message,
    lambda_record,
)


def s(value: str) -> dict[str, str]:
    return {"DataType": "String", "StringValue": value}


class _Layer(BasePersistenceLayer):
    """Powertools' key rule, without a store."""

    def _get_record(self, idempotency_key: str) -> Any: ...
    def _put_record(self, data_record: Any) -> None: ...
    def _update_record(self, data_record: Any) -> None: ...
    def _delete_record(self, data_record: Any) -> None: ...


class _Answers:
    """A caller that answers each call with the next reply, and keeps the calls made."""

    def __init__(self, *replies: Reply) -> None:
        self.left = list(replies)
        self.made: list[Call] = []

    def __call__(self, calls: list[Call]) -> list[Reply]:
        self.made.extend(calls)
        return [self.left.pop(0) for _ in calls]


CONFIG = idempotency.guard_config("t", name="n", expires_after_seconds=60, in_progress_seconds=5)


def _powertools_key(record: dict[str, Any], prefix: str, jmespath: str) -> str | None:
    layer = _Layer()
    layer.configure(IdempotencyConfig(event_key_jmespath=jmespath), key_prefix=prefix)
    return layer._get_hashed_idempotency_key(record)


@pytest.mark.parametrize("replay", [None, "r-1"])
@pytest.mark.parametrize("attempt", [None, "1", "12"])
def test_the_guards_key_is_the_one_powertools_computes_from_the_record(
    attempt: str | None, replay: str | None
) -> None:
    attrs: Attributes = {wire_format.MESSAGE_ID_ATTRIBUTE: s("order-7")}
    if attempt is not None:
        attrs[wire_format.ATTEMPT_ATTRIBUTE] = {"DataType": "Number", "StringValue": attempt}
    if replay is not None:
        attrs[wire_format.REPLAY_ATTRIBUTE] = s(replay)
    record = lambda_record(boto3_message(attrs), "p-orders")
    ours = idempotency.record_key("fn", idempotency.key_data(consumer_message.read(record)))
    assert ours == _powertools_key(record, "fn", idempotency.POWERTOOLS_KEY_JMESPATH)
    # A copy (another SQS MessageId, receipt) has the same key; another attempt has another.
    copy = {**record, "messageId": "other", "receiptHandle": "other"}
    assert idempotency.record_key("fn", idempotency.key_data(consumer_message.read(copy))) == ours


def test_a_replay_has_a_key_of_its_own_and_a_first_delivery_keeps_its_old_one() -> None:
    """Issue 58.4: a replay kept its first delivery's key (dead-lettering drops the attempt
    and keeps the id), so a guard that had completed that run skipped the replay."""
    first = lambda_record(boto3_message({wire_format.MESSAGE_ID_ATTRIBUTE: s("o-1")}), "q")
    replayed_attrs: Attributes = {
        wire_format.MESSAGE_ID_ATTRIBUTE: s("o-1"),
        wire_format.REPLAY_ATTRIBUTE: s("err-1"),
    }
    replayed = lambda_record(boto3_message(replayed_attrs), "q")
    again = {**replayed_attrs, wire_format.REPLAY_ATTRIBUTE: s("err-2")}
    keys = {
        idempotency.record_key("fn", idempotency.key_data(consumer_message.read(r)))
        for r in (first, replayed, lambda_record(boto3_message(again), "q"))
    }
    assert len(keys) == 3
    # The key without a replay is the one every earlier version wrote.
    assert idempotency.key_data(consumer_message.read(first)) == {"attempt": None, "id": "o-1"}


def test_the_callers_key_is_asked_only_without_the_id() -> None:
    """The id wins: a key that fails on some bodies is not asked for a message with the id."""

    def key() -> str:
        raise KeyError("order_id")

    ours = lambda_record(boto3_message({wire_format.MESSAGE_ID_ATTRIBUTE: s("o-1")}), "q")
    assert idempotency.key_data(consumer_message.read(ours), key)["id"] == "o-1"
    foreign = lambda_record(boto3_message(), "q")
    assert idempotency.key_data(consumer_message.read(foreign), lambda: "o-9")["id"] == "o-9"
    with pytest.raises(KeyError):
        idempotency.key_data(consumer_message.read(foreign), key)


def test_a_foreign_message_takes_the_callers_key_in_both() -> None:
    record = lambda_record({**boto3_message(), "Body": json.dumps({"order_id": "o-9"})}, "q")
    with pytest.raises(InvalidInput, match=r"without room for its id.*Give the guard a key"):
        idempotency.key_data(consumer_message.read(record))
    ours = idempotency.record_key("fn", idempotency.key_data(consumer_message.read(record), "o-9"))
    jmespath = idempotency.powertools_key_jmespath("powertools_json(body).order_id")
    assert ours == _powertools_key(record, "fn", jmespath)
    replayed = {
        **record,
        "messageAttributes": {
            wire_format.REPLAY_ATTRIBUTE: {"stringValue": "r-1", "dataType": "String"}
        },
    }
    ours = idempotency.record_key(
        "fn", idempotency.key_data(consumer_message.read(replayed), "o-9")
    )
    assert ours == _powertools_key(replayed, "fn", jmespath)


def test_the_claim_is_powertools_condition_and_a_found_record_reads_as_its_state() -> None:
    put = idempotency.begin_request("t", "k", now=1000.5, expires_after=60, in_progress_ms=5000)
    assert put["Item"]["expiration"] == {"N": "1060"}
    assert put["Item"]["in_progress_expiration"] == {"N": "1005500"}
    assert put["Item"]["status"] == {"S": "INPROGRESS"}
    done = idempotency.stored({"status": {"S": "COMPLETED"}, "expiration": {"N": "1060"}})
    assert done.state(1000) == "completed" and done.state(1061) == "expired"
    running = idempotency.stored(
        {
            "status": {"S": "INPROGRESS"},
            "expiration": {"N": "1060"},
            "in_progress_expiration": {"N": "1005500"},
        }
    )
    assert running.state(1005.0) == "in-progress" and running.state(1006) == "expired"
    upd = idempotency.complete_request("t", "k", {"a": 1}, now=2000, expires_after=60)
    assert upd["ExpressionAttributeValues"][":response_data"] == {"S": '{"a": 1}'}


@settings(max_examples=200, deadline=None)
@given(
    ident=st.text(min_size=1, max_size=40),
    attempt=st.one_of(st.none(), st.text(max_size=12)),
    others=st.dictionaries(attribute_names, attribute_values, max_size=8),
)
def test_for_any_id_and_attempt_a_producer_wrote_the_key_is_powertools_and_every_copys(
    ident: str, attempt: str | None, others: Attributes
) -> None:
    attrs: Attributes = {**others, wire_format.MESSAGE_ID_ATTRIBUTE: s(ident)}
    if attempt is not None:
        attrs[wire_format.ATTEMPT_ATTRIBUTE] = s(attempt)
    record = lambda_record(boto3_message(attrs), "p-orders")
    ours = idempotency.record_key("fn", idempotency.key_data(consumer_message.read(record)))
    assert ours == _powertools_key(record, "fn", idempotency.POWERTOOLS_KEY_JMESPATH)
    copy = lambda_record({**boto3_message(attrs), "MessageId": "x", "ReceiptHandle": "y"}, "q")
    assert idempotency.record_key("fn", idempotency.key_data(consumer_message.read(copy))) == ours


def test_the_guards_flows_read_every_answer_of_dynamodb_alike_for_both_guards() -> None:
    ok = _Answers(Reply())
    assert drive(idempotency.claim(CONFIG, "k", now=1000.0, in_progress_ms=5000), ok) is None
    [put] = ok.made
    assert (put.service, put.api) == ("dynamodb", "PutItem")
    assert put.params == idempotency.begin_request(
        "t", "k", now=1000.0, expires_after=60, in_progress_ms=5000
    )
    done = {"status": {"S": "COMPLETED"}, "expiration": {"N": "1060"}, "data": {"S": "[1]"}}
    refused = Reply(fault=Fault("ConditionalCheckFailedException", item=done))
    found = drive(idempotency.claim(CONFIG, "k", now=1000.0, in_progress_ms=1), _Answers(refused))
    assert found == idempotency.Outcome(False, [1])
    running = {
        "status": {"S": "INPROGRESS"},
        "expiration": {"N": "1060"},
        "in_progress_expiration": {"N": "1004000"},
    }
    held = Reply(fault=Fault("ConditionalCheckFailedException", item=running))
    with pytest.raises(GuardInProgress, match="in-progress"):
        drive(idempotency.claim(CONFIG, "k", now=1000.0, in_progress_ms=1), _Answers(held))
    missing = Reply(fault=Fault("ResourceNotFoundException"))
    with pytest.raises(GuardTableMissing, match="create it"):
        drive(idempotency.claim(CONFIG, "k", now=1000.0, in_progress_ms=1), _Answers(missing))
    lost = Reply(fault=Fault("ReadTimeoutError", answered=False))
    with pytest.raises(GuardError, match="PutItem on the guard's table 't' failed") as raised:
        drive(idempotency.claim(CONFIG, "k", now=1000.0, in_progress_ms=1), _Answers(lost))
    assert "no answer" in str(raised.value) and "the handler did not run" in str(raised.value)
    # A refusal says why (AWS's detail), what happened, and for access what to grant.
    denied = Fault("AccessDeniedException", "User: arn:aws:sts::1:assumed-role/f is not authorized")
    with pytest.raises(GuardError) as raised:
        drive(
            idempotency.claim(CONFIG, "k", now=1000.0, in_progress_ms=1),
            _Answers(Reply(fault=denied)),
        )
    said = str(raised.value)
    assert "is not authorized" in said and "leave the message undeleted" in said
    for action in ("dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"):
        assert action in said
    # The end of a run never raises: the work is done (or failed) either way.
    for flow in (
        idempotency.complete(CONFIG, "k", {"a": 1}, now=1000.0),
        idempotency.release(CONFIG, "k"),
    ):
        assert drive(flow, _Answers(lost)) is None


def test_a_guard_is_refused_without_a_table_or_with_durations_that_are_not_positive() -> None:
    for table in (None, ""):
        with pytest.raises(ConfigError, match="partition key 'id'"):
            idempotency.guard_config(
                table, name=None, expires_after_seconds=60, in_progress_seconds=1
            )
    with pytest.raises(ConfigError, match="positive durations"):
        idempotency.guard_config("t", name=None, expires_after_seconds=0, in_progress_seconds=1)
    assert CONFIG.in_progress_for(None) == 5000 and CONFIG.in_progress_for(1234) == 1234


def test_an_occurrence_scheduler_did_not_fill_in_is_refused_not_skipped() -> None:
    """A recurring schedule's id with Scheduler's keyword still in it would key every
    occurrence alike, and the guard skip all but the first: it says so instead."""
    unfilled = s("nightly@<aws.scheduler.scheduled-time>")
    record = lambda_record(boto3_message({wire_format.MESSAGE_ID_ATTRIBUTE: unfilled}), "q")
    with pytest.raises(InvalidInput, match="did not fill in"):
        idempotency.key_data(consumer_message.read(record))
    filled = s("nightly@2026-03-30T07:00:00Z")
    record = lambda_record(boto3_message({wire_format.MESSAGE_ID_ATTRIBUTE: filled}), "q")
    assert (
        idempotency.key_data(consumer_message.read(record))["id"] == "nightly@2026-03-30T07:00:00Z"
    )
