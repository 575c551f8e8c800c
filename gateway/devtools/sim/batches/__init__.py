"""The simulator's OpenAI Files and Batch APIs and Anthropic Message Batches: a batch
ends `delay_s` after it was created (on the first look after that), its lines answered
as live requests would be, except the custom ids set to fail (`sim.batches`, or
`PUT /_sim/batches` at run time)."""
