"""Shared type aliases. Attribute values use boto3's shape so they pass through untouched."""

from typing import Literal, NotRequired, TypedDict


class AttributeValue(TypedDict):
    DataType: str
    StringValue: NotRequired[str]
    BinaryValue: NotRequired[bytes]


Attributes = dict[str, AttributeValue]
Route = Literal["direct", "delay-queue"]
Sent = Literal["direct", "delay-queue", "parked"]  # how a send went out
CancelOutcome = Literal["cancelled", "too-late", "unknown"]
RescheduleOutcome = Literal["rescheduled", "too-late", "unknown"]
Target = Literal["delay", "destination", "error"]  # the role of a queue in a trio
WireFormat = Literal["raw", "nservicebus"]
InvalidDelayAction = Literal["error", "deliver"]  # what the worker does with a bad delay
Parking = Literal["off", "scheduler"]  # where long delays wait
