"""Room for batches that finish on their own (core/capacity.py): units fit whole or are
refused, and a shrink below what is held waits for the holders' releases."""

from __future__ import annotations

from sqsdelay.core.capacity import Capacity


def test_units_fit_or_are_refused_and_a_shrink_waits_for_releases() -> None:
    cap = Capacity(20)
    assert cap.try_acquire(10) and cap.try_acquire(7)
    assert not cap.try_acquire(4) and cap.held == 17  # refused whole, nothing taken
    assert cap.try_acquire(3) and cap.held == 20
    cap.resize(-15)  # below what is held: the holders keep their units
    assert cap.size == 5 and not cap.try_acquire(1)
    cap.release(10)
    cap.release(7)
    assert cap.held == 3 and cap.try_acquire(2) and not cap.try_acquire(1)
    cap.resize(-100)
    assert cap.size == 0 and not cap.try_acquire(1)


def test_a_negative_size_is_no_room() -> None:
    cap = Capacity(-5)
    assert cap.size == 0 and not cap.try_acquire(1) and cap.try_acquire(0)
