"""OpenAI's Files and Batch APIs and Anthropic's Message Batches through the gateway
(docs/BATCHES.md): every line admitted as a live request would be, the batch sent to one
provider, and each line a ledger row at the provider's batch rate once it ends."""
