"""The exact-match response cache: key, policy, entries, backends and the request path's
gate (`gate.ResponseCache`)."""
