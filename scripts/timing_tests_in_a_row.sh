#!/usr/bin/env bash
# Issue 27's flakiness bar: the timing-sensitive tests, N runs in a row under `-n 2`, beside
# two busy loops that keep both cores loaded. Stops at the first failing run.
# Usage (from the repository root): scripts/timing_tests_in_a_row.sh [RUNS] [LOG_DIR]
set -u
runs=${1:-10}
logs=${2:-/tmp/timing-tests}
mkdir -p "$logs"
python3 -c "while True: pass" & busy1=$!
python3 -c "while True: pass" & busy2=$!
trap 'kill $busy1 $busy2 2>/dev/null' EXIT
pattern="racing or outage or killed_around or failed_delete or network_drop or lost_answers"
pattern+=" or failed_extension or slow_batch or stepped_back or past_its_budget or sigkill"
pattern+=" or sigterm or two_copies or test_celery or requeued_twice or lagging"
pattern+=" or parallel_receive_loops or first_beat"
for i in $(seq 1 "$runs"); do
    start=$(date +%s)
    .venv/bin/pytest -q -n 2 --dist loadfile -p no:cacheprovider \
        tests/integration/test_worker_process.py tests/integration/test_registry.py \
        tests/integration/test_worker.py tests/integration/test_celery.py \
        tests/integration/test_aws_lambda.py tests/integration/test_outage.py tests/aws/test_heartbeat_stop.py \
        tests/aws/test_heartbeat_timing.py \
        tests/integration/test_emulator_fidelity.py \
        -k "$pattern" >"$logs/run$i.log" 2>&1
    rc=$?
    echo "run $i: rc=$rc $(( $(date +%s) - start )) s $(tail -1 "$logs/run$i.log")"
    [ $rc -eq 0 ] || exit $rc
done
