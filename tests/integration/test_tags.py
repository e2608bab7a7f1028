"""Tags and bulk cancel (issue 61, 2; docs/operator-controls.md): the registry indexes a
send's tags, `cancel --tag` cancels every message sent with one, on the emulator (moto's
SQS and DynamoDB over HTTP) with a compressed 1 s cycle."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from typer.testing import CliRunner

from sqsdelay.aws.installer import Installer
from sqsdelay.aws.sender import Message, Sender
from sqsdelay.cli import app
from sqsdelay.core import message_tags, registry
from sqsdelay.errors import ConfigError, InvalidTag
from sqsdelay.settings import Settings
from tests.conftest import wait_for
from tests.support.queues import install
from tests.support.workerkit import Collector, RunningWorker


@pytest.fixture
def looping(make_settings: Callable[..., Settings], prefix: str) -> Settings:
    return make_settings(
        max_native_delay_seconds=1,
        visibility_timeout_seconds=5,
        wait_time_seconds=1,
        registry="dynamodb",
        registry_table=f"{prefix}scheduled",
    )


@pytest.mark.slow  # about 2 minutes: 1,040 sends with the registry, then the worker's hops
def test_bulk_cancel_of_1000_tagged_messages_delivers_none_of_them_and_all_the_rest(
    looping: Settings, sqs: Any, dynamodb: Any
) -> None:
    urls = install(looping, sqs, dynamodb=dynamodb)
    sender = Sender(looping, client=sqs, dynamodb=dynamodb)
    tagged = [
        Message(f"t{i}", delay=3, id=f"t{i}", tags={"customer": "42", "kind": "reminder"})
        for i in range(1000)
    ]
    others = [Message(f"u{i}", delay=3, id=f"u{i}") for i in range(20)]
    others += [Message(f"o{i}", delay=3, id=f"o{i}", tags={"customer": "43"}) for i in range(20)]
    for start in range(0, len(tagged), 100):
        assert sender.send_batch("orders", tagged[start : start + 100]).ok
    assert sender.send_batch("orders", others).ok
    counted = sender.cancel_tagged("orders", ("customer", "42"), dry_run=True)
    assert (counted.matched, len(counted.sample)) == (1000, 10)
    assert counted.outcomes == {"cancelled": 0, "too-late": 0, "unknown": 0}  # nothing done
    assert states(sender)["t5"] == "scheduled"
    done = sender.cancel_tagged("orders", ("customer", "42"))
    assert (done.matched, done.outcomes) == (1000, {"cancelled": 1000, "too-late": 0, "unknown": 0})
    # The worker starts after the cancel: every tagged message meets its cancelled record.
    collector = Collector(sqs, urls["orders"])
    with RunningWorker(looping, ["orders"]) as running:
        got = collector.until(40, timeout=90)
        wait_for(lambda: running.worker.stats.events["delay.cancelled"] >= 1000, timeout=90)
        collector.poll()
    assert sorted(d.body for d in collector.got) == sorted(m.body for m in others)
    assert len(got) == 40
    # The other tag's messages are found by theirs, and are too late now.
    again = sender.cancel_tagged("orders", ("customer", "43"))
    assert (again.matched, again.outcomes["too-late"]) == (20, 20)


def states(sender: Sender) -> dict[str, str]:
    return {r.message_id: r.state for r in sender.scheduled("orders", state=None, limit=2000)}


def test_tags_are_stored_on_the_record_and_the_cli_counts_then_cancels(
    looping: Settings, sqs: Any, dynamodb: Any, env: dict[str, str]
) -> None:
    install(looping, sqs, dynamodb=dynamodb)
    env = {
        **env,
        "SQSDELAY_MAX_NATIVE_DELAY_SECONDS": "1",
        "SQSDELAY_REGISTRY": "dynamodb",
        "SQSDELAY_REGISTRY_TABLE": looping.registry_table,
    }
    runner = CliRunner()
    for i in range(3):
        sent = runner.invoke(
            app,
            [
                "send",
                "orders",
                "--delay",
                "600",
                "--body",
                "b",
                "--id",
                f"c{i}",
                "--tag",
                "customer=42",
                "--tag",
                "plan=gold",
            ],
            env=env,
        )
        assert sent.exit_code == 0, sent.output
    item = dynamodb.get_item(
        TableName=looping.registry_table, Key=registry.key(looping.queue_prefix + "orders", "c0")
    )["Item"]
    assert sorted(item["tags"]["SS"]) == ["customer=42", "plan=gold"]
    dry = runner.invoke(app, ["cancel", "orders", "--tag", "plan=gold", "--dry-run"], env=env)
    assert dry.exit_code == 0, dry.output
    line = json.loads(dry.stdout)
    assert (line["matched"], sorted(line["sample"]), line["dry_run"]) == (
        3,
        ["c0", "c1", "c2"],
        True,
    )
    sender = Sender(looping, client=sqs, dynamodb=dynamodb)
    assert set(states(sender).values()) == {"scheduled"}  # a dry run changes nothing
    done = runner.invoke(app, ["cancel", "orders", "--tag", "plan=gold"], env=env)
    assert done.exit_code == 0, done.output
    first, last = (json.loads(x) for x in done.stdout.splitlines())
    assert (first["matched"], last["cancelled"], last["too-late"]) == (3, 3, 0)
    assert set(states(sender).values()) == {"cancelled"}
    bad = runner.invoke(app, ["cancel", "orders", "--tag", "plan gold"], env=env)
    assert bad.exit_code == 2 and "NAME=VALUE" in bad.stderr
    both = runner.invoke(app, ["cancel", "orders", "c1", "--tag", "plan=gold"], env=env)
    assert both.exit_code == 2


def test_bad_tags_are_refused_before_any_call_and_tags_need_the_registry(
    looping: Settings, sqs: Any, dynamodb: Any
) -> None:
    install(looping, sqs, dynamodb=dynamodb)
    sender = Sender(looping, client=sqs, dynamodb=dynamodb)
    for tags, words in (
        ({f"k{i}": "v" for i in range(11)}, "at most 10"),
        ({"a b": "1"}, "tag name"),
        ({"k": "x" * 129}, "1 to 128"),
        ({"k": "a/b"}, "no /"),
        ({"k": ""}, "1 to 128"),
        ({"k": 42}, "must be a string"),
    ):
        with pytest.raises(InvalidTag, match=words):
            sender.send("orders", "b", delay=600, tags=tags)  # type: ignore[dict-item]
    with pytest.raises(InvalidTag, match="straight to the destination"):
        sender.send("orders", "b", delay=1, tags={"k": "v"})
    assert sender.scheduled("orders", state=None) == []
    plain = Sender(looping.model_copy(update={"registry": "off"}), client=sqs)
    with pytest.raises(ConfigError, match="tags need the registry"):
        plain.send("orders", "b", delay=600, tags={"k": "v"})
    with pytest.raises(ConfigError, match="needs the registry"):
        plain.cancel_tagged("orders", ("k", "v"))


def test_a_table_from_before_tags_works_untagged_and_install_adds_the_index(
    looping: Settings, sqs: Any, dynamodb: Any
) -> None:
    request = registry.create_table_request(looping.registry_table)
    request["GlobalSecondaryIndexes"] = [
        i for i in request["GlobalSecondaryIndexes"] if i["IndexName"] == registry.DUE_INDEX
    ]
    request["AttributeDefinitions"] = [
        a for a in request["AttributeDefinitions"] if a["AttributeName"] != "tag"
    ]
    dynamodb.create_table(**request)
    installer = Installer(looping, client=sqs)
    checked = installer.registry_table(["orders"], create=False, dynamodb=dynamodb)
    [missing] = [p for p in checked.problems if "tag" in p.problem]
    assert missing.warning and missing.fix.endswith(
        "install orders adds it in place (untagged sends go on)"
    )
    assert missing.problem == registry.TAG_INDEX_MISSING
    install(looping, sqs)  # the queues only
    sender = Sender(looping, client=sqs, dynamodb=dynamodb)
    assert sender.send("orders", "untagged", delay=600, id="u1").route == "delay-queue"
    sender.send("orders", "tagged", delay=600, id="t1", tags={"k": "v"})  # written, not found
    with pytest.raises(ConfigError, match=f"no index {message_tags.TAG_INDEX}"):
        sender.cancel_tagged("orders", ("k", "v"))
    fixed = installer.registry_table(["orders"], dynamodb=dynamodb)
    assert f"index {message_tags.TAG_INDEX} added (tagged sends)" in fixed.fixed
    assert not [p for p in fixed.problems if "tag" in p.problem]
    found = sender.cancel_tagged("orders", ("k", "v"))
    assert (found.matched, found.outcomes["cancelled"]) == (1, 1)


def test_the_async_sender_tags_cancels_by_tag_and_debounces_the_same_way(
    looping: Settings, sqs: Any, dynamodb: Any
) -> None:
    import asyncio

    from sqsdelay.aws.sender import AsyncSender

    install(looping, sqs, dynamodb=dynamodb)

    async def main() -> tuple[Any, Any, Any]:
        async with AsyncSender(looping) as sender:
            for i in range(3):
                await sender.send("orders", "b", delay=600, id=f"a{i}", tags={"k": "v"})
            first = await sender.send("orders", "one", id="deb", debounce=600)
            second = await sender.send("orders", "two", id="deb", debounce=600)
            return await sender.cancel_tagged("orders", ("k", "v")), first, second

    done, first, second = asyncio.run(main())
    assert (done.matched, done.outcomes["cancelled"]) == (3, 3)
    assert (first.message_id, second.message_id) == ("deb#1", "deb#2")
    found = states(Sender(looping, client=sqs, dynamodb=dynamodb))
    assert (found["deb#1"], found["deb#2"]) == ("cancelled", "scheduled")
