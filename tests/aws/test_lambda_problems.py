"""`sqsdelay inspect --lambda F` asking GetFunctionRecursionConfig per function
(aws/operations.py's `lambda_problems`; the check itself is core/lambda_checks.py's,
tests/core/test_lambda_checks.py). moto 5.2.5 has no GetFunctionRecursionConfig: the replies
are Lambda's documented ones, answered by botocore's Stubber."""

from __future__ import annotations

import boto3
import pytest
from botocore.stub import Stubber

from sqsdelay.aws.operations import lambda_problems
from sqsdelay.errors import SqsDelayError
from sqsdelay.settings import Settings


def test_only_functions_that_would_stop_are_reported() -> None:
    client = boto3.client("lambda", region_name="us-east-1", aws_access_key_id="x",
                          aws_secret_access_key="x")  # fmt: skip
    with Stubber(client) as stub:
        stub.add_response("get_function_recursion_config", {"RecursiveLoop": "Allow"},
                          {"FunctionName": "a"})  # fmt: skip
        stub.add_response("get_function_recursion_config", {"RecursiveLoop": "Terminate"},
                          {"FunctionName": "b"})  # fmt: skip
        problems = lambda_problems(Settings(region="us-east-1"), ["a", "b"], client=client)
    assert [p.queue for p in problems] == ["b"]
    assert "--function-name b --recursive-loop Allow" in problems[0].fix


def test_a_refused_call_names_the_operation_and_the_function() -> None:
    client = boto3.client("lambda", region_name="us-east-1", aws_access_key_id="x",
                          aws_secret_access_key="x")  # fmt: skip
    with Stubber(client) as stub:
        stub.add_client_error("get_function_recursion_config", "AccessDeniedException")
        with pytest.raises(SqsDelayError) as err:
            lambda_problems(Settings(region="us-east-1"), ["fn"], client=client)
    assert "GetFunctionRecursionConfig" in str(err.value) and "fn" in str(err.value)
