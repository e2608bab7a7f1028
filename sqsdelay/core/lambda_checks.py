"""What can be wrong with a Lambda worker function, and its fix (pure).

The worker sends every message back to the delay queue that triggers it, once a cycle.
Lambda's recursive loop detection, on by default (`Terminate`), stops invoking a function
for a message after about 16 such hops, so a delay longer than 16 cycles stops moving and
expires in the delay queue (docs/lambda-recursion.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqsdelay.core.queue_checks import Problem

ALLOW = "Allow"


def recursion_problem(function: str, reply: Mapping[str, Any]) -> Problem | None:
    """GetFunctionRecursionConfig's reply for `function`: a problem unless it is Allow (an
    absent value is Lambda's default, Terminate)."""
    loop = reply.get("RecursiveLoop") or "Terminate"
    if loop == ALLOW:
        return None
    return Problem(
        queue=function,
        problem=(
            f"Lambda function {function!r} has recursive loop detection {loop!r}: it stops "
            "after about 16 cycles of a message, which then expires in the delay queue"
        ),
        fix=(
            f"aws lambda put-function-recursion-config --function-name {function} "
            "--recursive-loop Allow (infra/worker-lambda.yaml sets RecursiveLoop: Allow)"
        ),
    )


# AWS's guidance for an SQS trigger: the queue's visibility timeout at least six times the
# function's timeout (Lambda Developer Guide, "Using Lambda with Amazon SQS"), so that the
# poller's retries of a throttled batch end before its messages come back.
VISIBILITY_PER_TIMEOUT = 6


def visibility_problem(function: str, timeout: int, queue: str, visibility: int) -> Problem | None:
    """`queue`, whose visibility timeout is `visibility` s, triggers `function`, whose timeout
    is `timeout` s: a problem unless the visibility is at least six times the timeout."""
    need = VISIBILITY_PER_TIMEOUT * timeout
    if visibility >= need:
        return None
    return Problem(
        queue=queue,
        problem=(
            f"visibility timeout {visibility} s is less than {VISIBILITY_PER_TIMEOUT} x the "
            f"timeout of the Lambda function {function!r} it triggers ({timeout} s): a batch "
            "the poller retries can come back while it is still in hand"
        ),
        fix=(
            f"raise the queue's VisibilityTimeout to at least {need} s (queues.yaml "
            "DelayQueueVisibilityTimeoutSeconds), or lower the function's timeout to at most "
            f"{visibility // VISIBILITY_PER_TIMEOUT} s (worker-lambda.yaml TimeoutSeconds)"
        ),
    )
