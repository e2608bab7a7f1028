"""Message shape rules: attribute names, sizes, counts and our own attributes (pure)."""

import re

from sqsdelay.core import quotas, wire_format
from sqsdelay.core.types import Attributes, AttributeValue
from sqsdelay.errors import InvalidMessage, MessageTooLarge, TooManyAttributes

_ATTRIBUTE_NAME = re.compile(r"[A-Za-z0-9_.-]+")
# Characters SQS accepts in a body: #x9 #xA #xD #x20-#xD7FF #xE000-#xFFFD #x10000-#x10FFFF.
_BAD_BODY_CHAR = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_DATA_TYPE = re.compile(r"(String|Number|Binary)(\.[A-Za-z0-9_.-]{1,200})?")


def check_attribute_name(name: str) -> None:
    lowered = name.lower()
    if (
        not _ATTRIBUTE_NAME.fullmatch(name)
        or len(name) > quotas.MAX_ATTRIBUTE_NAME_LENGTH
        or name.startswith(".")
        or name.endswith(".")
        or ".." in name
        or lowered.startswith(("aws.", "amazon."))
    ):
        raise InvalidMessage(
            f"message attribute name {name!r} is not valid: use up to 256 characters of "
            "A-Z a-z 0-9 _ - ., no leading, trailing or double '.', and no AWS./Amazon. prefix"
        )


def check_attribute_value(name: str, value: AttributeValue) -> None:
    data_type = value.get("DataType", "")
    if not _DATA_TYPE.fullmatch(data_type):
        raise InvalidMessage(
            f"attribute {name!r} has data type {data_type!r}; use String, Number or Binary"
        )
    key = "BinaryValue" if data_type.startswith("Binary") else "StringValue"
    if key not in value:
        raise InvalidMessage(f"attribute {name!r} of type {data_type} needs a {key}")


def attribute_size(name: str, value: AttributeValue) -> int:
    """Bytes an attribute counts towards the message size: name, data type and value."""
    payload = value.get("BinaryValue", b"") or value.get("StringValue", "").encode()
    return len(name.encode()) + len(value["DataType"].encode()) + len(payload)


def message_size(body: str, attributes: Attributes) -> int:
    return len(body.encode()) + sum(attribute_size(n, v) for n, v in attributes.items())


def check_body(body: str) -> None:
    if not isinstance(body, str) or not body:
        raise InvalidMessage("message body must be a non-empty string")
    bad = _BAD_BODY_CHAR.search(body)
    if bad:
        raise InvalidMessage(
            f"message body contains character U+{ord(bad.group()):04X} at position "
            f"{bad.start()}, which SQS does not accept; encode binary data (e.g. base64)"
        )


def check_fits(body: str, attributes: Attributes, max_bytes: int) -> None:
    """Raise if a message breaks the attribute-count or size limit."""
    if len(attributes) > quotas.MAX_MESSAGE_ATTRIBUTES:
        raise TooManyAttributes(
            f"message has {len(attributes)} attributes (including sqsdelay's own); SQS allows "
            f"{quotas.MAX_MESSAGE_ATTRIBUTES}: move some into the body"
        )
    size = message_size(body, attributes)
    if size > max_bytes:
        raise MessageTooLarge(
            f"message is {size} bytes (body plus attributes); the limit is {max_bytes} "
            "(SQSDELAY_MAX_MESSAGE_BYTES): store the payload elsewhere, e.g. S3, and send a "
            "reference"
        )


def check_user_attributes(attributes: Attributes) -> None:
    for name, value in attributes.items():
        check_attribute_name(name)
        if name in wire_format.SENDER_ATTRIBUTES:
            raise InvalidMessage(
                f"attribute {name!r} is set by sqsdelay; leave it out (a message type goes "
                "in --message-type / message_type)"
            )
        check_attribute_value(name, value)


def string_attribute(value: str) -> AttributeValue:
    return {"DataType": "String", "StringValue": value}


def number_attribute(value: int) -> AttributeValue:
    return {"DataType": "Number", "StringValue": str(value)}


def string_value(attributes: Attributes, name: str) -> str | None:
    """The StringValue of an attribute, or None when it is absent."""
    value = attributes.get(name)
    return value.get("StringValue") if value else None


def without_own(attributes: Attributes) -> Attributes:
    """The attributes without sqsdelay's own (`wire_format.OWN_ATTRIBUTES`)."""
    return {k: v for k, v in attributes.items() if k not in wire_format.OWN_ATTRIBUTES}
