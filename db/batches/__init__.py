"""The Files, Batch and Message Batches APIs' tables and their reads and writes
(docs/BATCHES.md): files and batches bound to the app that created them, each batch line's
ledger row named by its batch and custom id, and the lease that lets one replica poll."""
