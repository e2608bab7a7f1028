"""Defaults and bounds of settings that are not SQS quotas, named once (settings, CLI, docs)."""

from typing import Final

DEFAULT_MAX_ATTEMPTS: Final = 5
# The longest delay sqsdelay accepts by default: ten years (of 365.25 days). A larger one is
# far more often a slip (milliseconds given as seconds) than a plan; the setting may go up
# to a century, which every hop expresses (NServiceBus's 64-bit seconds, Scheduler's at(),
# datetimes up to the year 9999).
SECONDS_PER_YEAR: Final = 31_557_600
DEFAULT_MAX_DELAY_SECONDS: Final = 10 * SECONDS_PER_YEAR
MAX_DELAY_SECONDS: Final = 100 * SECONDS_PER_YEAR
# The delay queue keeps a message at least 4 days (docs/wire-format.md), well past any outage.
MIN_DELAY_QUEUE_RETENTION_SECONDS: Final = 345_600
DEFAULT_VISIBILITY_TIMEOUT_SECONDS: Final = 60
# The worker receives with this short visibility and extends it to the visibility timeout only
# for a batch still in hand at half of it: a receive whose answer is lost (its messages are
# invisible, and nobody holds them) then costs seconds, not the whole visibility timeout.
DEFAULT_RECEIVE_VISIBILITY_SECONDS: Final = 3
# Every non-receive SQS call (send, delete, visibility change) is abandoned after this long,
# so a stop never waits on a hung connection longer than the stop budget allows.
DEFAULT_CALL_TIMEOUT_SECONDS: Final = 10
# SIGTERM: polls in progress may return (up to one long poll), then the batch in hand is
# finished within its budget: at most this many call time limits, whatever calls it makes
# (Scheduler's, sends, delete, hold). ECS's stopTimeout in infra/worker-ecs.yaml covers it.
STOP_CALLS: Final = 5
# The share of the visibility timeout a batch's calls may use; the rest is the margin before
# a message in hand could be received again.
BATCH_BUDGET_SHARE: Final = 0.8
# Visibility timeout the installer gives a delay queue: 6x a 30 s Lambda timeout. The ECS
# worker passes its own VisibilityTimeout on every receive, so this only matters for Lambda.
DELAY_QUEUE_VISIBILITY_TIMEOUT_SECONDS: Final = 180

# A long poll is given up this long after its WaitTimeSeconds (the worker's own deadline).
RECEIVE_MARGIN_SECONDS = 5
