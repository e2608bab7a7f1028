"""A function in the emulator's Lambda, for the tests that inspect or map one."""

from __future__ import annotations

import io
import json
import uuid
import zipfile
from typing import Any

import boto3


def lambda_function(moto_url: str) -> tuple[Any, str]:
    """A function in the emulator's Lambda (moto wants an existing role and a zip; nothing
    here invokes it, so no Docker) and a Lambda client."""
    kwargs = {"endpoint_url": moto_url, "region_name": "us-east-1"}
    name = f"worker-{uuid.uuid4().hex[:8]}"
    role = boto3.client("iam", **kwargs).create_role(
        RoleName=name, AssumeRolePolicyDocument=json.dumps({"Statement": []})
    )["Role"]["Arn"]
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as z:
        z.writestr("handler.py", "def handler(event, context):\n    return None\n")
    client = boto3.client("lambda", **kwargs)
    client.create_function(
        FunctionName=name,
        Runtime="python3.12",
        Role=role,
        Handler="handler.handler",
        Code={"ZipFile": code.getvalue()},
    )
    return client, name
