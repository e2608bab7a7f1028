"""A taskiq task too large for SQS, as taskiq-aio-sqs offloads it (pure): the body goes to S3
and SQS carries a pointer to it.

Written exactly as taskiq-aio-sqs 2.1 writes it (`taskiq_aio_sqs/sqs_broker.py`,
`SQSBroker._send_single_message`: a `MessageBody` of `MAX_SQS_MESSAGE_SIZE` characters or
more goes to `s3_extended_bucket_name` under `<task id>.json` (ours: a key per kick,
`pointer`), and the message is
`{"s3_bucket": ..., "s3_key": ...}` with the String attribute `s3_extended_message` = "True")
and as it reads it (`_to_ackable_message`: an `s3_extended_message` attribute means "fetch
the body from the pointer"), so that a taskiq worker reads the sqsdelay route's large tasks
unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from sqsdelay.core import message_shape
from sqsdelay.core.types import Attributes

# taskiq_aio_sqs.constants.MAX_SQS_MESSAGE_SIZE: the body's length (characters) from which
# taskiq-aio-sqs offloads.
MAX_SQS_MESSAGE_SIZE: Final = 1_048_576
POINTER_ATTRIBUTE: Final = "s3_extended_message"


def offloaded(body: str) -> bool:
    """Whether taskiq-aio-sqs sends this body through S3: 1 MiB (in characters) or more."""
    return len(body) >= MAX_SQS_MESSAGE_SIZE


@dataclass(frozen=True)
class S3Pointer:
    """Where the task's body goes (`bucket`, `key`) and what SQS carries instead (`body`,
    `attributes`: the task's own, if a subclass adds any, and the pointer's)."""

    bucket: str
    key: str
    body: str
    attributes: Attributes


def pointer(bucket: str, task_id: str, attributes: Mapping[str, Any], *, unique: str) -> S3Pointer:
    """The S3 object and the message that points to it. taskiq-aio-sqs replaces the message's
    attributes with the pointer's; the task's own are kept here (its receive side reads only
    the pointer's), so that a subclass's attributes travel as they do on a small task.

    The key is `<task id>.<unique>.json`, one per kick (`unique`: e.g. a uuid4's hex), where
    taskiq-aio-sqs writes `<task id>.json`: a second kick of a task id still scheduled (which
    the registry sends nothing for, a duplicate) must not overwrite the body the first one's
    pointer names. Its receive side follows the pointer's `s3_key`, whatever it is."""
    key = f"{task_id}.{unique}.json"
    body = json.dumps({"s3_bucket": bucket, "s3_key": key})
    marked: Attributes = {**attributes, POINTER_ATTRIBUTE: message_shape.string_attribute("True")}
    return S3Pointer(bucket, key, body, marked)
