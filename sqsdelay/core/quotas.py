"""Amazon SQS quotas sqsdelay relies on (docs/sqs-limits.md).

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
MAX_VISIBILITY_TIMEOUT_SECONDS: Final = 43_200
LONG_POLL_SECONDS: Final = 20
# The largest visibility change the worker asks for: just under the 12 h quota, which SQS
# counts from the receive, not from the change.
MAX_BACKOFF_VISIBILITY_SECONDS: Final = 43_000
BILLING_CHUNK_BYTES: Final = 65_536
# Fast path for FIFO delay queues: every message is its own group, so high-throughput mode
# (per-group limits) applies. NServiceBus creates queues without it, so it is only advised.
HIGH_THROUGHPUT_ATTRIBUTES: Final = {
    "DeduplicationScope": "messageGroup",
    "FifoThroughputLimit": "perMessageGroupId",
}
# Lambda: AWS advises a queue visibility timeout of at least 6x the function timeout.
LAMBDA_VISIBILITY_FACTOR: Final = 6
