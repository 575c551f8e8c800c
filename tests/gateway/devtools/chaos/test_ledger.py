"""Rows against answers: lost, duplicated, differing and the rest, from made-up outcomes."""

from __future__ import annotations

from gateway.devtools.chaos.ledger import Row, account, settle
from gateway.devtools.chaos.load import Outcome


def answer(n: int, status: int | None, rid: str | None = None) -> Outcome:
    return Outcome(f"c-{n}", 0.0, 1.0, status, rid)


def test_every_answer_with_its_row_is_intact() -> None:
    outcomes = [answer(1, 200, "a"), answer(2, 400, "b"), answer(3, 502, "c")]
    rows = [Row("a", 200, "ok"), Row("b", 400, "client_error"), Row("c", 502, "upstream_error")]
    acc = account(outcomes, rows)
    assert (acc.sent, acc.answered_2xx, acc.answered_4xx, acc.answered_5xx) == (3, 1, 1, 1)
    assert (acc.rows, acc.lost, acc.duplicated, acc.differing) == (3, (), 0, ())
    assert acc.missing_error_rows == ()


def test_a_2xx_without_a_row_is_lost_and_an_error_without_one_is_noted() -> None:
    acc = account([answer(1, 200, "a"), answer(2, 200, "b"), answer(3, 503, "c")],
                  [Row("a", 200, "ok")])
    assert acc.lost == ("b",)
    assert acc.missing_error_rows == ("c",)


def test_a_2xx_without_an_id_counts_as_lost_under_its_client_id() -> None:
    acc = account([answer(7, 200, None)], [])
    assert acc.lost == ("(no id) c-7",)


def test_rows_of_unanswered_requests_are_not_duplicates_up_to_their_number() -> None:
    outcomes = [answer(1, 200, "a"), answer(2, None), answer(3, None)]
    rows = [Row("a", 200, "ok"), Row("x", 499, "cancelled"), Row("y", 499, "cancelled")]
    acc = account(outcomes, rows)
    assert (acc.no_answer, acc.unmatched_rows, acc.without_id, acc.duplicated) == (2, 2, 2, 0)
    # one row more than the requests that could explain it: a duplicate
    acc = account(outcomes, [*rows, Row("z", 200, "ok")])
    assert acc.duplicated == 1


def test_an_id_with_two_rows_is_duplicated_and_a_row_with_another_status_differs() -> None:
    acc = account([answer(1, 200, "a"), answer(2, 200, "b")],
                  [Row("a", 200, "ok"), Row("a", 200, "ok"), Row("b", 499, "cancelled")])
    assert acc.duplicated == 1
    assert acc.differing == ("b",)
    assert acc.lost == ()


def test_settle_waits_for_late_rows_and_gives_up_on_lost_ones() -> None:
    outcomes = [answer(1, 200, "a"), answer(2, 200, "b")]
    arrivals = [[], [Row("a", 200, "ok")], [Row("a", 200, "ok"), Row("b", 200, "ok")]]
    calls = iter(arrivals + [arrivals[-1]] * 5)
    acc, _ = settle(outcomes, lambda: next(calls), timeout_s=10, poll_s=0)
    assert acc.lost == ()
    # a row that never comes: counted lost once the count stood still for a while
    acc, waited = settle(outcomes, lambda: [Row("a", 200, "ok")], timeout_s=0.2, poll_s=0.01)
    assert acc.lost == ("b",) and waited >= 0.1


def test_a_stream_that_broke_after_its_200_and_says_so_in_its_row_does_not_differ() -> None:
    broke = Outcome("c-1", 0.0, 1.0, 200, "a", stream=True, error="error event in the stream")
    silent = Outcome("c-2", 0.0, 1.0, 200, "b", stream=True)
    acc = account([broke, silent], [Row("a", 502, "upstream_error"), Row("b", 502, "ok")])
    assert acc.broken_streams == 1
    assert acc.differing == ("b",)  # the client read it whole: the row tells another story
