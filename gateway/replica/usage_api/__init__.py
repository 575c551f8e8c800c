"""OpenAI's admin Usage and Costs API on the gateway (`GET /v1/organization/usage/...`,
`GET /v1/organization/costs`): admin keys only, answered from the ledger's rollups,
never recorded as a usage row (docs/USAGE_API.md)."""
