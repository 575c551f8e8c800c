"""Who and what a request served below its key: the end user, the session, the tags.

Pure: parsing and bounding the inputs (`inputs`), the stored form of an end user's id
(`identity`: plain, or an HMAC so the same customer still groups together). The request
path reads them once per request and puts them on the ledger row (docs/ATTRIBUTION.md).
"""
