"""A pytest plugin (`-p tests.support.collected_marks`) that prints every collected test with
its markers, one `MARKS <node id> <marker> ...` line each: the split of the suite into its
two halves is checked on one collection (tests/test_suite_halves.py)."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        print("MARKS", item.nodeid, *sorted({mark.name for mark in item.iter_markers()}))
