from datetime import timedelta

from sqsdelay.sender import Sender

sender = Sender()  # settings from SQSDELAY_* variables
result = sender.send("orders", '{"id": 1}', delay=timedelta(days=3))
print(result.route, result.message_id)  # delay-queue, and the id to cancel it by
