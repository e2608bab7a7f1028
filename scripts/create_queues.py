#!/usr/bin/env python3
"""Create a destination queue, its delay queue and the error queue by hand (boto3 only).

For teams that do not run `sqsdelay install`. Needs nothing but boto3, so it can be copied
into any pipeline. Equivalent AWS CLI commands are in the README.

    python scripts/create_queues.py orders [--prefix PREFIX] [--error-queue error]
        [--delay-seconds 900] [--retention-seconds 345600] [--endpoint-url URL]
"""

from __future__ import annotations

import argparse
import sys

import boto3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("queue", nargs="+")
    parser.add_argument("--prefix", default="")
    parser.add_argument("--error-queue", default="error")
    parser.add_argument("--delay-seconds", type=int, default=900)
    parser.add_argument("--retention-seconds", type=int, default=345_600)
    parser.add_argument("--endpoint-url")
    parser.add_argument("--region")
    args = parser.parse_args(argv)
    if not 0 < args.delay_seconds <= 900 or not 345_600 <= args.retention_seconds <= 1_209_600:
        parser.error("--delay-seconds must be 1..900 and --retention-seconds 345600..1209600")
    sqs = boto3.client("sqs", endpoint_url=args.endpoint_url, region_name=args.region)
    sse = {"SqsManagedSseEnabled": "true"}
    for queue in args.queue:
        name = args.prefix + queue
        if len(name) > 69:
            parser.error(f"{name!r} is longer than 69 characters; {name}-delay.fifo would not fit")
        print(sqs.create_queue(QueueName=name, Attributes=sse)["QueueUrl"])
        delay = sqs.create_queue(
            QueueName=f"{name}-delay.fifo",
            Attributes={
                "FifoQueue": "true",
                "DelaySeconds": str(args.delay_seconds),
                "MessageRetentionPeriod": str(args.retention_seconds),
                # high-throughput mode: every message is its own group
                "DeduplicationScope": "messageGroup",
                "FifoThroughputLimit": "perMessageGroupId",
                **sse,
            },
        )
        print(delay["QueueUrl"])
    error = sqs.create_queue(
        QueueName=args.prefix + args.error_queue,
        Attributes={"MessageRetentionPeriod": "1209600", **sse},
    )
    print(error["QueueUrl"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
