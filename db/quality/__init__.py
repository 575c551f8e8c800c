"""Quality beside cost in the ledger: feedback on requests and its audit trail
(`tables`), and how the gateway stores and reads them (`feedback_store`).

Importing the package registers its tables on `db.models.Base.metadata`, so Alembic's
environment and the schema test see them (docs/QUALITY.md)."""

from db.quality import tables as tables
