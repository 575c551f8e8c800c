"""Budget alerts: per-budget Prometheus gauges and threshold webhooks, from one dedicated
loop (`costgate alerts run`) rather than from every replica (docs/alerts.md)."""
