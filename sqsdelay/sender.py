"""The public sender API: `from sqsdelay.sender import Sender, AsyncSender, Message`.

The senders live in `sqsdelay.aws.sender`; this path is the one the README promises, and it
exports exactly that module's `__all__`.
"""

from sqsdelay.aws.sender import *  # noqa: F403
from sqsdelay.aws.sender import __all__ as __all__
