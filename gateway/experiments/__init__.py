"""A/B experiments on routing mixes: two or more variants of one alias's weights, split
between the alias's traffic by a deterministic hash of the end user, the session or the
request, so the same customer always gets the same variant on every replica.

Pure: the definition as it travels in the live routing settings (`spec`), the
assignment a replica makes per request (`assign`), and the statistics of the results
(`stats`: Welch's unequal-variance t interval). The CLI starts, stops and promotes them
through the live-config path the routing weights use (docs/EXPERIMENTS.md).
"""
