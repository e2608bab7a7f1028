"""The X-Ray trace header (the `AWSTraceHeader` system attribute, which X-Ray and
OpenTelemetry's AWS propagator read) rides every hop of a delayed message: every hop is a new
send, and SQS sets it only from the sender's request. It is not a message attribute: it does
not count towards the 10 (pure)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from sqsdelay.errors import InvalidMessage

ATTRIBUTE = "AWSTraceHeader"
AMBIENT = "_X_AMZN_TRACE_ID"  # set by Lambda and X-Ray's SDKs for the current trace
# "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1": printable
# ASCII without spaces, with a root.
_HEADER = re.compile(r"[\x21-\x7e]{1,2048}", re.ASCII)


def is_header(value: object) -> bool:
    return isinstance(value, str) and bool(_HEADER.fullmatch(value)) and "Root=" in value


def carried(system: Mapping[str, str]) -> str | None:
    """The received message's trace header to pass on, if it has a valid one (whatever a
    producer wrote, a bad one is left behind rather than have SQS refuse the message)."""
    value = system.get(ATTRIBUTE)
    return value if is_header(value) else None


def check(value: object) -> str:
    """A trace header given to the sender."""
    if not is_header(value):
        raise InvalidMessage(
            "trace_header is not an X-Ray trace header: give it as X-Ray writes it, e.g. "
            "'Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1'"
        )
    return str(value)


def system_attributes(header: str | None) -> dict[str, Any]:
    """The request's MessageSystemAttributes ({} without a header)."""
    if header is None:
        return {}
    return {"MessageSystemAttributes": {ATTRIBUTE: {"DataType": "String", "StringValue": header}}}
