"""The ledger's analytics: rollups kept by PostgreSQL (`rollup_sql`, `rollup_tables`,
`rollups`) and the queries the usage API and reports read (docs/ROLLUPS.md).

Importing the package registers the rollup tables on `db.models.Base.metadata`, so
Alembic's environment and the schema test see them."""

from db.analytics import attribution_tables as attribution_tables
from db.analytics import rollup_tables as rollup_tables
