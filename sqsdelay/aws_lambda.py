"""The Lambda entry point, `sqsdelay.aws_lambda.handler` (docs/wire-format.md, "Lambda mode").

The driver lives in `sqsdelay.aws.lambda_driver`; this path stays for deployed functions.
"""

from sqsdelay.aws.lambda_driver import Handler, handler

__all__ = ["Handler", "handler"]
