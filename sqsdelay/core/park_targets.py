"""Where each delay queue's parked messages go back to (`parking.ParkTarget`): the delay
queue's URL, and the error queue's ARN for Scheduler's failures, looked up once per delay
queue and account. None when parking is off or the queues cannot be looked up: the loop.
"""

from __future__ import annotations

from sqsdelay.core.flows import Flow
from sqsdelay.core.parking import ParkTarget
from sqsdelay.core.queue_lookup import QueueLookup
from sqsdelay.core.queue_trios import QueueTrio
from sqsdelay.errors import SqsOperationError
from sqsdelay.logs import get_logger

log = get_logger("sqsdelay.aws.queue_urls")

# (partition, region) of the SQS client the queues were looked up with: "aws", "eu-west-1".
Place = tuple[str, str]


def park_target(
    group: str, role_arn: str, delay_queue_url: str, error_queue_url: str, place: Place
) -> ParkTarget:
    """Where Scheduler sends a parked message back to; its failures go to the error queue.
    The error queue's ARN is read off its URL (.../ACCOUNT/NAME) and the client's region
    and partition, which spares a GetQueueAttributes call and its IAM grant."""
    account, name = error_queue_url.rstrip("/").split("/")[-2:]
    partition, region = place
    return ParkTarget(
        group=group,
        role_arn=role_arn,
        delay_queue_url=delay_queue_url,
        dead_letter_arn=f"arn:{partition}:sqs:{region}:{account}:{name}",
    )


class ParkTargets:
    """The park target of each delay queue (and account), looked up once. `role_arn` None:
    parking is off."""

    def __init__(self, group: str, role_arn: str | None, resolver: QueueLookup) -> None:
        self.group = group
        self.role_arn = role_arn
        self.resolver = resolver
        self._targets: dict[tuple[str, str], ParkTarget] = {}

    def lookup(self, t: QueueTrio, place: Place, account: str = "") -> Flow[ParkTarget | None]:
        if self.role_arn is None or t.forwards:  # a forward never parks
            return None
        key = (t.delay, account)
        if key not in self._targets:
            try:
                url = yield from self.resolver.lookup(t.delay, account)
                error_url = yield from self.resolver.lookup(t.error, account)
            except SqsOperationError as exc:
                log.warning("scheduler.no_target", queue=t.delay, code=exc.code)
                return None
            self._targets[key] = park_target(self.group, self.role_arn, url, error_url, place)
        return self._targets[key]
