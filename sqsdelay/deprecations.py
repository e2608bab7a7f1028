"""The names and forms kept for one release after they changed (issue 60 §4), each warning
with a `DeprecationWarning` that names its replacement. One place, so that the next release
empties it: every old name or form that still works is a caller of `warn` here.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqsdelay.settings import Settings


def warn(old: str, new: str, *, stacklevel: int = 3) -> None:
    """Say that `old` goes in the next release and `new` replaces it. `stacklevel` 3: the
    line that called the deprecated function (it calls this)."""
    warnings.warn(
        f"{old} is deprecated and will be removed in the next release: use {new}",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


def settings_of(
    settings: Settings | None,
    old: Settings | Mapping[str, Any] | None,
    *,
    old_form: str,
    over_env: Mapping[str, Any] | None = None,
    stacklevel: int = 4,
) -> Settings:
    """An entry point's settings: `settings=` (a `Settings`; None: SQSDELAY_* from the
    environment, with `over_env` over it), the one documented way; or `old`, the form the entry
    point took before (a `Settings`, or `Settings` fields), with a warning. Both is an
    error: which would win is not obvious."""
    from sqsdelay.errors import ConfigError
    from sqsdelay.settings import Settings, load_settings

    if old is not None and settings is not None:
        raise ConfigError(f"give settings= only (a Settings), not {old_form} as well")
    if old is not None:
        warn(old_form, "settings=Settings(...)", stacklevel=stacklevel)
        if isinstance(old, Settings):
            return old
        return Settings(**{**(over_env or {}), **old})
    if settings is not None:
        return settings
    return load_settings(**(over_env or {}))


# The senders' flow makers before issue 60 §1 moved them into core: each old name on `Sender`
# and `AsyncSender` (`sender.run(flow)` takes what they make), and the attribute it is on now.
SENDER_FLOWS: dict[str, str] = {
    "send_flow": "flows",
    "send_batch_flow": "flows",
    "cancel_flow": "scheduled_flows",
    "cancel_tagged_flow": "scheduled_flows",
    "reschedule_flow": "scheduled_flows",
    "scheduled_flow": "scheduled_flows",
    "scheduled_page_flow": "scheduled_flows",
    "parked_flow": "scheduled_flows",
    "tagged_flow": "scheduled_flows",
}


def sender_flow(sender: object, name: str, *, stacklevel: int = 4) -> None:
    """Say that `sender.<name>` (one of `SENDER_FLOWS`) goes: `stacklevel` 4, the line that
    read the sender's property (which calls this)."""
    cls = type(sender).__name__
    warn(f"{cls}.{name}", f"{cls}.{SENDER_FLOWS[name]}.{name}", stacklevel=stacklevel)
