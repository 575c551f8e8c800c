"""Unit economics: spend per end user, per session and per tag, read from the attribution
rollups only (`db.analytics.attribution_sql`): the SQL (`sql`), its reading (`queries`),
and the pure figures built on the results (`economics`)."""
