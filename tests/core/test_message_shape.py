import pytest

from sqsdelay.core import message_shape, quotas, wire_format
from sqsdelay.errors import InvalidMessage, MessageTooLarge, TooManyAttributes


def test_attribute_size_counts_name_type_and_value() -> None:
    assert (
        message_shape.attribute_size("ab", {"DataType": "String", "StringValue": "héllo"})
        == 2 + 6 + 6
    )
    assert (
        message_shape.attribute_size("b", {"DataType": "Binary", "BinaryValue": b"\x00\x01"})
        == 1 + 6 + 2
    )


def test_message_size_is_body_plus_attributes() -> None:
    attrs = {"a": message_shape.string_attribute("1")}
    assert message_shape.message_size("€", attrs) == 3 + 1 + 6 + 1


def test_eleven_attributes_are_refused() -> None:
    attrs = {f"a{i}": message_shape.string_attribute("v") for i in range(11)}
    with pytest.raises(TooManyAttributes, match="SQS allows 10"):
        message_shape.check_fits("x", attrs, quotas.MAX_MESSAGE_BYTES)
    del attrs["a10"]
    message_shape.check_fits("x", attrs, quotas.MAX_MESSAGE_BYTES)


def test_size_limit_is_exact() -> None:
    message_shape.check_fits("x" * 1024, {}, 1024)
    with pytest.raises(MessageTooLarge, match="SQSDELAY_MAX_MESSAGE_BYTES"):
        message_shape.check_fits("x" * 1025, {}, 1024)


@pytest.mark.parametrize(
    "name", ["", ".a", "a.", "a..b", "AWS.x", "amazon.y", "sp ace", "x" * 257, "ü"]
)
def test_bad_attribute_names(name: str) -> None:
    with pytest.raises(InvalidMessage):
        message_shape.check_attribute_name(name)


def test_reserved_and_malformed_attributes() -> None:
    with pytest.raises(InvalidMessage, match="set by sqsdelay"):
        message_shape.check_user_attributes(
            {wire_format.DELAY_ATTRIBUTE: message_shape.string_attribute("5")}
        )
    for name in (wire_format.MESSAGE_ID_ATTRIBUTE, wire_format.MESSAGE_TYPE_ATTRIBUTE):
        with pytest.raises(InvalidMessage, match="set by sqsdelay"):
            message_shape.check_user_attributes({name: message_shape.string_attribute("x")})
    with pytest.raises(InvalidMessage, match="data type"):
        message_shape.check_user_attributes({"a": {"DataType": "Blob", "StringValue": "x"}})
    with pytest.raises(InvalidMessage, match="needs a BinaryValue"):
        message_shape.check_user_attributes({"a": {"DataType": "Binary", "StringValue": "x"}})
    message_shape.check_user_attributes({"a": {"DataType": "Number.int", "StringValue": "5"}})


@pytest.mark.parametrize("body", ["", "\x00", "ok\x08"])
def test_bodies_sqs_would_reject(body: str) -> None:
    with pytest.raises(InvalidMessage):
        message_shape.check_body(body)


def test_unicode_body_is_fine() -> None:
    message_shape.check_body("grüße 👋\n\t")
