"""Cost allocation tags on everything sqsdelay creates (pure).

`sqsdelay:component` says what a resource is; `sqsdelay:destination` which destination it
serves (the SQS name), where it serves one. Activated as cost allocation tags, they let the
bill be split by component and destination (`docs/cost-report.md`).
"""

from typing import Literal

COMPONENT = "sqsdelay:component"
DESTINATION = "sqsdelay:destination"
Component = Literal[
    "delay-queue", "destination-queue", "error-queue", "registry", "schedule-group", "worker"
]


def tags(component: Component, destination: str | None = None) -> dict[str, str]:
    """As SQS's CreateQueue takes them."""
    out: dict[str, str] = {COMPONENT: component}
    if destination is not None:
        out[DESTINATION] = destination
    return out


def tag_list(component: Component, destination: str | None = None) -> list[dict[str, str]]:
    """As DynamoDB and EventBridge Scheduler take them."""
    return [{"Key": k, "Value": v} for k, v in tags(component, destination).items()]
