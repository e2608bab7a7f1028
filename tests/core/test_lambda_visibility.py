"""A Lambda worker's timeout against the visibility timeout of the queue that triggers it
(core/lambda_checks.py): at least six times, AWS's guidance for SQS triggers."""

from __future__ import annotations

from sqsdelay.core.lambda_checks import visibility_problem


def test_six_times_the_timeout_is_enough_and_less_is_a_problem() -> None:
    assert visibility_problem("f", 25, "q", 150) is None
    assert visibility_problem("f", 25, "q", 180) is None  # the templates' defaults
    p = visibility_problem("f", 25, "q", 149)
    assert p is not None and not p.warning and p.queue == "q"
    assert "149 s is less than 6 x the timeout" in p.problem and "'f'" in p.problem
    assert "at least 150 s" in p.fix and "at most 24 s" in p.fix


def test_every_pair_of_the_templates_bounds() -> None:
    """worker-lambda.yaml's TimeoutSeconds 5..30 against any visibility up to 12 hours."""
    for timeout in range(5, 31):
        for visibility in range(0, 43_201, 7):
            fine = visibility_problem("f", timeout, "q", visibility) is None
            assert fine == (visibility >= 6 * timeout), (timeout, visibility)
