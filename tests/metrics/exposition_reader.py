"""Reading Prometheus text back into numbers, with prometheus_client's own parser."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families


def samples(text: str | bytes) -> list[tuple[str, dict[str, str], float]]:
    if isinstance(text, bytes):
        text = text.decode()
    return [
        (s.name, dict(s.labels), s.value)
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    ]


def total(text: str | bytes, name: str, **match: str) -> float:
    """Sum of `name`'s samples whose labels include `match`."""
    return sum(
        v
        for n, labels, v in samples(text)
        if n == name and all(labels.get(k) == want for k, want in match.items())
    )


def families(text: str | bytes) -> dict[str, str]:
    """Family name -> type, as the exposition declares them."""
    if isinstance(text, bytes):
        text = text.decode()
    return {fam.name: fam.type for fam in text_string_to_metric_families(text)}
