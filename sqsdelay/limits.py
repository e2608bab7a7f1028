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
BILLING_CHUNK_BYTES: Final = 65_536

DELAY_QUEUE_SUFFIX: Final = "-delay.fifo"
# 80 characters minus the suffix: the longest destination name that can have a delay queue.
MAX_DESTINATION_NAME_LENGTH: Final = MAX_QUEUE_NAME_LENGTH - len(DELAY_QUEUE_SUFFIX)

# Wire format shared with the NServiceBus SQS transport.
DELAY_ATTRIBUTE: Final = "NServiceBus.AmazonSQS.DelaySeconds"
# Our own additions: absolute due time (broker epoch ms) and the failure record on the error queue.
DUE_AT_ATTRIBUTE: Final = "sqsdelay.DueAt"
FAILURE_ATTRIBUTE: Final = "sqsdelay.Failure"
OWN_ATTRIBUTES: Final = frozenset({DELAY_ATTRIBUTE, DUE_AT_ATTRIBUTE, FAILURE_ATTRIBUTE})
