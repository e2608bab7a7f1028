"""The Lambda entry point, `sqsdelay.aws_lambda.handler` (DESIGN.md, the Dockerfile, infra/).

The driver lives in `sqsdelay.aws.lambda_driver`; this path stays for deployed functions.
"""

from sqsdelay.aws.lambda_driver import Handler, handler

__all__ = ["Handler", "handler"]
