"""Fitting a conversation into a context window: what each policy drops and keeps."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.domain.context_trim import (
    ContextTooLong,
    TrimPolicy,
    fit,
    message_tokens,
    units,
    upper_bound,
)
from gateway.domain.token_estimate import estimate_prompt_tokens


def msg(role: str, words: int, tag: str = "", **extra: Any) -> dict[str, Any]:
    return {"role": role, "content": f"{tag} " + " ".join(["word"] * words), **extra}


def call(call_id: str) -> dict[str, Any]:
    fn = {"name": "lookup", "arguments": '{"q": "ledger"}'}
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": call_id, "type": "function", "function": fn}]}


def result(call_id: str, words: int = 50) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": " ".join(["row"] * words)}


def conversation(turns: int, words: int = 100) -> list[dict[str, Any]]:
    messages = [msg("system", 20, "sys")]
    for i in range(turns):
        messages += [msg("user", words, f"u{i}"), msg("assistant", words, f"a{i}")]
    messages.append(msg("user", 30, "last"))
    return messages


def tags(messages: list[dict[str, Any]]) -> list[str]:
    return [str(m.get("content") or m.get("tool_call_id") or "call").split()[0] for m in messages]


def test_a_conversation_that_fits_is_sent_as_it_is():
    messages = conversation(2)
    tokens = estimate_prompt_tokens(messages)
    out = fit(messages, window=tokens + 100, max_tokens=100, policy=TrimPolicy.ERROR)
    assert out.messages == messages and out.dropped_tokens == 0
    assert out.prompt_tokens == tokens


def test_far_inside_the_window_nothing_is_tokenized():
    messages = conversation(2) + [call("c1"), result("c1"), msg("user", 3, name="bob")]
    assert upper_bound(messages) >= estimate_prompt_tokens(messages)
    out = fit(messages, window=upper_bound(messages) + 10, max_tokens=10,
              policy=TrimPolicy.ERROR)
    assert out.messages == messages and out.prompt_tokens is None and out.dropped_tokens == 0


@pytest.mark.parametrize("text", ["plain words", "数字と帳簿", "🙂" * 50, "a\"b\n" * 40, ""])
def test_the_upper_bound_is_never_under_the_estimate(text):
    messages = [{"role": "user", "content": text, "name": "n"},
                {"role": "assistant", "content": [{"type": "text", "text": text}]}]
    assert upper_bound(messages) >= estimate_prompt_tokens(messages)


def test_per_message_costs_add_up_to_the_estimate():
    messages = conversation(3) + [call("c1"), result("c1")]
    total = 3 + sum(message_tokens(m) for m in messages)
    assert total == estimate_prompt_tokens(messages)


def test_error_refuses_a_conversation_over_the_window():
    messages = conversation(10)
    tokens = estimate_prompt_tokens(messages)
    with pytest.raises(ContextTooLong) as err:
        fit(messages, window=tokens + 50, max_tokens=100, policy=TrimPolicy.ERROR)
    assert err.value.prompt_tokens == tokens and err.value.window == tokens + 50
    assert "maximum context length is" in str(err.value)


def test_the_window_holds_the_output_too():
    messages = conversation(1)
    tokens = estimate_prompt_tokens(messages)
    fit(messages, window=tokens + 100, max_tokens=100, policy=TrimPolicy.ERROR)
    with pytest.raises(ContextTooLong):
        fit(messages, window=tokens + 100, max_tokens=101, policy=TrimPolicy.ERROR)
    # no max_tokens: the prompt alone must fit
    fit(messages, window=tokens, max_tokens=None, policy=TrimPolicy.ERROR)


def test_drop_oldest_drops_the_oldest_turns_and_keeps_system_and_last_user():
    messages = conversation(10)
    window = estimate_prompt_tokens(messages) // 2
    out = fit(messages, window=window, max_tokens=64, policy=TrimPolicy.DROP_OLDEST)
    kept = tags(out.messages)
    assert kept[0] == "sys" and kept[-1] == "last"
    assert "u0" not in kept and "a0" not in kept and "a9" in kept
    # the newest of what was dropped is older than everything kept (besides the system)
    assert kept[1:] == tags(messages)[len(messages) - len(kept) + 1:]
    assert out.prompt_tokens + 64 <= window
    assert out.prompt_tokens == estimate_prompt_tokens(out.messages)
    assert out.dropped_tokens == estimate_prompt_tokens(messages) - out.prompt_tokens
    assert out.dropped_messages == len(messages) - len(out.messages)


def test_drop_oldest_drops_no_more_than_it_needs():
    messages = conversation(4)
    over = message_tokens(messages[1]) - 1  # dropping the oldest turn's first message is enough
    window = estimate_prompt_tokens(messages) - over
    out = fit(messages, window=window, max_tokens=None, policy=TrimPolicy.DROP_OLDEST)
    assert tags(out.messages) == [t for t in tags(messages) if t != "u0"]


def test_middle_out_keeps_both_ends():
    messages = conversation(10)
    window = estimate_prompt_tokens(messages) * 6 // 10
    out = fit(messages, window=window, max_tokens=None, policy=TrimPolicy.MIDDLE_OUT)
    kept = tags(out.messages)
    assert kept[0] == "sys" and kept[-1] == "last"
    assert "u0" in kept and "a9" in kept  # the oldest and the newest turns stay
    assert "u5" not in kept and "a4" not in kept  # the middle went first
    assert out.prompt_tokens <= window


def test_system_and_developer_messages_are_never_dropped():
    messages = [msg("system", 10, "sys"), msg("user", 200, "u0"), msg("developer", 10, "dev"),
                msg("assistant", 200, "a0"), msg("user", 10, "last")]
    window = (estimate_prompt_tokens([messages[0], messages[2], messages[4]]) + 5)
    for policy in (TrimPolicy.DROP_OLDEST, TrimPolicy.MIDDLE_OUT):
        out = fit(messages, window=window, max_tokens=None, policy=policy)
        assert tags(out.messages) == ["sys", "dev", "last"]


def test_the_last_user_turn_keeps_its_tool_calls_and_results():
    messages = conversation(6) + [call("c1"), result("c1"), call("c2"), result("c2")]
    tail = messages[-5:]
    window = estimate_prompt_tokens([messages[0], *tail]) + 10
    out = fit(messages, window=window, max_tokens=None, policy=TrimPolicy.DROP_OLDEST)
    assert out.messages == [messages[0], *tail]


def test_a_tool_call_and_its_results_go_together():
    old = [msg("user", 10, "u0"), call("c1"), result("c1", 30), result("c1", 30),
           msg("assistant", 10, "a0")]
    messages = [msg("system", 5, "sys"), *old, msg("user", 10, "last")]
    assert units(messages) == [[0], [1], [2, 3, 4], [5], [6]]
    # just over by one token: dropping the user message u0 is enough in tokens, but the call
    # group is older than nothing else; try every window and check no result loses its call
    full = estimate_prompt_tokens(messages)
    for policy in (TrimPolicy.DROP_OLDEST, TrimPolicy.MIDDLE_OUT):
        for window in range(full - 200, full):
            try:
                out = fit(messages, window=window, max_tokens=None, policy=policy)
            except ContextTooLong:
                continue
            ids = [m.get("tool_call_id") for m in out.messages if m.get("role") == "tool"]
            calls = [m for m in out.messages if m.get("tool_calls")]
            assert (len(ids) == 2) == (len(calls) == 1), (policy, window, tags(out.messages))
            assert len(ids) in (0, 2)


def test_a_tool_result_without_its_call_is_its_own_unit():
    messages = [msg("user", 5), result("orphan"), msg("user", 5)]
    assert units(messages) == [[0], [1], [2]]


def test_legacy_function_results_stay_with_their_call():
    messages = [msg("user", 5),
                {"role": "assistant", "content": None,
                 "function_call": {"name": "f", "arguments": "{}"}},
                {"role": "function", "name": "f", "content": "42"},
                msg("user", 5)]
    assert units(messages) == [[0], [1, 2], [3]]


def test_what_must_be_kept_alone_too_long_is_refused_never_emptied():
    messages = [msg("system", 300, "sys"), msg("user", 10, "u0"), msg("user", 300, "last")]
    for policy in TrimPolicy:
        with pytest.raises(ContextTooLong) as err:
            fit(messages, window=200, max_tokens=None, policy=policy)
        assert err.value.prompt_tokens > 200


def test_a_single_message_over_the_window_is_refused():
    with pytest.raises(ContextTooLong):
        fit([msg("user", 500)], window=100, max_tokens=None, policy=TrimPolicy.DROP_OLDEST)


def test_no_user_message_keeps_the_last_message():
    messages = [msg("system", 5, "sys"), msg("assistant", 200, "a0"), msg("assistant", 10, "a1")]
    window = estimate_prompt_tokens([messages[0], messages[2]]) + 2
    out = fit(messages, window=window, max_tokens=None, policy=TrimPolicy.DROP_OLDEST)
    assert tags(out.messages) == ["sys", "a1"]


def test_an_empty_list_is_refused_not_returned_when_over():
    with pytest.raises(ContextTooLong):
        fit([], window=2, max_tokens=10, policy=TrimPolicy.DROP_OLDEST)
    assert fit([], window=100, max_tokens=10, policy=TrimPolicy.DROP_OLDEST).messages == []


def test_output_alone_over_the_window_is_refused():
    with pytest.raises(ContextTooLong):
        fit(conversation(1), window=1000, max_tokens=1000, policy=TrimPolicy.MIDDLE_OUT)


def test_a_run_of_tool_use_is_one_unit():
    messages = [msg("user", 5), call("c1"), result("c1"), call("c2"), result("c2"),
                msg("assistant", 5), msg("user", 5)]
    assert units(messages) == [[0], [1, 2, 3, 4], [5], [6]]


def test_a_reasoning_item_goes_with_what_follows_it():
    reasoning = {"role": "reasoning", "content": "thinking"}
    messages = [msg("user", 5), reasoning, call("c1"), result("c1"), reasoning,
                msg("assistant", 5), msg("user", 5)]
    assert units(messages) == [[0], [1, 2, 3, 4, 5], [6]]
    assert units([msg("user", 5), reasoning, msg("assistant", 5)]) == [[0], [1, 2]]


def test_kept_names_the_indexes_sent():
    messages = conversation(6)
    out = fit(messages, window=estimate_prompt_tokens(messages) // 2, max_tokens=None,
              policy=TrimPolicy.DROP_OLDEST)
    assert [messages[i] for i in out.kept] == out.messages
    assert fit(messages, window=10**6, max_tokens=None, policy=TrimPolicy.ERROR).kept == tuple(
        range(len(messages)))


def test_turn_pairs_units_open_on_a_user_turn():
    messages = [msg("system", 5), msg("user", 5), msg("assistant", 5),
                msg("user", 5), call("c1"), result("c1"), msg("assistant", 5), msg("user", 5)]
    assert units(messages, turn_pairs=True) == [[0], [1, 2], [3, 4, 5, 6], [7]]


def test_turn_pairs_trimming_keeps_roles_alternating():
    messages = conversation(10)
    for policy in (TrimPolicy.DROP_OLDEST, TrimPolicy.MIDDLE_OUT):
        for window in range(400, estimate_prompt_tokens(messages), 97):
            try:
                out = fit(messages, window=window, max_tokens=None, policy=policy,
                          turn_pairs=True)
            except ContextTooLong:
                continue
            roles = [m["role"] for m in out.messages[1:]]
            alternating = all(a != b for a, b in zip(roles, roles[1:], strict=False))
            assert roles[0] == "user" and alternating, roles
