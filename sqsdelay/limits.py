"""Amazon SQS quotas and the wire-format names sqsdelay relies on.

Emulators do not enforce all of these (moto accepts 11 attributes, for example), so the
client enforces every one of them itself.
"""

from typing import Final

MAX_NATIVE_DELAY_SECONDS: Final = 900
MAX_MESSAGE_BYTES: Final = 1_048_576
MAX_MESSAGE_ATTRIBUTES: Final = 10
MAX_BATCH_ENTRIES: Final = 10
MAX_QUEUE_NAME_LENGTH: Final = 80
MAX_ATTRIBUTE_NAME_LENGTH: Final = 256
MAX_DEDUP_ID_LENGTH: Final = 128
DEDUP_WINDOW_SECONDS: Final = 300
MIN_RETENTION_SECONDS: Final = 60
MAX_RETENTION_SECONDS: Final = 1_209_600
MIN_DELAY_QUEUE_RETENTION_SECONDS: Final = 345_600
MAX_VISIBILITY_TIMEOUT_SECONDS: Final = 43_200
LONG_POLL_SECONDS: Final = 20
# The largest visibility change the worker asks for: just under the 12 h quota, which SQS
# counts from the receive, not from the change.
MAX_BACKOFF_VISIBILITY_SECONDS: Final = 43_000
BILLING_CHUNK_BYTES: Final = 65_536

DELAY_QUEUE_SUFFIX: Final = "-delay.fifo"
# 80 characters minus the suffix: the longest destination name that can have a delay queue.
MAX_DESTINATION_NAME_LENGTH: Final = MAX_QUEUE_NAME_LENGTH - len(DELAY_QUEUE_SUFFIX)

# Wire format shared with the NServiceBus SQS transport.
DELAY_ATTRIBUTE: Final = "NServiceBus.AmazonSQS.DelaySeconds"
# Set on every delay-queue message, equal to its group and deduplication id. NServiceBus's
# pump sets this attribute on every requeue and hand-over; when it is already there it is
# overwritten instead of added, so a message that left room for it never reaches 11.
MESSAGE_ID_ATTRIBUTE: Final = "NServiceBus.MessageId"
# NServiceBus.AmazonSQS 6+ reads a raw body as a message of this type (native integration).
MESSAGE_TYPE_ATTRIBUTE: Final = "MessageTypeFullName"
# The delay queue's DelaySeconds below which an NServiceBus endpoint refuses to start
# (DelayedMessagesPump.Initialize).
NSERVICEBUS_QUEUE_DELAY_SECONDS: Final = 900
# Our own additions: absolute due time (broker epoch ms) and the failure record on the error queue.
DUE_AT_ATTRIBUTE: Final = "sqsdelay.DueAt"
FAILURE_ATTRIBUTE: Final = "sqsdelay.Failure"
OWN_ATTRIBUTES: Final = frozenset({DELAY_ATTRIBUTE, DUE_AT_ATTRIBUTE, FAILURE_ATTRIBUTE})
# Attributes the sender sets itself; a caller may not give them.
SENDER_ATTRIBUTES: Final = OWN_ATTRIBUTES | {MESSAGE_ID_ATTRIBUTE, MESSAGE_TYPE_ATTRIBUTE}

# Defaults of settings that are not SQS quotas, named once (settings.py, the CLI and docs).
DEFAULT_MAX_ATTEMPTS: Final = 5
# The longest delay sqsdelay accepts by default: ten years (of 365.25 days). A larger one is
# far more often a slip (milliseconds given as seconds) than a plan; the setting may go up
# to a century, which every hop expresses (NServiceBus's 64-bit seconds, Scheduler's at(),
# datetimes up to the year 9999).
SECONDS_PER_YEAR: Final = 31_557_600
DEFAULT_MAX_DELAY_SECONDS: Final = 10 * SECONDS_PER_YEAR
MAX_DELAY_SECONDS: Final = 100 * SECONDS_PER_YEAR
DEFAULT_VISIBILITY_TIMEOUT_SECONDS: Final = 60
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
# Fast path for FIFO delay queues: every message is its own group, so high-throughput mode
# (per-group limits) applies. NServiceBus creates queues without it, so it is only advised.
HIGH_THROUGHPUT_ATTRIBUTES: Final = {
    "DeduplicationScope": "messageGroup",
    "FifoThroughputLimit": "perMessageGroupId",
}
# Lambda: AWS advises a queue visibility timeout of at least 6x the function timeout.
LAMBDA_VISIBILITY_FACTOR: Final = 6
# Visibility timeout the installer gives a delay queue: 6x a 30 s Lambda timeout. The ECS
# worker passes its own VisibilityTimeout on every receive, so this only matters for Lambda.
DELAY_QUEUE_VISIBILITY_TIMEOUT_SECONDS: Final = 180
