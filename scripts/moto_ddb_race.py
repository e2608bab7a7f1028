#!/usr/bin/env python3
"""The smallest reproduction of moto letting two conditional writes on one item both win.

    cd scripts && ../.venv/bin/python moto_ddb_race.py [--items 300] [--serialised]

For each item, 8 threads send at once `UpdateItem SET s = :me` on condition `s = :scheduled`.
DynamoDB lets exactly one of them win; moto's backend reads, checks and writes without a lock.
`--serialised` applies the embedded emulator's remedy (`sqsdelay.dev.emulator`). Prints JSON:
how many items had more than one winner. boto3 and moto's server only.
"""

from __future__ import annotations

import argparse
import json
import logging
import threading
from typing import Any

import boto3
from moto.server import ThreadedMotoServer

WRITERS = 8


def race(clients: list[Any], item: str) -> int:
    wins: list[int] = []
    start = threading.Barrier(len(clients))

    def write(n: int, ddb: Any) -> None:
        start.wait()
        try:
            ddb.update_item(
                TableName="t",
                Key={"id": {"S": item}},
                UpdateExpression="SET s = :me",
                ConditionExpression="s = :scheduled",
                ExpressionAttributeValues={":me": {"S": str(n)}, ":scheduled": {"S": "scheduled"}},
            )
            wins.append(n)
        except ddb.exceptions.ConditionalCheckFailedException:
            pass

    threads = [threading.Thread(target=write, args=(n, c)) for n, c in enumerate(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return len(wins)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=300)
    parser.add_argument("--serialised", action="store_true")
    args = parser.parse_args()
    if args.serialised:
        from sqsdelay.dev.emulator import _serialise_moto_writes

        _serialise_moto_writes()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    kwargs = {
        "endpoint_url": f"http://{host}:{port}",
        "region_name": "us-east-1",
        "aws_access_key_id": "testing",
        "aws_secret_access_key": "testing",
    }
    clients = [boto3.client("dynamodb", **kwargs) for _ in range(WRITERS)]
    ddb = clients[0]
    ddb.create_table(
        TableName="t",
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    doubled = 0
    try:
        for n in range(args.items):
            ddb.put_item(TableName="t", Item={"id": {"S": str(n)}, "s": {"S": "scheduled"}})
            doubled += race(clients, str(n)) > 1
    finally:
        server.stop()
    result = {"serialised": args.serialised, "items": args.items, "writers": WRITERS}
    print(json.dumps({**result, "items_with_more_than_one_winner": doubled}))


if __name__ == "__main__":
    main()
