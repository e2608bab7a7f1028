"""The cost job's role (infra/cost-report.yaml) checked by moto's own S3 (issue 59, 2.4).

The rendered role is created in moto's IAM, assumed through moto's STS, and its credentials
make the requests S3A makes to read the input folder and write the report, with moto's
identity-policy enforcement on (`moto.core.authorization.enable_iam_authentication`).
S3A reads only a 404 as "no such file": any 403 where it probes fails the job.

What moto does not model (moto 5.2, `moto.iam.access_control`), so the offline evaluator
(test_cost_report_grants.py) keeps those checks:
- Conditions in identity policies: moto passes none of the request's context keys, so every
  condition holds (`s3:prefix` on ListBucket, `s3:ResourceAccount`). A listing of a sibling
  prefix is 200 here, 403 on S3 (`test_moto_ignores_the_listing_prefix` pins it).
- S3's 403 for a missing key to a caller without s3:ListBucket: moto answers 404 to anyone
  who may GetObject it.
- Resource wildcards: moto's `*` is a regex's `.*` over the whole ARN, across colons where
  IAM's is not; the same for the S3 keys here, which hold no colon.
- The trust policy: the role is assumed with auth off (EMR Serverless' side is the
  evaluator's test of the trust).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import cfn

ROOT = Path(__file__).resolve().parents[2]
# Not "events": moto routes events.s3.amazonaws.com (a virtual-hosted bucket) to EventBridge.
EVENTS, REPORTS, OTHER = "acme-events", "acme-reports", "acme-other"
PARAMS: list[dict[str, str]] = [
    {},
    {"EventsPrefix": "logs/sqsdelay/", "ReportPrefix": "out/"},
    {"EventsPrefix": "e/"},
]


def s3a_calls(params: dict[str, str]) -> list[tuple[str, str, dict[str, Any], int]]:
    """(what, boto3 S3 method, arguments, the status S3A needs) for one run of the report.

    Hadoop's Path drops a folder's final "/", so S3A's probe of a path is a HEAD of its key,
    then of key/, then a LIST of key/ (delimiter /, max-keys 2): a 404, 404 and an empty
    listing mean "nothing there", and any 403 fails the job."""
    given = {**cfn.defaults(cfn.load("cost-report.yaml")), **params}
    folder = given["EventsPrefix"].rstrip("/")
    report = given["ReportPrefix"].rstrip("/")
    out = f"{report}/latest"  # --output, as the StartJobRun command gives it
    parts = report.split("/")
    ancestors = ["/".join(parts[:n]) for n in range(1, len(parts))]

    def probe(bucket: str, key: str, what: str) -> list[tuple[str, str, dict[str, Any], int]]:
        listing = {"Bucket": bucket, "Prefix": f"{key}/", "Delimiter": "/", "MaxKeys": 2}
        return [
            (f"{what}: HEAD key", "head_object", {"Bucket": bucket, "Key": key}, 404),
            (f"{what}: HEAD key/", "head_object", {"Bucket": bucket, "Key": f"{key}/"}, 404),
            (f"{what}: LIST key/", "list_objects_v2", listing, 200),
        ]

    temp = f"{out}/_temporary/0"
    task = f"{temp}/_temporary/attempt_0/part-00000.csv"
    calls = [
        # Reading: the input folder is probed, listed one level at a time, then read.
        *probe(EVENTS, folder, "input folder"),
        ("input subfolder: LIST", "list_objects_v2",
         {"Bucket": EVENTS, "Prefix": f"{folder}/2026/", "Delimiter": "/", "MaxKeys": 2}, 200),
        ("input: GET an event file", "get_object",
         {"Bucket": EVENTS, "Key": f"{folder}/2026/11/part-0000.json"}, 200),
        # The job's own code, read by EMR Serverless with the role.
        ("code: GET run.py", "get_object",
         {"Bucket": REPORTS, "Key": f"{given['CodePrefix']}run.py"}, 200),
        # Writing: the output and its parent are probed before the committer's mkdirs.
        *probe(REPORTS, out, "output"),
        *probe(REPORTS, report, "output's parent"),
        ("output: PUT the temporary's marker", "put_object",
         {"Bucket": REPORTS, "Key": f"{temp}/", "Body": b""}, 200),
        ("output: PUT a task's file", "put_object",
         {"Bucket": REPORTS, "Key": task, "Body": b"month,cost\n"}, 200),
        ("output: COPY it into place (rename)", "copy_object",
         {"Bucket": REPORTS, "Key": f"{out}/part-00000.csv",
          "CopySource": {"Bucket": REPORTS, "Key": task}}, 200),
        ("output: PUT the report", "put_object",
         {"Bucket": REPORTS, "Key": f"{out}/part-00001.csv", "Body": b"month,cost\n"}, 200),
        ("output: PUT _SUCCESS", "put_object",
         {"Bucket": REPORTS, "Key": f"{out}/_SUCCESS", "Body": b""}, 200),
        ("output: DELETE the task's file", "delete_object",
         {"Bucket": REPORTS, "Key": task}, 204),
        ("output: DELETE _temporary/", "delete_object",
         {"Bucket": REPORTS, "Key": f"{temp}/"}, 204),
        ("output: GET it back", "get_object",
         {"Bucket": REPORTS, "Key": f"{out}/_SUCCESS"}, 200),
        *probe(REPORTS, f"{report}/runs", "snapshots"),
        ("snapshots: PUT a run", "put_object",
         {"Bucket": REPORTS, "Key": f"{report}/runs/2026-11-28/part-00000.parquet",
          "Body": b"PAR1"}, 200),
        # Outside the grants. mkdirs' walk up to the root goes on above the output's parent
        # while nothing is there: S3A logs "Access denied when looking for parent directory"
        # and goes on (MkdirOperation), so these 403s are harmless.
        *[(f"ancestor {a}: HEAD", "head_object", {"Bucket": REPORTS, "Key": a}, 403)
          for a in ancestors],
        ("sibling of the input: GET", "get_object",
         {"Bucket": EVENTS, "Key": f"{folder}x/part-0000.json"}, 403),
        ("sibling of the input: HEAD its key", "head_object",
         {"Bucket": EVENTS, "Key": f"{folder}x"}, 403),
        ("input: PUT (read only)", "put_object",
         {"Bucket": EVENTS, "Key": f"{folder}/new.json", "Body": b"{}"}, 403),
        ("input: DELETE (read only)", "delete_object",
         {"Bucket": EVENTS, "Key": f"{folder}/2026/11/part-0000.json"}, 403),
        ("output's parent: PUT its key (read only)", "put_object",
         {"Bucket": REPORTS, "Key": report, "Body": b""}, 403),
        ("report bucket outside the prefix: PUT", "put_object",
         {"Bucket": REPORTS, "Key": f"{report}x/latest/_SUCCESS", "Body": b""}, 403),
        ("report bucket outside the prefix: GET", "get_object",
         {"Bucket": REPORTS, "Key": "elsewhere/secret.csv"}, 403),
        ("another bucket: GET", "get_object",
         {"Bucket": OTHER, "Key": f"{folder}/2026/11/part-0000.json"}, 403),
        ("another bucket: LIST", "list_objects_v2",
         {"Bucket": OTHER, "Prefix": f"{folder}/", "Delimiter": "/", "MaxKeys": 2}, 403),
        ("another bucket: PUT", "put_object",
         {"Bucket": OTHER, "Key": f"{out}/_SUCCESS", "Body": b""}, 403),
    ]  # fmt: skip
    return calls


def seeded_objects(params: dict[str, str]) -> list[tuple[str, str]]:
    """What is in the buckets before the run: the events, a sibling folder, the code."""
    given = {**cfn.defaults(cfn.load("cost-report.yaml")), **params}
    folder = given["EventsPrefix"].rstrip("/")
    return [
        (EVENTS, f"{folder}/2026/11/part-0000.json"),
        (EVENTS, f"{folder}x/part-0000.json"),
        (REPORTS, f"{given['CodePrefix']}run.py"),
        (REPORTS, "elsewhere/secret.csv"),
        (OTHER, f"{folder}/2026/11/part-0000.json"),
    ]


def answers(template_text: str, params: dict[str, str]) -> dict[str, int]:
    """Moto's status for each of `s3a_calls`, made with the rendered role's credentials.
    Runs in a process of its own (`_in_a_process_of_its_own`)."""
    import boto3
    from botocore.exceptions import ClientError
    from moto import mock_aws
    from moto.core.authorization import enable_iam_authentication

    template = yaml.load(template_text, Loader=cfn._Loader)  # noqa: S506 (cfn's tags)
    given = {"EventsBucket": EVENTS, "ReportBucket": REPORTS, **params}
    role = cfn.Renderer(template, given).resources()["JobRole"]["Properties"]
    with mock_aws():
        iam = boto3.client("iam", region_name=cfn.REGION)
        arn = iam.create_role(
            RoleName="sqsdelay-cost-report-job",
            AssumeRolePolicyDocument=json.dumps(role["AssumeRolePolicyDocument"]),
        )["Role"]["Arn"]
        for policy in role["Policies"]:
            iam.put_role_policy(
                RoleName="sqsdelay-cost-report-job",
                PolicyName=policy["PolicyName"],
                PolicyDocument=json.dumps(policy["PolicyDocument"]),
            )
        admin = boto3.client("s3", region_name=cfn.REGION)
        for bucket in (EVENTS, REPORTS, OTHER):
            admin.create_bucket(Bucket=bucket)
        for bucket, key in seeded_objects(params):
            admin.put_object(Bucket=bucket, Key=key, Body=b"x")
        sts = boto3.client("sts", region_name=cfn.REGION)
        creds = sts.assume_role(RoleArn=arn, RoleSessionName="cost-report")["Credentials"]
        s3 = boto3.client(
            "s3",
            region_name=cfn.REGION,
            aws_access_key_id=creds["AccessKeyId"],
            aws_secret_access_key=creds["SecretAccessKey"],
            aws_session_token=creds["SessionToken"],
        )
        got: dict[str, int] = {}
        with enable_iam_authentication():
            for what, method, kwargs, _ in s3a_calls(params):
                try:
                    reply = getattr(s3, method)(**kwargs)
                except ClientError as e:
                    reply = e.response
                got[what] = reply["ResponseMetadata"]["HTTPStatusCode"]
            # moto's gap, pinned (see the module's docstring): a sibling prefix listed
            folder = {**cfn.defaults(template), **params}["EventsPrefix"].rstrip("/")
            sibling = s3.list_objects_v2(Bucket=EVENTS, Prefix=f"{folder}x/", Delimiter="/")
            got["moto: LIST a sibling prefix"] = sibling["ResponseMetadata"]["HTTPStatusCode"]
    return got


def answers_in_a_process_of_its_own(template_text: str) -> list[dict[str, int]]:
    """`answers` for each of PARAMS in a new Python process: moto in-process shares its
    backends (and here, its authorization switch) with whatever else the process holds, and a
    pytest worker holds the suite's emulator, a moto server thread."""
    code = (
        "import json, sys; from tests.integration.test_cost_report_s3 import answers, PARAMS; "
        "text = sys.stdin.read(); print(json.dumps([answers(text, p) for p in PARAMS]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"},
        input=template_text,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-6000:]
    got: list[dict[str, int]] = json.loads(done.stdout.splitlines()[-1])
    return got


def wrong_answers(
    template_text: str, got: list[dict[str, int]] | None = None
) -> list[tuple[dict[str, str], str, int, int]]:
    """(parameters, call, wanted, got) for every call whose answer is not what S3A needs."""
    got = answers_in_a_process_of_its_own(template_text) if got is None else got
    wrong = []
    for params, answered in zip(PARAMS, got, strict=True):
        for what, _, _, wanted in s3a_calls(params):
            if answered[what] != wanted:
                wrong.append((params, what, wanted, answered[what]))
    return wrong


@pytest.fixture(scope="module")
def template_text() -> str:
    return (cfn.INFRA / "cost-report.yaml").read_text()


@pytest.fixture(scope="module")
def answered(template_text: str) -> list[dict[str, int]]:
    return answers_in_a_process_of_its_own(template_text)


def test_s3a_reads_the_input_and_writes_the_report_with_the_jobs_role(
    template_text: str, answered: list[dict[str, int]]
) -> None:
    """Fails on the template before 73820e9 (the HEADs of the input folder's key and of the
    output's parent answered 403); passes at 73820e9, before ce3bad1, whose s3:prefix
    conditions moto does not evaluate."""
    assert wrong_answers(template_text, answered) == []


def test_moto_ignores_the_listing_prefix(answered: list[dict[str, int]]) -> None:
    """What keeps the evaluator's s3:prefix checks necessary: moto lists a sibling prefix
    that IAM refuses. Should moto start to evaluate it, this fails: move the check here."""
    assert [got["moto: LIST a sibling prefix"] for got in answered] == [200] * len(PARAMS)
