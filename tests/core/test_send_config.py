"""The sender's configuration (core/send_config.py) as `Settings.send_config()` builds it:
parking's threshold and role only when parking, the registry's table only when on."""

from __future__ import annotations

import dataclasses

import pytest

from sqsdelay.settings import Settings

ROLE = "arn:aws:iam::123456789012:role/sqsdelay-scheduler"


def test_parking_off_has_no_threshold_and_no_role() -> None:
    config = Settings(region="us-east-1", scheduler_role_arn=ROLE).send_config()
    assert (config.parking, config.park_after, config.park_role) == (False, None, None)
    assert config.registry_table is None


def test_parking_and_the_registry_as_configured() -> None:
    s = Settings(
        region="eu-west-1",
        parking="scheduler",
        scheduler_role_arn=ROLE,
        park_concurrency=3,
        registry="dynamodb",
        registry_table="reg",
        call_timeout_seconds=4,
        queue_prefix="p-",
    )
    config = s.send_config()
    assert config.parking and config.park_after == s.park_after() and config.park_role == ROLE
    assert (config.park_concurrency, config.registry_table, config.region) == (
        3,
        "reg",
        "eu-west-1",
    )
    assert (config.call_timeout, config.limits.queue_prefix) == (4, "p-")
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.region = "us-east-1"  # type: ignore[misc]
