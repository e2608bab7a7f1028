"""The public sender API: `from sqsdelay.sender import Sender, AsyncSender, Message`.

The senders live in `sqsdelay.aws.sender`; this path is the one the README promises.
"""

from sqsdelay.aws.sender import AsyncSender, BatchResult, Message, Sender, SendFailure, SendResult

__all__ = ["AsyncSender", "BatchResult", "Message", "SendFailure", "SendResult", "Sender"]
