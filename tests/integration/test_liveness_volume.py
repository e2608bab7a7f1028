"""The worker's liveness file where ECS runs it: the Dockerfile and the task definition read
together, as Fargate mounts a task volume (root-owned 0755, unless the image declares the
mount's path a VOLUME, whose owner and mode Fargate copies: the ECS Developer Guide, "Bind
mounts"); and a worker that cannot write the file stops at start, saying what to do."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from sqsdelay.aws.worker import Worker
from sqsdelay.errors import ConfigError
from sqsdelay.settings import Settings
from tests.support import cfn, cli
from tests.support.dockerfile import Directory, directories, env, one, stages, volumes
from tests.support.stacks import ECS_PARAMS

ROOT_0755 = Directory(owner=0, group=0, mode=0o755)


def fargate_volume(container_path: str, stage: list[tuple[str, str]]) -> Directory:
    """The owner and mode of a Fargate task volume mounted at `container_path` in an image
    built from `stage`: the image's directory's when the image declares that exact path a
    VOLUME, root's 0755 otherwise."""
    if container_path in volumes(stage):
        return directories(stage).get(container_path, ROOT_0755)
    return ROOT_0755


def writable(d: Directory, uid: int) -> bool:
    return bool((d.owner == uid and d.mode & 0o200) or d.mode & 0o002)


def task_definition() -> dict[str, Any]:
    resources = cfn.Renderer(cfn.load("worker-ecs.yaml"), ECS_PARAMS).resources()
    return dict(resources["TaskDefinition"]["Properties"])


def test_the_liveness_file_is_writable_by_the_images_user_under_the_task_volume() -> None:
    worker = stages()["worker"]
    uid = int(one(worker, "USER"))
    assert uid != 0
    liveness = PurePosixPath(env(worker)["SQSDELAY_LIVENESS_FILE"])
    task = task_definition()
    (container,) = task["ContainerDefinitions"]
    # the health check reads the file the worker touches
    assert container["HealthCheck"]["Command"][-1].count(f"'{liveness}'") == 1
    # the root file system is read-only: only a mounted volume can hold the file, the file
    # directly in it (a subdirectory would not exist in a fresh volume)
    assert container["ReadonlyRootFilesystem"] is True
    mounts = {m["ContainerPath"]: m for m in container["MountPoints"]}
    mount = mounts.get(str(liveness.parent))
    assert mount is not None, f"{liveness.parent} is no task volume: nothing can be written there"
    assert mount["ReadOnly"] is False
    (volume,) = [v for v in task["Volumes"] if v["Name"] == mount["SourceVolume"]]
    assert set(volume) == {"Name"}  # the task's own storage: no host path, no EFS
    owned = fargate_volume(mount["ContainerPath"], worker)
    assert writable(owned, uid), f"the volume is {owned}: UID {uid} cannot create {liveness}"


def test_the_fargate_model_refuses_what_fargate_refuses() -> None:
    """The model above: a path the image does not declare a VOLUME, or declares without
    making it the user's, is root's 0755 (what the task definition had: /tmp, no VOLUME)."""
    stage = [("USER", "10001"), ("RUN", "install -d -o 10001 -g 10001 -m 0755 /run/x")]
    assert not writable(fargate_volume("/run/x", stage), 10001)  # no VOLUME: root's
    assert not writable(fargate_volume("/tmp", [*stage, ("VOLUME", '["/run/x"]')]), 10001)
    assert writable(fargate_volume("/run/x", [*stage, ("VOLUME", '["/run/x"]')]), 10001)
    assert not writable(fargate_volume("/run/y", [("VOLUME", "/run/y")]), 10001)


def unwritable(tmp_path: Path) -> Path:
    """A liveness file no user can create, root included: its directory is a file."""
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("")
    return blocked / "alive"


def test_a_worker_that_cannot_write_its_liveness_file_stops_before_any_call(
    tmp_path: Path,
) -> None:
    # no endpoint answers here: a worker that went on would fail on its first call instead
    s = Settings(endpoint_url="http://127.0.0.1:9", region="us-east-1")
    s = s.model_copy(update={"liveness_file": unwritable(tmp_path)})
    began = time.monotonic()
    with pytest.raises(ConfigError) as raised:
        asyncio.run(Worker(s, ["orders"]).run(handle_signals=False))
    assert time.monotonic() - began < 5
    message = str(raised.value)
    assert "SQSDELAY_LIVENESS_FILE" in message and str(s.liveness_file) in message
    assert "VOLUME" in message and "/run/sqsdelay" in message  # what to do


def test_the_worker_command_exits_2_with_the_error_on_stderr(
    env: dict[str, str], tmp_path: Path
) -> None:
    alive = unwritable(tmp_path)
    done = cli.run({**env, "SQSDELAY_LIVENESS_FILE": str(alive)}, "worker", "orders")
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"cannot write the liveness file SQSDELAY_LIVENESS_FILE={alive}" in done.stderr
    assert "Traceback" not in done.stderr
