"""The ledger's database: `models` (tables), `engine` (DATABASE_URL or the embedded
server from `embedded`), `migrate` (Alembic from code), `keys` (gateway keys),
`price_sync` (price versions from the config) and `routing_audit` (routing changes)."""
