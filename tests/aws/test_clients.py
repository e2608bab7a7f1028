"""What every client sends: sqsdelay's own User-Agent, and client-side validation only where
the input comes from users (the worker's clients skip it; docs/benchmarks.md)."""

from __future__ import annotations

import asyncio
import re
from importlib.metadata import version
from typing import Any

import aioboto3
import boto3
import pytest
from botocore.exceptions import ParamValidationError

from sqsdelay.aws.clients import client_kwargs
from sqsdelay.settings import Settings


class _Sent(Exception):
    """Raised from `before-send`: the request is seen, and nothing goes on the wire."""

    def __init__(self, headers: Any) -> None:
        self.headers = headers


def _stop(request: Any, **_: Any) -> None:
    raise _Sent(request.headers)


def _settings() -> Settings:
    return Settings(endpoint_url="http://127.0.0.1:9", region="us-east-1")


def test_sync_client_names_sqsdelay_and_validates() -> None:
    client = boto3.client("sqs", **client_kwargs(_settings()))
    client.meta.events.register("before-send", _stop)
    with pytest.raises(_Sent) as sent:
        client.list_queues()
    agent = sent.value.headers["User-Agent"].decode()
    # as the README says: sqsdelay/<version>, then botocore's name and version (then what
    # others append: Powertools for AWS Lambda adds "PT/..." once it is imported)
    assert re.match(rf"sqsdelay/{re.escape(version('sqsdelay'))} Botocore/\S+", agent), agent
    with pytest.raises(ParamValidationError):
        client.send_message(QueueUrl="q", MessageBody="x", DelaySeconds="soon")


def test_worker_client_skips_validation() -> None:
    async def send() -> Any:
        kwargs = client_kwargs(_settings(), validate=False)
        async with aioboto3.Session().client("sqs", **kwargs) as client:
            client.meta.events.register("before-send", _stop)
            with pytest.raises(_Sent) as sent:
                # a wrong type reaches the wire (SQS would refuse it) instead of being checked
                await client.send_message(QueueUrl="q", MessageBody="x", DelaySeconds="soon")
            return sent.value.headers["User-Agent"]

    agent = asyncio.run(send())
    assert re.match(r"sqsdelay/\S+ botocore/\S+", agent.decode()), agent
