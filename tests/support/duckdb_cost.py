"""The cost job's aggregation written in DuckDB: the reference `scripts/bench_cost.py` times
the report against, and that `tests/cost/test_cost_parity.py` holds to the report's numbers.
One definition of each query, for both.

Each message is spread over the calendar months (UTC) of its delay [sent, sent + delay]: its
share of the delay in each month weights its hops; its count and first send stay in the
month it was sent. The keys are the report's (destination, usage month, band, log2 bucket)
and the sums are of per-message quantities (cycles k, 64 KiB chunks c, batched chunks b).
`{events}` is a directory of Parquet files (timestamp, destination, delay_seconds,
size_bytes); `{bill}` a CUR 2.0 export.
"""

from __future__ import annotations

SETTINGS = "SET TimeZone = 'UTC';\nSET enable_progress_bar = false;\n"

# The reference: the fastest formulation of the work we found (issue 46). Most messages live
# within one month: those rows are summed as they are, and only the others get their month
# list, unnested in the select list. Integer epoch microseconds and integer ceilings instead
# of TIMESTAMPTZ and interval arithmetic (byte counts and ceiled delays are whole numbers).
# 1M rows, one thread: 0.87 s against 8.19 s for AGG_LATERAL (docs/benchmarks.md).
AGG = r"""
WITH e AS NOT MATERIALIZED (
  SELECT destination, CAST("timestamp" AS TIMESTAMP) AS ts,
    CAST(ceil(delay_seconds) AS BIGINT) AS n, CAST(size_bytes AS BIGINT) AS size
  FROM read_parquet('{events}/*.parquet')),
t AS NOT MATERIALIZED (
  SELECT *, epoch_us(ts) AS s, epoch_us(ts) + n * 1000000 AS due,
    -- due before the next month starts (one due on it would add a month with a zero share)
    epoch_us(ts) + n * 1000000 < epoch_us(last_day(ts) + 1) AS one_month
  FROM e),
q AS NOT MATERIALIZED (
  SELECT destination, ts, n, s, due, one_month,
    greatest((n + 899) // 900 - 1, 0) AS k, greatest((size + 65535) // 65536, 1) AS c,
    CASE WHEN n > 900 THEN greatest((size * 10 + 65535) // 65536, 1) ELSE 0 END AS b,
    (n > 900)::INT AS routed,
    (n > 900)::INT + (n > 3600)::INT + (n > 86400)::INT + (n > 2592000)::INT AS band,
    floor(log2(greatest(n, 1)))::INT AS bucket
  FROM t),
one AS (
  SELECT destination, date_trunc('month', ts) AS m, band, bucket, count(*) AS messages,
    sum(n) AS delay_seconds, sum(routed) AS routed, sum(c) AS chunks,
    sum(routed * c) AS routed_chunks, sum(routed * n) AS routed_delay, sum(k) AS cycles,
    sum(k * c) AS cycle_chunks, sum(b) AS batch_chunks, sum(k * b) AS cycle_batch_chunks,
    min(s) AS first_us, max(s) AS last_us
  FROM q WHERE one_month GROUP BY ALL),
life AS (
  SELECT *, (m = date_trunc('month', ts))::INT AS at_send,
    (least(due, epoch_us(m + INTERVAL 1 MONTH)) - greatest(s, epoch_us(m))) / (n * 1e6) AS share
  FROM (SELECT *, unnest(generate_series(date_trunc('month', ts),
      date_trunc('month', make_timestamp(due)), INTERVAL 1 MONTH)) AS m
    FROM q WHERE NOT one_month)),
many AS (
  SELECT destination, m, band, bucket, sum(at_send) AS messages,
    sum(n * at_send) AS delay_seconds, sum(routed * at_send) AS routed,
    sum(c * at_send) AS chunks, sum(routed * c * at_send) AS routed_chunks,
    sum(routed * n * share) AS routed_delay, sum(k * share) AS cycles,
    sum(k * c * share) AS cycle_chunks, sum(b * share) AS batch_chunks,
    sum(k * b * share) AS cycle_batch_chunks, min(s) AS first_us, max(s) AS last_us
  FROM life GROUP BY ALL)
SELECT destination, strftime(m, '%Y-%m') AS month, band, bucket, sum(messages) AS messages,
  sum(delay_seconds) AS delay_seconds, sum(routed) AS routed, sum(chunks) AS chunks,
  sum(routed_chunks) AS routed_chunks, sum(routed_delay) AS routed_delay,
  sum(cycles) AS cycles, sum(cycle_chunks) AS cycle_chunks, sum(batch_chunks) AS batch_chunks,
  sum(cycle_batch_chunks) AS cycle_batch_chunks,
  CAST(make_timestamp(min(first_us)) AS TIMESTAMPTZ) AS first_ts,
  CAST(make_timestamp(max(last_us)) AS TIMESTAMPTZ) AS last_ts
FROM (SELECT * FROM one UNION ALL SELECT * FROM many) GROUP BY ALL
"""

# The same work as the benchmark measured it until issue 46: a lateral unnest of every row's
# month list and TIMESTAMPTZ arithmetic, about ten times slower than AGG. Kept as a second
# column of the benchmark, labelled for what it is; the ratios are against AGG.
AGG_LATERAL = r"""
WITH e AS (
  SELECT destination, CAST("timestamp" AS TIMESTAMPTZ) AS ts, ceil(delay_seconds) AS n,
    size_bytes AS size FROM read_parquet('{events}/*.parquet')),
q AS (
  SELECT *, greatest(ceil(n / 900) - 1, 0) AS k, greatest(ceil(size / 65536), 1) AS c,
    CASE WHEN n > 900 THEN greatest(ceil(size * 10 / 65536), 1) ELSE 0 END AS b,
    ts + to_seconds(n::BIGINT) AS due FROM e),
life AS (
  SELECT q.*, m AS month_start, (m = date_trunc('month', ts))::INT AS at_send,
    CASE WHEN n = 0 THEN (m = date_trunc('month', ts))::DOUBLE
      ELSE epoch(least(due, m + INTERVAL 1 MONTH) - greatest(ts, m)) / n END AS share
  FROM q, unnest(generate_series(date_trunc('month', ts), date_trunc('month', due),
    INTERVAL 1 MONTH)) AS t(m))
SELECT destination, strftime(month_start, '%Y-%m') AS month,
  (n > 900)::INT + (n > 3600)::INT + (n > 86400)::INT + (n > 2592000)::INT AS band,
  floor(log2(greatest(n, 1)))::INT AS bucket,
  sum(at_send) AS messages, sum(n * at_send) AS delay_seconds,
  sum((n > 900)::INT * at_send) AS routed, sum(c * at_send) AS chunks,
  sum(CASE WHEN n > 900 THEN c ELSE 0 END * at_send) AS routed_chunks,
  sum(CASE WHEN n > 900 THEN n ELSE 0 END * share) AS routed_delay,
  sum(k * share) AS cycles, sum(k * c * share) AS cycle_chunks, sum(b * share) AS batch_chunks,
  sum(k * b * share) AS cycle_batch_chunks, min(ts) AS first_ts, max(ts) AS last_ts
FROM life GROUP BY ALL
"""

# Each aggregation by the name the benchmark reports it under.
AGGREGATIONS = {"duckdb": AGG, "duckdb_lateral_unnest": AGG_LATERAL}

# The job with a bill: the aggregation, and the bill's lines booked to component,
# destination and usage month.
BILL_PART = r"""
CREATE TEMP TABLE bill AS
SELECT CASE WHEN queue LIKE '%-delay.fifo' THEN 'delay-queue'
    WHEN queue IN (SELECT DISTINCT destination FROM agg) THEN 'destination-queue' END AS component,
  regexp_replace(queue, '-delay\.fifo$', '') AS destination,
  strftime(line_item_usage_start_date, '%Y-%m') AS month,
  sum(pricing_public_on_demand_cost) AS list,
  sum(coalesce(line_item_net_unblended_cost, line_item_unblended_cost)) AS billed,
  sum(line_item_usage_amount) AS requests, count(*) AS lines
FROM (SELECT *, split_part(line_item_resource_id, ':', -1) AS queue
      FROM read_parquet('{bill}')
      WHERE line_item_product_code = 'AWSQueueService' AND line_item_line_item_type <> 'Tax')
GROUP BY ALL HAVING component IS NOT NULL;
SELECT (SELECT count(*) FROM agg) + (SELECT count(*) FROM bill);
"""


def aggregation_sql(name: str, events: str) -> str:
    """The settings and the aggregation `name` over the Parquet directory `events`."""
    return SETTINGS + AGGREGATIONS[name].format(events=events)


def bill_sql(name: str, events: str, bill: str) -> str:
    """The aggregation `name` into a table, then the bill's lines summed beside it."""
    agg = AGGREGATIONS[name].format(events=events)
    return "".join((SETTINGS, "CREATE TEMP TABLE agg AS ", agg, ";", BILL_PART.format(bill=bill)))
