"""`costgate chaos`: a bounded suite of failures run against a real stack, with a ledger check.

Each scenario sends requests (each with an id of ours) while something breaks, then
compares what the clients were told with what the ledger holds: rows lost (answered 2xx
without a row), rows duplicated, rows that tell another story than the answer did.

Modules: `proxy` (a TCP path to PostgreSQL that can be cut), `stack` (sim, database,
`costgate up` on ports of its own, keys, replica PIDs), `load` (bounded paced traffic),
`ledger` (rows against answers, pure), `hostile` and `schema_fuzz` (bodies and fuzzing),
`outages` (the database, replicas, `down`, redeploys, upstream faults, a full disk),
`spool_disk` (a size-limited spool directory), `scenarios` (sizes, bookkeeping, the run),
`soak` (RSS and file descriptors of replicas over time), `report` (the tables).
"""
