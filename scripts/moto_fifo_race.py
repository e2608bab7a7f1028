#!/usr/bin/env python3
"""The smallest reproduction of moto handing one FIFO message to two concurrent receives.

    cd scripts && ../.venv/bin/python moto_fifo_race.py [--trials 10] [--emulator moto|fauxqs]

Each trial creates a FIFO queue with DelaySeconds 1, starts 8 long polls on it (visibility
timeout 30 s, three receives each) and sends 100 messages, each in its own group. Real SQS
gives each message to one receive only within the visibility timeout. Prints JSON: how many
messages were received more than once. boto3 only, plus the emulator.
"""

from __future__ import annotations

import argparse
import json
import threading
import uuid
from collections import Counter
from typing import Any

from benchkit import EmulatorProcess, client

POLLERS = 8
MESSAGES = 100


def trial(sender: Any, pollers: list[Any], url: str) -> Counter[str]:
    seen: Counter[str] = Counter()
    lock = threading.Lock()

    def poll(sqs: Any) -> None:
        for _ in range(3):
            answer = sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=30, WaitTimeSeconds=2
            )
            with lock:
                seen.update(m["MessageId"] for m in answer.get("Messages", []))

    threads = [threading.Thread(target=poll, args=(c,)) for c in pollers]
    for t in threads:
        t.start()
    for start in range(0, MESSAGES, 10):
        entries = [
            {
                "Id": str(i),
                "MessageBody": f"m{start + i}",
                "MessageGroupId": uuid.uuid4().hex,
                "MessageDeduplicationId": uuid.uuid4().hex,
            }
            for i in range(10)
        ]
        sender.send_message_batch(QueueUrl=url, Entries=entries)
    for t in threads:
        t.join()
    return seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--emulator", choices=["moto", "fauxqs"], default="moto")
    args = parser.parse_args()
    emulator = EmulatorProcess(args.emulator)
    received = twice = trials_with = 0
    try:
        sender = client(emulator.url)
        pollers = [client(emulator.url) for _ in range(POLLERS)]
        for i in range(args.trials):
            attributes = {"FifoQueue": "true", "DelaySeconds": "1"}
            url = sender.create_queue(QueueName=f"race{i}.fifo", Attributes=attributes)
            seen = trial(sender, pollers, url["QueueUrl"])
            extra = sum(n - 1 for n in seen.values())
            received, twice, trials_with = (
                received + len(seen),
                twice + extra,
                trials_with + (extra > 0),
            )
    finally:
        emulator.stop()
    report = {
        "emulator": emulator.name,
        "trials": args.trials,
        "messages_received": received,
        "extra_receives_within_visibility": twice,
        "trials_with_a_double_receive": trials_with,
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
