"""What can be wrong with a delay, staging or error queue's attributes, each problem with
its fix. Pure: the installer (`--check`, `--fix`) and the worker's start both ask it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqsdelay.core import quotas, wire_format
from sqsdelay.core.queue_trios import (
    ERROR_QUEUE_RETENTION_SECONDS,
    QueueConfig,
    QueueSpec,
    sse_attributes,
)


@dataclass(frozen=True)
class Problem:
    queue: str
    problem: str
    fix: str
    attributes: dict[str, str] = field(default_factory=dict)  # what --fix would set
    needs_force: bool = False
    warning: bool = False  # advice only: `--check` still passes


def _int(attrs: dict[str, str], name: str) -> int:
    try:
        return int(attrs.get(name, "0"))
    except ValueError:
        return 0


def held_messages(attrs: dict[str, str]) -> int:
    return sum(
        _int(attrs, n)
        for n in (
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        )
    )


def check_queue(
    spec: QueueSpec, attrs: dict[str, str], config: QueueConfig, fix: str
) -> list[Problem]:
    """Every problem with a queue's attributes, each with `fix`: the command that fixes it."""
    q = spec.name
    fifo = attrs.get("FifoQueue", "false").lower() == "true"
    problems: list[Problem] = []
    # A queue's type follows from its name (only `.fifo` names are FIFO, and our names are
    # validated), so only attributes can be wrong.
    if spec.role == "destination":
        return problems
    if spec.role == "error":
        if _int(attrs, "MessageRetentionPeriod") < ERROR_QUEUE_RETENTION_SECONDS:
            problems.append(
                Problem(
                    q,
                    f"retention is {attrs.get('MessageRetentionPeriod')} s; failed "
                    f"messages are best kept {ERROR_QUEUE_RETENTION_SECONDS} s (14 days). "
                    "An NServiceBus endpoint sets it to its MaxTimeToLive at every start, "
                    "so agree on one value; --fix only ever raises it",
                    fix,
                    {"MessageRetentionPeriod": str(ERROR_QUEUE_RETENTION_SECONDS)},
                    warning=True,
                )
            )
        return problems
    if spec.role == "staging":
        return _staging_problems(q, attrs, fix, config)
    want_delay = config.max_native_delay_seconds
    have_delay = _int(attrs, "DelaySeconds")
    if have_delay != want_delay:
        problems.append(_delay_problem(q, fix, have_delay, want_delay, held_messages(attrs)))
    want_retention = config.delay_queue_retention_seconds
    if _int(attrs, "MessageRetentionPeriod") < want_retention:
        problems.append(
            Problem(
                q,
                f"retention is {attrs.get('MessageRetentionPeriod')} s, less than "
                f"{want_retention} s: messages could expire between cycles",
                fix,
                {"MessageRetentionPeriod": str(want_retention)},
            )
        )
    problems += _redrive_and_sse_problems(q, attrs, fix, config)
    slow = {k: v for k, v in quotas.HIGH_THROUGHPUT_ATTRIBUTES.items() if attrs.get(k) != v}
    if fifo and slow:
        problems.append(
            Problem(
                q,
                "high-throughput mode is off (NServiceBus creates delay queues without it): "
                "sends are limited to 300 calls/s per API action",
                fix,
                slow,
                warning=True,
            )
        )
    return problems


def _redrive_and_sse_problems(
    q: str, attrs: dict[str, str], fix: str, config: QueueConfig
) -> list[Problem]:
    problems = []
    if attrs.get("RedrivePolicy"):
        problems.append(
            Problem(
                q,
                "delay queue has a redrive policy; it would dead-letter messages that "
                "are only waiting",
                fix,
                {"RedrivePolicy": ""},
            )
        )
    if attrs.get("SqsManagedSseEnabled", "false").lower() != "true" and not attrs.get(
        "KmsMasterKeyId"
    ):
        problems.append(Problem(q, "server-side encryption is off", fix, sse_attributes(config)))
    return problems


def _staging_problems(
    q: str, attrs: dict[str, str], fix: str, config: QueueConfig
) -> list[Problem]:
    """A FIFO destination's staging queue: no queue-level delay (a hand-over with nothing
    left sends no DelaySeconds), no redrive (the worker retries and dead-letters itself),
    and the retention the delay queues are set to, SQSDELAY_DELAY_QUEUE_RETENTION_SECONDS (a
    warning: only a pause holds its messages long)."""
    problems = _redrive_and_sse_problems(q, attrs, fix, config)
    want = config.delay_queue_retention_seconds
    have = _int(attrs, "MessageRetentionPeriod")
    if have < want:
        problems.append(
            Problem(
                q,
                # The setting, not the delay queue's own value (not read here): what
                # `install` creates the delay queue with, and what --fix sets.
                f"retention is {have} s, shorter than SQSDELAY_DELAY_QUEUE_RETENTION_SECONDS "
                f"({want} s, the delay queues' setting): a pause of the destination longer "
                f"than {have / 86_400:g} days loses the forwards it holds here",
                fix,
                {"MessageRetentionPeriod": str(want)},
                warning=True,
            )
        )
    if _int(attrs, "DelaySeconds"):
        problems.append(
            Problem(
                q,
                f"DelaySeconds is {attrs.get('DelaySeconds')}, expected 0: it would delay "
                "the hand-overs that are due now",
                fix,
                {"DelaySeconds": "0"},
            )
        )
    return problems


def _delay_problem(queue: str, fix: str, have: int, want: int, held: int) -> Problem:
    """DelaySeconds differs. Changing it needs --force when the queue holds messages (the
    change applies to them too) or when it would go below 900: an NServiceBus endpoint that
    shares the queue then refuses to start (DelayedMessagesPump.Initialize)."""
    reasons = []
    if held:
        reasons.append(f"the queue holds {held} messages and the change applies to them too")
    if want < wire_format.NSERVICEBUS_QUEUE_DELAY_SECONDS <= have:
        reasons.append(
            f"below {wire_format.NSERVICEBUS_QUEUE_DELAY_SECONDS} s an NServiceBus endpoint that "
            "uses this queue refuses to start; lower it only for tests and demos"
        )
    return Problem(
        queue,
        f"DelaySeconds is {have}, expected {want}" + "".join(f"; {r}" for r in reasons),
        fix + (" --force" if reasons else ""),
        {"DelaySeconds": str(want)},
        needs_force=bool(reasons),
    )
