"""Which component a queue is: one rule (`tags.queue_component`), by the queue's role, that
the installer, the bill, the estimate and the FOCUS rows all read."""

from __future__ import annotations

from sqsdelay.core import queue_names, queue_trios, tags


def test_a_fifo_destinations_staging_queue_is_part_of_its_delays() -> None:
    assert tags.queue_component("delay") == tags.queue_component("staging") == "delay-queue"
    assert tags.queue_component("destination") == "destination-queue"
    assert tags.queue_component("error") == "error-queue"


def test_the_bills_endings_and_the_hand_overs_queue_name_the_same_roles() -> None:
    """The bill books a queue by its ending's role; the estimate counts a destination's
    standard requests on its hand-over queue's: for every queue of a trio, the same role."""
    for destination in ("orders", "shop.fifo"):
        trio = queue_trios.trio(destination, "", "error")
        role_by_name = {spec.name: spec.role for spec in trio.specs()}
        for name, role in role_by_name.items():
            by_ending = [
                r for ending, _, r in queue_trios.SERVING_QUEUE_ENDINGS if name.endswith(ending)
            ]
            assert by_ending == ([] if role == "destination" else [role]), name
        role, queue = queue_trios.handover_queue(destination)
        assert role_by_name[queue] == role
        assert queue == trio.of("destination")  # where the worker hands over
    assert queue_names.staging_queue_of("shop.fifo") == queue_names.staging_queue_name("shop.fifo")
