"""The Dockerfile: its structure, and its install commands run for real in a fresh
virtualenv, the way the image build runs them; where a container runtime is reachable
(`docker info`), the worker image itself on its task volume."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.dockerfile import ROOT, one, stages

pytestmark = pytest.mark.packaging


def test_targets_user_and_entrypoints() -> None:
    s = stages()
    assert {"worker", "lambda", "cost-report"} <= set(s)
    worker = s["worker"]
    assert one(worker, "FROM").startswith("python:3.11-slim")
    assert one(worker, "USER") not in ("0", "root")
    assert json.loads(one(worker, "ENTRYPOINT")) == ["sqsdelay", "worker"]
    assert "spark" not in " ".join(v for _, v in s["build"])  # no Spark in the worker
    lam = s["lambda"]
    assert one(lam, "FROM").startswith("public.ecr.aws/lambda/python:3.11")
    assert json.loads(one(lam, "CMD")) == ["sqsdelay.aws_lambda.handler"]
    report = s["cost-report"]
    runs = " ".join(v for o, v in report if o == "RUN")
    assert "openjdk-17-jre-headless" in runs and "'.[spark]'" in runs
    assert one(report, "USER") not in ("0", "root")
    assert json.loads(one(report, "ENTRYPOINT")) == ["sqsdelay", "cost-report"]
    env = one(report, "ENV")
    assert "SQSDELAY_SPARK_CLASS_ARCHIVE=off" in env.split()


def test_dockerignore_keeps_the_context_small() -> None:
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git", ".venv", "tests"} <= set(ignored)


# pip reads PIP_NO_COMPILE as the value of its `compile` option: "0" is --no-compile. The
# image's build compiles; skipping it here halves the installs, and changes nothing else.
NO_COMPILE = {**os.environ, "PIP_NO_COMPILE": "0"}


def run(cmd: str, cwd: Path) -> None:
    done = subprocess.run(
        ["bash", "-c", cmd], cwd=cwd, capture_output=True, text=True, timeout=600, env=NO_COMPILE
    )
    assert done.returncode == 0, f"{cmd}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"


@pytest.fixture
def context(tmp_path: Path) -> Path:
    """The build context as the COPY lines give it."""
    ctx = tmp_path / "src"
    ctx.mkdir()
    for name in ("pyproject.toml", "constraints.txt", "README.md"):
        shutil.copy(ROOT / name, ctx / name)
    shutil.copytree(
        ROOT / "sqsdelay", ctx / "sqsdelay", ignore=shutil.ignore_patterns("__pycache__")
    )
    return ctx


@pytest.mark.slow
def test_worker_image_install_commands_work_in_a_fresh_venv(context: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    for op, cmd in stages()["build"]:
        if op == "RUN":
            run(
                cmd.replace("/opt/venv", str(venv)).replace(
                    "python -m venv", f"{sys.executable} -m venv"
                ),
                context,
            )
    run(
        f"{venv}/bin/sqsdelay --help >/dev/null "
        f"&& {venv}/bin/python -c 'import sqsdelay.aws.worker'",
        tmp_path,
    )
    missing = subprocess.run([f"{venv}/bin/python", "-c", "import pyspark"], capture_output=True)
    assert missing.returncode != 0  # the worker image stays slim


@pytest.mark.slow
def test_lambda_image_install_command_gives_an_importable_handler(
    context: Path, tmp_path: Path
) -> None:
    task_root = tmp_path / "task"
    (cmd,) = [v for o, v in stages()["lambda"] if o == "RUN"]
    cmd = cmd.replace("${LAMBDA_TASK_ROOT}", str(task_root)).replace("rm -rf /src", "true")
    run(cmd.replace("pip install", f"{sys.executable} -m pip install"), context)
    run(
        f"cd {task_root} && {sys.executable} -I -c "
        '\'import sys; sys.path.insert(0, "."); import sqsdelay.aws.lambda_driver as m; '
        "assert callable(m.handler)'",
        tmp_path,
    )


@pytest.mark.slow
def test_cost_report_image_dependencies_resolve(context: Path) -> None:
    runs = [v for o, v in stages()["cost-report"] if o == "RUN" and "pip install" in v]
    (cmd,) = runs
    pip = cmd.split("&&")[-1].replace("/opt/venv/bin/pip", f"{sys.executable} -m pip")
    run(pip.replace("pip install", "pip install --dry-run --ignore-installed"), context)


def _docker() -> bool:
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "info"], capture_output=True, timeout=30).returncode == 0


@pytest.mark.slow
@pytest.mark.skipif(not _docker(), reason="no container runtime reachable (docker info)")
def test_the_worker_image_writes_its_liveness_file_on_a_task_volume_as_fargate_mounts_it() -> None:
    """The built image, run as the task definition runs it: read-only root file system, the
    task volume at its ContainerPath. Fargate's volume is root-owned 0755 unless the image
    declares that path a VOLUME (then it copies the image's directory): a fresh Docker volume
    copies the same, a 0755 tmpfs stands for the other case."""
    from tests.support import cfn
    from tests.support.dockerfile import env, volumes
    from tests.support.stacks import ECS_PARAMS

    resources = cfn.Renderer(cfn.load("worker-ecs.yaml"), ECS_PARAMS).resources()
    (container,) = resources["TaskDefinition"]["Properties"]["ContainerDefinitions"]
    (mount,) = container["MountPoints"]
    path = mount["ContainerPath"]
    worker = stages()["worker"]
    kind = "type=volume" if path in volumes(worker) else "type=tmpfs,tmpfs-mode=0755"
    tag = "sqsdelay-worker:liveness-test"
    build = ["docker", "build", "--target", "worker", "-t", tag, str(ROOT)]
    subprocess.run(build, check=True, capture_output=True, timeout=1800)
    check = container["HealthCheck"]["Command"]
    assert check[0] == "CMD"
    script = (
        "import os, pathlib, subprocess, sys; from sqsdelay.aws.worker import first_touch; "
        "first_touch(pathlib.Path(os.environ['SQSDELAY_LIVENESS_FILE'])); "
        "sys.exit(subprocess.run(sys.argv[1:]).returncode)"
    )
    run = ["docker", "run", "--rm", "--read-only", "--mount", f"{kind},dst={path}"]
    run += ["--entrypoint", "python", tag, "-c", script, *check[1:]]
    done = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert env(worker)["SQSDELAY_LIVENESS_FILE"].startswith(path + "/")
