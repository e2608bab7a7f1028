"""Installing a test's queues the way `sqsdelay install` does, and their URLs; sending
straight into a delay queue as a foreign producer does."""

from __future__ import annotations

from typing import Any

from sqsdelay.aws.installer import Installer
from sqsdelay.core import wire_format
from sqsdelay.settings import Settings


def install(
    settings: Settings,
    sqs: Any,
    *queues: str,
    scheduler: Any = None,
    dynamodb: Any = None,
    check: bool = False,
) -> dict[str, str]:
    """Create the queues of these destinations (default: orders), the schedule group when
    the settings park, and the registry table when given a DynamoDB client; their URLs by
    queue name without the prefix (`orders`, `orders-delay.fifo`, `error`, ...). With
    `check`, an `install --check` afterwards must find nothing wrong."""
    names = list(queues or ["orders"])
    installer = Installer(settings, client=sqs, scheduler=scheduler)
    reports = installer.run(names)
    if settings.parking == "scheduler":
        installer.schedule_group(names)
    if dynamodb is not None:
        table = installer.registry_table(names, dynamodb=dynamodb)
        assert table.problems == []
    if check:
        checked = installer.run(names, create=False)
        assert [p.problem for r in checked for p in r.problems] == []
    return {r.spec.name.removeprefix(settings.queue_prefix): str(r.url) for r in reports}


def send_raw(sqs: Any, url: str, body: str, delay: str | None, **extra: Any) -> None:
    """A message sent straight into a delay queue, as a foreign producer would: its group
    and deduplication id are its body; `delay` (text, or None for none) and `extra`
    attributes as given."""
    attrs = dict(extra)
    if delay is not None:
        attrs[wire_format.DELAY_ATTRIBUTE] = {"DataType": "String", "StringValue": delay}
    sqs.send_message(
        QueueUrl=url,
        MessageBody=body,
        MessageGroupId=body,
        MessageDeduplicationId=body,
        MessageAttributes=attrs,
    )
