"""sqsdelay/deprecations.py: the old forms of giving settings (issue 60 §4), kept one release.
Each still works, warns with a `DeprecationWarning` that names `settings=` and points at the
caller's line, and giving both forms is refused. The renamed async names' tests run on the
emulator: tests/integration/test_consumer.py."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from sqsdelay import deprecations
from sqsdelay.errors import ConfigError
from sqsdelay.settings import Settings


def test_warn_names_the_replacement_and_the_callers_line() -> None:
    def old() -> None:
        deprecations.warn("old()", "new()")

    with pytest.warns(DeprecationWarning) as seen:
        old()
    [warning] = seen.list
    assert str(warning.message) == (
        "old() is deprecated and will be removed in the next release: use new()"
    )
    assert warning.filename == __file__


def test_settings_given_are_used_as_they_are() -> None:
    given = Settings(registry="dynamodb")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the documented form warns nothing
        assert deprecations.settings_of(given, None, old_form="x") is given


def test_no_settings_are_the_environment_under_over_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SQSDELAY_MAX_NATIVE_DELAY_SECONDS", "7")
    monkeypatch.setenv("SQSDELAY_REGION", "eu-west-1")
    found = deprecations.settings_of(None, None, old_form="x", over_env={"region": "us-east-2"})
    assert (found.max_native_delay_seconds, found.region) == (7, "us-east-2")


def test_an_old_form_warns_and_works() -> None:
    kept = Settings(registry="dynamodb")
    with pytest.warns(DeprecationWarning, match=r"f\(x=\.\.\.\) is deprecated.*settings="):
        assert deprecations.settings_of(None, kept, old_form="f(x=...)", stacklevel=2) is kept
    with pytest.warns(DeprecationWarning):
        fields = deprecations.settings_of(
            None,
            {"max_native_delay_seconds": 3},
            old_form="f(x=...)",
            over_env={"region": "us-east-2", "max_native_delay_seconds": 9},
        )
    assert (fields.max_native_delay_seconds, fields.region) == (3, "us-east-2")


def test_both_forms_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"give settings= only"):
        deprecations.settings_of(Settings(), {"registry": "dynamodb"}, old_form="f(x=...)")


# Each entry point's old form, as a caller wrote it.


def test_celery_configure_with_fields() -> None:
    from celery import Celery

    import sqsdelay.celery

    app = Celery("x", broker="sqs://")
    with pytest.warns(DeprecationWarning, match=r"configure\(app, \*\*fields\)") as seen:
        sqsdelay.celery.configure(app, registry="dynamodb", max_native_delay_seconds=60)
    assert seen.list[0].filename == __file__
    resolved = app.conf.broker_transport_options["sqsdelay"]["settings"]
    assert (resolved.registry, resolved.max_native_delay_seconds) == ("dynamodb", 60)
    with pytest.warns(DeprecationWarning), pytest.raises(ConfigError, match="QUEUE_PREFIX"):
        sqsdelay.celery.configure(Celery("x", broker="sqs://"), queue_prefix="app-")
    with pytest.raises(ConfigError, match="give settings= only"):
        sqsdelay.celery.configure(app, settings=Settings(), registry="dynamodb")


def test_celery_configure_with_settings_warns_nothing() -> None:
    from celery import Celery

    import sqsdelay.celery

    app = Celery("x", broker="sqs://")
    given = Settings(registry="dynamodb")
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        sqsdelay.celery.configure(app, settings=given)
    assert app.conf.broker_transport_options["sqsdelay"]["settings"] is given


@pytest.mark.parametrize("old", [{"registry": "dynamodb"}, Settings(registry="dynamodb")])
def test_dramatiq_broker_with_sqsdelay(old: Any) -> None:
    from sqsdelay.dramatiq import SQSBroker

    with pytest.warns(DeprecationWarning, match=r"SQSBroker\(sqsdelay=\.\.\.\)") as seen:
        broker = SQSBroker(namespace="t", region_name="us-east-1", sqsdelay=old)
    assert seen.list[0].filename == __file__
    assert broker.sqsdelay_settings.registry == "dynamodb"
    if isinstance(old, Settings):
        assert broker.sqsdelay_settings is old
    with pytest.raises(ConfigError, match="give settings= only"):
        SQSBroker(namespace="t", region_name="us-east-1", settings=Settings(), sqsdelay=old)


@pytest.mark.parametrize("old", [{"registry": "dynamodb"}, Settings(registry="dynamodb")])
def test_taskiq_broker_with_sqsdelay(old: Any) -> None:
    from sqsdelay.taskiq import SQSBroker

    with pytest.warns(DeprecationWarning, match=r"SQSBroker\(sqsdelay=\.\.\.\)") as seen:
        broker = SQSBroker("orders", endpoint_url="http://127.0.0.1:9", sqsdelay=old)
    assert seen.list[0].filename == __file__
    got = broker.sqsdelay_settings
    assert got.registry == "dynamodb"
    if isinstance(old, Settings):  # used as it is, as before
        assert got is old
    else:  # fields over the broker's endpoint and Region, as before
        assert (got.endpoint_url, got.region) == ("http://127.0.0.1:9", "us-east-1")


def test_the_senders_old_flow_makers_are_each_a_deprecated_property_of_both_senders() -> None:
    """Review finding 4: the flow makers issue 60 §1 moved into core had no alias; each is
    now a property of both senders that warns and gives the moved flow maker
    (tests/aws/test_sender.py drives each)."""
    from sqsdelay.aws.sender import AsyncSender, Sender
    from sqsdelay.core.scheduled_flows import ScheduledFlows
    from sqsdelay.core.send_flows import SendFlows

    homes = {"flows": SendFlows, "scheduled_flows": ScheduledFlows}
    for name, where in deprecations.SENDER_FLOWS.items():
        assert callable(getattr(homes[where], name)), name
        for cls in (Sender, AsyncSender):
            assert isinstance(getattr(cls, name), property), (cls, name)
    sender = Sender(Settings(region="us-east-1"), caller=lambda calls: [])
    with pytest.warns(DeprecationWarning) as seen:
        made = sender.cancel_flow
    assert str(seen[0].message) == (
        "Sender.cancel_flow is deprecated and will be removed in the next release: "
        "use Sender.scheduled_flows.cancel_flow"
    )
    assert seen[0].filename == __file__ and made == sender.scheduled_flows.cancel_flow
