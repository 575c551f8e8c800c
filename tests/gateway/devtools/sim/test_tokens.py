import random

from gateway.devtools.sim.tokens import (
    REPLY_PRIMING_TOKENS,
    corpus,
    count_text,
    encoding,
    message_tokens,
    tokenize_pieces,
)


def test_any_run_of_corpus_pieces_retokenizes_to_its_length():
    text = corpus()
    rng = random.Random(3)
    for _ in range(300):
        n = rng.randint(1, 400)
        start = rng.randrange(text.size)  # runs past the end wrap around
        content = text.text(start, n)
        assert len(encoding().encode_ordinary(content)) == n


def test_runs_longer_than_the_corpus_wrap_around_it():
    text = corpus()
    pieces, pieces_json = text.run(5, text.size * 2 + 7)
    assert len(pieces) == len(pieces_json) == text.size * 2 + 7
    assert pieces[: text.size] == pieces[text.size: 2 * text.size]


def test_chat_prompt_tokens_follow_openai_accounting():
    # OpenAI bills {"role": "user", "content": "hi"} as 8 prompt tokens
    assert message_tokens({"role": "user", "content": "hi"}) + REPLY_PRIMING_TOKENS == 8


def test_longer_and_named_messages_count_more():
    short = message_tokens({"role": "user", "content": "hello"})
    long = message_tokens({"role": "user", "content": "hello " * 50})
    named = message_tokens({"role": "user", "content": "hello", "name": "bob"})
    assert long > short + 40
    assert named > short


def test_content_parts_count_their_text():
    parts = [{"type": "text", "text": "one two three"}, {"type": "text", "text": "four"}]
    as_parts = message_tokens({"role": "user", "content": parts})
    assert as_parts == message_tokens({"role": "user", "content": ""}) + \
        count_text("one two three") + count_text("four")


def test_tokenize_pieces_joins_back_to_the_text():
    text = '{"answer": "the cost of a token"}'
    pieces = tokenize_pieces(text)
    assert "".join(pieces) == text
    assert len(pieces) == count_text(text)
