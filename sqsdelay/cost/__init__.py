"""The cost report, a pipeline whose imports run one way: definitions (`request_counts`,
`pricing`, `money`, `whatif`, `bands`), inputs (`inputs`, `workload`, `bill`), the Spark
aggregation (`session`, `job`, `fold`), the summary (`summary`, `reconcile`, `focus`),
rendering (`render/`), then `run`, which ties them together and is the `spark-submit` entry
point."""
