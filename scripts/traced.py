#!/usr/bin/env python3
"""Run a module with OpenTelemetry's SDK as the tracer provider, its spans batched
(BatchSpanProcessor, as an application exports them) to an exporter that drops them, and
count them at exit on stderr as a JSON event (`bench.spans`):

    python traced.py -m sqsdelay worker q1 q2

What tracing costs the worker is then the SDK's spans, without any network (issue 62: the
worker's CPU per message with tracing on and off; `bench_worker.py --otel`)."""

from __future__ import annotations

import atexit
import json
import runpy
import sys
from collections.abc import Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult


class Dropped(SpanExporter):
    """Counts the spans it is given, and drops them."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans += len(spans)
        return SpanExportResult.SUCCESS


def main() -> None:
    flag, module, *args = sys.argv[1:]
    if flag != "-m":
        raise SystemExit("usage: traced.py -m MODULE [ARGS...]")
    exporter = Dropped()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)

    def count() -> None:
        provider.shutdown()  # what is queued is exported first
        event: dict[str, Any] = {"event": "bench.spans", "spans": exporter.spans}
        print(json.dumps(event), file=sys.stderr, flush=True)

    atexit.register(count)
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
