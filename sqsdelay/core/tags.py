"""Cost allocation tags on everything sqsdelay creates (pure).

`sqsdelay:component` says what a resource is; `sqsdelay:destination` which destination it
serves (the SQS name), where it serves one. Activated as cost allocation tags, they let the
bill be split by component and destination (`docs/cost-report.md`).
"""

from collections.abc import Mapping
from typing import Literal

from sqsdelay.core.queue_trios import Role

COMPONENT = "sqsdelay:component"
DESTINATION = "sqsdelay:destination"
Component = Literal[
    "delay-queue", "destination-queue", "error-queue", "registry", "schedule-group", "worker"
]

# Which component a queue is, by its role: the one rule for the installer's tags, the bill's
# booking, the estimate's split and the FOCUS rows. A FIFO destination's staging queue
# carries only sqsdelay's hand-overs and forwards, so it is part of the delays, like the
# delay queue; the destination queue's requests cannot be told from the application's.
QUEUE_COMPONENTS: Mapping[Role, Component] = {
    "destination": "destination-queue",
    "delay": "delay-queue",
    "staging": "delay-queue",
    "error": "error-queue",
}


def queue_component(role: Role) -> Component:
    return QUEUE_COMPONENTS[role]


def tags(component: Component, destination: str | None = None) -> dict[str, str]:
    """As SQS's CreateQueue takes them."""
    out: dict[str, str] = {COMPONENT: component}
    if destination is not None:
        out[DESTINATION] = destination
    return out


def tag_list(component: Component, destination: str | None = None) -> list[dict[str, str]]:
    """As DynamoDB and EventBridge Scheduler take them."""
    return [{"Key": k, "Value": v} for k, v in tags(component, destination).items()]
