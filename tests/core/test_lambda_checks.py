"""The Lambda worker's recursion check (core/lambda_checks.py) on GetFunctionRecursionConfig's
replies. `sqsdelay inspect --lambda F` asking for them is tests/aws/test_lambda_problems.py."""

from __future__ import annotations

import pytest

from sqsdelay.core.lambda_checks import recursion_problem


def test_allow_is_fine() -> None:
    assert recursion_problem("p-orders-sqsdelay", {"RecursiveLoop": "Allow"}) is None


@pytest.mark.parametrize("reply", [{"RecursiveLoop": "Terminate"}, {}])
def test_terminate_or_the_default_is_a_problem_with_its_fix(reply: dict[str, str]) -> None:
    problem = recursion_problem("p-orders-sqsdelay", reply)
    assert problem is not None and not problem.warning
    assert "'Terminate'" in problem.problem and "16 cycles" in problem.problem
    assert problem.fix.startswith(
        "aws lambda put-function-recursion-config --function-name p-orders-sqsdelay "
        "--recursive-loop Allow"
    )
