"""The wire format's names: the delay queue suffix and the message attributes.

Shared with the NServiceBus SQS transport, plus sqsdelay's own two attributes.
"""

from typing import Final

from sqsdelay.core.quotas import MAX_QUEUE_NAME_LENGTH

DELAY_QUEUE_SUFFIX: Final = "-delay.fifo"
# 80 characters minus the suffix: the longest destination name that can have a delay queue.
MAX_DESTINATION_NAME_LENGTH: Final = MAX_QUEUE_NAME_LENGTH - len(DELAY_QUEUE_SUFFIX)
# sqsdelay's own, for FIFO destinations (`<base>.fifo`), which NServiceBus does not delay
# into: the delay queue `<base>-delay-fifo.fifo` (it cannot be `<base>-delay.fifo`, the delay
# queue of the standard destination `<base>`), and the standard staging queue
# `<base>-fifo-staging` that takes the last hop's DelaySeconds (docs/fifo-destinations.md).
FIFO_SUFFIX: Final = ".fifo"
FIFO_DELAY_QUEUE_SUFFIX: Final = "-delay-fifo.fifo"
STAGING_QUEUE_SUFFIX: Final = "-fifo-staging"
# The FIFO destination's message group, carried through the delay and staging queues (whose
# own groups are one per message).
GROUP_ID_ATTRIBUTE: Final = "sqsdelay.GroupId"

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
# The requested delay in milliseconds, set by the sender when it has a fraction of a second
# (DelaySeconds above is whole seconds, rounded up); the first worker turns it into DueAt.
DELAY_MS_ATTRIBUTE: Final = "sqsdelay.DelayMilliseconds"
# The retry a consumer's `retry_later` made of a message (1, 2, ...): the backoff counts it,
# and the idempotency guard keys on it, so a retry runs again while a duplicate does not.
ATTEMPT_ATTRIBUTE: Final = "sqsdelay.Attempt"
# A replay from the error queue (`replay-errors`, the console's "replay selected",
# docs/consumers.md#replay): a token new for each replay, carried to the destination and
# through a consumer's retries. The registry takes a token its record has not seen as a new
# delivery of a handed-over message, and the guard keys on it, so a replay is neither dropped
# as a duplicate nor skipped as already processed.
REPLAY_ATTRIBUTE: Final = "sqsdelay.Replay"
# A caller's deduplication id (`send(..., deduplication_id=)`, taskiq-aio-sqs's
# MessageDeduplicationId), for a FIFO destination: carried through the delay and staging
# queues, it becomes the forward's MessageDeduplicationId (`fifo_dedup.forward_key`)
# and is left behind there, as sqsdelay.GroupId is.
DEDUPLICATION_ID_ATTRIBUTE: Final = "sqsdelay.DeduplicationId"
OWN_ATTRIBUTES: Final = frozenset(
    {DELAY_ATTRIBUTE, DUE_AT_ATTRIBUTE, FAILURE_ATTRIBUTE, DELAY_MS_ATTRIBUTE}
)
# Attributes the sender sets itself; a caller may not give them.
SENDER_ATTRIBUTES: Final = OWN_ATTRIBUTES | {
    MESSAGE_ID_ATTRIBUTE,
    MESSAGE_TYPE_ATTRIBUTE,
    GROUP_ID_ATTRIBUTE,
    DEDUPLICATION_ID_ATTRIBUTE,
}
