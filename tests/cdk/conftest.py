"""The CDK constructs' tests run in .venv-cdk (`make cdk`): aws-cdk-lib is not in the main venv,
where these files are not collected at all."""

from __future__ import annotations

from importlib.util import find_spec

if find_spec("aws_cdk") is None:
    collect_ignore_glob = ["test_*.py"]
