"""Tables the replicas share besides the ledger: the response cache and the owners of
provider objects. Importing the package puts both on `db.models.Base.metadata`, whichever
of them a process imported first (the migrations' and the models' tests compare it)."""

from db.shared_state import provider_objects, response_cache

__all__ = ["provider_objects", "response_cache"]
