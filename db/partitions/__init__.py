"""`usage_records` partitioned by UTC week: the partitions' names and DDL (`sql`), and
their upkeep (`maintenance`): created ahead, dropped whole by retention. docs/ROLLUPS.md."""
