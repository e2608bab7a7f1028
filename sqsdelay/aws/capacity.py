"""Moved: `core/capacity.py`. Kept only until `aws/worker.py` imports it from there."""

from sqsdelay.core.capacity import Capacity as Capacity
