"""Counting calls and throttled attempts from botocore's own events, against a loopback HTTP
server that throttles every request as SQS does (no emulator throttles)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from sqsdelay.aws.clients import observe
from sqsdelay.core.outcomes import Stats


class _Throttling(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = json.dumps({"__type": "com.amazonaws.sqs#ThrottlingException", "message": "slow"})
        self.send_response(400)
        self.send_header("Content-Type", "application/x-amz-json-1.0")
        self.send_header("x-amzn-query-error", "ThrottlingException;Sender")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def throttling_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Throttling)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_every_throttled_attempt_is_counted_once_per_call_made(throttling_url: str) -> None:
    sqs = boto3.client(
        "sqs",
        endpoint_url=throttling_url,
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
        config=Config(retries={"mode": "standard", "max_attempts": 3}),
    )
    stats = Stats()
    observe(stats, sqs)
    with pytest.raises(ClientError) as caught:
        sqs.send_message(QueueUrl=f"{throttling_url}/123456789012/orders", MessageBody="x")
    assert caught.value.response["Error"]["Code"] == "ThrottlingException"
    assert stats.tally.calls == {("sqs", "SendMessage"): 1}  # one call; botocore retried it
    # Every attempt throttled: the first and botocore's 3 retries (in the `retries` setting,
    # max_attempts counts retries; total_max_attempts would count all).
    assert stats.tally.throttled == {("sqs", "SendMessage"): 4}
    assert stats.calls == {("SendMessage", "orders"): 1}
