"""How many receive loops a queue gets (core/receive_loops.py): its demand, from what its
receives brought, and the worker's limits on top of it (the pools, room for another loop,
when an extra loop ends, the pausing room). The loops that follow these rules are
tests/aws/test_worker_receive_loops.py."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sqsdelay.core import receive_loops
from sqsdelay.core.receive_loops import (
    DISCOVERY_CALLS,
    DISCOVERY_POLLS,
    OTHER_FILES,
    PAUSING_BATCHES,
    Pools,
    QueueDemand,
    extra_loop_ends,
    pausing_room,
    pools,
    raised_file_limit,
)


def test_full_batches_allow_the_concurrency_and_short_ones_more() -> None:
    demand = QueueDemand()
    assert demand.drained and demand.loops_allowed(4) == 4  # before any receive: full
    for _ in range(20):
        demand.received(10, 0.0)
    assert not demand.drained and demand.loops_allowed(4) == 4
    for _ in range(20):
        demand.received(2, 0.0)  # what SQS answers below about 1,000 messages
    assert demand.loops_allowed(4) == 20  # as many messages in hand as 4 full loops
    demand.received(0, 0.0)
    assert demand.drained and demand.loops_allowed(4) == 20  # an empty receive: no size


def test_after_an_extra_loop_polled_in_vain_only_a_full_batch_starts_another() -> None:
    """A trickle: each long poll brings the one message that arrived, so each would start an
    extra loop that ends in an empty 20 s poll. After one has, for one wait, only a full
    batch shows a backlog."""
    demand = QueueDemand()
    demand.received(1, now=0.0)
    assert demand.backlogged  # more may wait: an extra loop may start
    demand.extra_loop_found_it_empty(now=20.0, wait_s=20)
    demand.received(1, now=25.0)
    assert not demand.backlogged and not demand.drained
    demand.received(10, now=26.0)  # full: more is waiting whatever happened before
    assert demand.backlogged
    demand.received(2, now=41.0)  # the wait is over
    assert demand.backlogged
    demand.received(0, now=61.0)
    assert demand.drained and not demand.backlogged


@given(st.lists(st.integers(0, 10), max_size=60), st.integers(1, 64))
def test_the_loops_allowed_stay_between_the_concurrency_and_ten_times_it(
    counts: list[int], concurrency: int
) -> None:
    demand = QueueDemand()
    for n in counts:
        demand.received(n, 0.0)
        assert concurrency <= demand.loops_allowed(concurrency) <= 10 * concurrency
        assert demand.drained == (n == 0)


def busy(loops_allowed_for_3: int = 3) -> QueueDemand:
    """A queue whose last receive showed a backlog, its batches full (3 loops at 3)."""
    demand = QueueDemand()
    demand.received(10, 0.0)
    assert demand.backlogged and demand.loops_allowed(3) == loops_allowed_for_3
    return demand


def room(
    demand: QueueDemand,
    *,
    loops: int = 1,
    polls: int = 8,
    queues: int = 6,
    extra: int = 0,
    discovering: bool = False,
    lagging: bool = False,
) -> bool:
    """room_for_a_loop at concurrency 3: by default one loop of a queue among 6, a pool of 8
    polls, no discovery."""
    return receive_loops.room_for_a_loop(
        demand,
        loops=loops,
        concurrency=3,
        polls=polls,
        queues=queues,
        extra=extra,
        discovering=discovering,
        lagging=lagging,
    )


def test_a_busy_queue_takes_spare_polls_never_another_queues() -> None:
    """8 polls for 6 queues: 2 to spare, less the eighth discovery keeps for queues found
    later (tests/integration/test_discovery.py sees the busy queue peak at 2 loops)."""
    demand = busy()
    assert room(demand, extra=0) and room(demand, extra=1) and not room(demand, extra=2)
    assert room(demand, discovering=True, extra=0)
    assert not room(demand, discovering=True, extra=1)  # 8 - 6 - 1 - 8 // 8 = 0
    assert not room(demand, queues=8)  # one poll each, none to spare


def test_no_loop_beyond_what_the_demand_allows_nor_while_the_loop_lags() -> None:
    demand = busy()
    assert room(demand, loops=2, polls=100)
    assert not room(demand, loops=3, polls=100)  # 3 full batches' worth at concurrency 3
    assert not room(demand, lagging=True)


@given(
    st.integers(0, 40),
    st.integers(1, 8),
    st.integers(0, 4096),
    st.integers(1, 200),
    st.integers(0, 400),
    st.booleans(),
    st.booleans(),
)
def test_room_for_a_loop_keeps_every_limit(
    loops: int,
    concurrency: int,
    polls: int,
    queues: int,
    extra: int,
    discovering: bool,
    lagging: bool,
) -> None:
    demand = busy()
    for n in (2, 2, 1):  # short batches: more loops allowed
        demand.received(n, 0.0)
    allowed = receive_loops.room_for_a_loop(
        demand,
        loops=loops,
        concurrency=concurrency,
        polls=polls,
        queues=queues,
        extra=extra,
        discovering=discovering,
        lagging=lagging,
    )
    reserve = polls // 8 if discovering else 0
    within = loops < demand.loops_allowed(concurrency) and queues + extra + reserve < polls
    assert allowed == (within and not lagging)


def test_an_extra_loop_ends_once_the_queue_is_drained_or_the_loop_lags() -> None:
    demand = busy()
    assert extra_loop_ends(demand, lagging=False) is None
    assert extra_loop_ends(demand, lagging=True) == "lagging"
    demand.received(0, 1.0)  # any loop's empty receive
    assert extra_loop_ends(demand, lagging=False) == "drained"
    assert extra_loop_ends(demand, lagging=True) == "drained"  # no held-back count for it
    assert extra_loop_ends(QueueDemand(), lagging=False) == "drained"  # never polled


def test_the_pools_fixed_with_discovery_and_ten_loops_a_queues_concurrency_without() -> None:
    assert pools(0, 4, discovering=True) == Pools(DISCOVERY_POLLS, DISCOVERY_CALLS)
    assert pools(500, 4, discovering=True) == Pools(DISCOVERY_POLLS, DISCOVERY_CALLS)
    assert pools(2, 3, discovering=False) == Pools(60, 60)
    assert pools(0, 3, discovering=False) == Pools(0, 10)  # the calls' pool: at least 10
    assert Pools(60, 60).open_files == 120 + OTHER_FILES


UNLIMITED = -1  # RLIM_INFINITY on Linux


def test_the_soft_file_limit_is_raised_within_the_hard_one() -> None:
    assert raised_file_limit(4200, soft=1024, hard=65535, unlimited=UNLIMITED) == 4200
    assert raised_file_limit(99_999, soft=1024, hard=65535, unlimited=UNLIMITED) == 65535
    assert raised_file_limit(99_999, soft=1024, hard=UNLIMITED, unlimited=UNLIMITED) == 99_999
    assert raised_file_limit(4200, soft=65535, hard=65535, unlimited=UNLIMITED) is None
    assert raised_file_limit(4200, soft=UNLIMITED, hard=UNLIMITED, unlimited=UNLIMITED) is None


@given(st.integers(0, 10**6), st.integers(0, 10**6), st.integers(0, 10**6))
def test_a_raised_file_limit_is_never_lowered_nor_past_the_hard_one(
    needed: int, soft: int, extra: int
) -> None:
    hard = soft + extra
    raised = raised_file_limit(needed, soft, hard, UNLIMITED)
    if raised is None:
        assert soft >= min(needed, hard)
    else:
        assert soft < raised <= hard and raised == min(needed, hard)


@given(st.integers(1, 64), st.lists(st.integers(0, 20), max_size=20))
def test_the_pausing_room_a_queue_adds_is_what_dropping_it_gives_back(
    concurrency: int, added: list[int]
) -> None:
    """Discovery resizes the room by each refresh's new queues and each dropped one: the
    room is additive, so any order of adds and drops ends where the queue count says."""
    total = sum(pausing_room(concurrency, n) for n in added)
    assert total == pausing_room(concurrency, sum(added))
    assert pausing_room(concurrency, 1) == PAUSING_BATCHES * 10 * concurrency
