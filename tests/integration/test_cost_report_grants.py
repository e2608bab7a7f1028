"""The cost job's role (infra/cost-report.yaml) against the requests S3A and EMR Serverless
make with the paths the template's StartJobRun command gives, by the offline IAM evaluator."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.support import cfn, iam
from tests.support.iam import Request

ACCOUNT = {"s3:ResourceAccount": cfn.ACCOUNT}


def rendered(**params: str) -> dict[str, Any]:
    given = {"EventsBucket": "events", "ReportBucket": "reports", **params}
    return cfn.Renderer(cfn.load("cost-report.yaml"), given).resources()


def job_paths(resources: dict[str, Any], params: dict[str, str]) -> dict[str, str]:
    """The s3a:// paths of the StartJobRun output, by option."""
    t = cfn.load("cost-report.yaml")
    given = {"EventsBucket": "events", "ReportBucket": "reports", **params}
    command = cfn.Renderer(t, given).value(t["Outputs"]["StartJobRun"]["Value"])
    return dict(re.findall(r'"(--input|--output|--snapshots)", "(s3a://[^"]+)"', command))


def probed_keys(path: str) -> tuple[str, str]:
    """Hadoop's Path drops a final "/": S3A's first probe of a folder is a HEAD of its key."""
    bucket, _, key = path.removeprefix("s3a://").partition("/")
    return bucket, key.rstrip("/")


@pytest.mark.parametrize(
    "params",
    [{}, {"EventsPrefix": "logs/sqsdelay/", "ReportPrefix": "out/"}, {"EventsPrefix": "e/"}],
)
def test_s3a_may_read_the_input_folders_own_key_and_the_outputs_parent(
    params: dict[str, str],
) -> None:
    resources = rendered(**params)
    statements = iam.role_statements(resources, "JobRole")
    paths = job_paths(resources, params)
    bucket, folder = probed_keys(paths["--input"])
    assert not folder.endswith("/")
    for key in (folder, f"{folder}/part-0000.json"):
        assert iam.allows(statements, Request("s3:GetObject", f"arn:aws:s3:::{bucket}/{key}"))
    # nothing beside it that merely starts the same
    assert not iam.allows(statements, Request("s3:GetObject", f"arn:aws:s3:::{bucket}/{folder}x"))
    # S3 answers a HEAD of a missing key 404 (which S3A reads as "no such file") only to a
    # caller who may list it, else 403; and S3A then lists the folder
    for prefix in (folder, f"{folder}/"):
        listing = {"s3:prefix": prefix}
        assert iam.allows(statements, Request("s3:ListBucket", f"arn:aws:s3:::{bucket}", listing))
    beside = {"s3:prefix": f"{folder}x"}
    assert not iam.allows(statements, Request("s3:ListBucket", f"arn:aws:s3:::{bucket}", beside))
    for option in ("--output", "--snapshots"):
        bucket, key = probed_keys(paths[option])
        parent = key.rsplit("/", 1)[0]
        for probed in (key, parent):
            request = Request("s3:GetObject", f"arn:aws:s3:::{bucket}/{probed}", ACCOUNT)
            assert iam.allows(statements, request), (option, probed)
            listing = {**ACCOUNT, "s3:prefix": probed}
            assert iam.allows(
                statements, Request("s3:ListBucket", f"arn:aws:s3:::{bucket}", listing)
            )
        write = Request("s3:PutObject", f"arn:aws:s3:::{bucket}/{parent}", ACCOUNT)
        assert not iam.allows(statements, write)  # the folder's key is only read


def test_the_prefixes_are_folders() -> None:
    """The folder's key is cut at the prefix's final "/" (Fn::Split on "/#"): a prefix must
    end in one."""
    from tests.support.cfn_parameters import refused

    t = cfn.load("cost-report.yaml")
    for name in ("EventsPrefix", "ReportPrefix"):
        assert refused(t, {name: "a/b/"}) == []
        for bad in ("a/b", "a//", "", "a#/"):
            assert refused(t, {name: bad}) == [name], bad


def test_emr_serverless_may_assume_the_role_for_the_application_and_its_runs() -> None:
    (trust,) = rendered()["JobRole"]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    statement = {**trust, "Resource": "*"}  # a trust policy names no resource
    app = f"arn:aws:emr-serverless:{cfn.REGION}:{cfn.ACCOUNT}:/applications/<Application>"

    def may(source: str, account: str = cfn.ACCOUNT) -> bool:
        context = {"aws:SourceArn": source, "aws:SourceAccount": account}
        return iam.allows([statement], Request("sts:AssumeRole", "*", context))

    assert may(app) and may(f"{app}/jobruns/00abc")
    assert not may(app.replace("<Application>", "other"))
    assert not may(app.replace("<Application>", "other") + "/jobruns/00abc")
    assert not may(app, account="210987654321")
