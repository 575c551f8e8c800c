"""A batch's lines: read, checked, and every refusal naming its line."""

from __future__ import annotations

import json

import pytest

from gateway.batches.lines import parse_anthropic_requests, parse_openai_lines, upstream_jsonl
from gateway.domain.openai_errors import OpenAIError

URL = "/v1/chat/completions"


def _line(custom_id: str, model: str = "gpt-4o-mini", **extra: object) -> str:
    item = {"custom_id": custom_id, "method": "POST", "url": URL,
            "body": {"model": model, "messages": [{"role": "user", "content": "hi"}]}}
    return json.dumps({**item, **extra})


def test_each_line_is_read_with_its_number_custom_id_and_model() -> None:
    data = f"{_line('a')}\n\n{_line('b', 'claude-haiku-4.5')}\n".encode()
    lines = parse_openai_lines(data, URL, 10)
    assert [(x.number, x.custom_id, x.model) for x in lines] == [
        (1, "a", "gpt-4o-mini"), (3, "b", "claude-haiku-4.5")]


@pytest.mark.parametrize(("bad", "words"), [
    ("not json", "not a JSON object"),
    (_line("a"), "used by an earlier line"),
    (_line("z", url="/v1/embeddings"), "`url` must be"),
    (json.dumps({"custom_id": "z", "url": URL, "body": {"model": "m"}}), "messages"),
    (_line("z", method="GET"), "`method` must be POST"),
])
def test_a_bad_line_is_a_400_naming_it(bad: str, words: str) -> None:
    with pytest.raises(OpenAIError) as refused:
        parse_openai_lines(f"{_line('a')}\n{bad}\n".encode(), URL, 10)
    assert refused.value.status == 400
    assert refused.value.message.startswith("line 2")
    assert words in refused.value.message


def test_an_endpoint_not_served_in_batches_and_an_empty_file_are_refused() -> None:
    with pytest.raises(OpenAIError, match="not served in batches"):
        parse_openai_lines(_line("a").encode(), "/v1/embeddings", 10)
    with pytest.raises(OpenAIError, match="no request"):
        parse_openai_lines(b"\n\n", URL, 10)


def test_more_lines_than_allowed_are_refused_at_the_first_one_over() -> None:
    data = "\n".join(_line(f"c{i}") for i in range(4)).encode()
    with pytest.raises(OpenAIError, match="line 4: a batch holds at most 3 lines"):
        parse_openai_lines(data, URL, 3)


def test_anthropic_requests_need_a_strict_custom_id_and_max_tokens() -> None:
    params = {"model": "claude-haiku-4.5", "max_tokens": 10,
              "messages": [{"role": "user", "content": "hi"}]}
    lines = parse_anthropic_requests({"requests": [{"custom_id": "ok-1", "params": params}]}, 5)
    assert lines[0].max_tokens == 10
    with pytest.raises(OpenAIError, match="line 1.*custom_id"):
        parse_anthropic_requests({"requests": [{"custom_id": "no spaces", "params": params}]}, 5)
    no_max = {k: v for k, v in params.items() if k != "max_tokens"}
    with pytest.raises(OpenAIError, match="line 1.*max_tokens"):
        parse_anthropic_requests({"requests": [{"custom_id": "a", "params": no_max}]}, 5)


def test_the_providers_file_names_each_lines_upstream_model() -> None:
    lines = parse_openai_lines(f"{_line('a', 'cheap')}\n".encode(), URL, 5)
    sent = json.loads(upstream_jsonl(lines, {"a": "gpt-4o-mini-2024"}, URL))
    assert sent["body"]["model"] == "gpt-4o-mini-2024" and sent["custom_id"] == "a"
