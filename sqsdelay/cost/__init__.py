"""The cost report. Imports run one way: definitions (`pricing`, `whatif`, `bands`), then the
Spark job (`job`), then the tables and pages (`report`), then `run`, which ties them together
and is the `spark-submit` entry point."""
