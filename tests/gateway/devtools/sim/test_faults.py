import pytest

from gateway.devtools.sim.faults import FaultTable
from gateway.devtools.sim.settings import FaultSpec


def kinds_drawn(table: FaultTable, model: str, draws: list[float]) -> list[str | None]:
    return [(f.kind if (f := table.draw(model, r)) else None) for r in draws]


def test_probabilities_of_one_model_add_up_over_one_draw_in_the_order_set():
    table = FaultTable()
    table.set("m", "rate_limit", FaultSpec(probability=0.1))
    table.set("m", "error_503", FaultSpec(probability=0.2))
    assert kinds_drawn(table, "m", [0.05, 0.15, 0.29, 0.31, 0.99]) == [
        "rate_limit", "error_503", "error_503", None, None,
    ]


def test_no_rules_means_no_fault_for_any_draw():
    assert FaultTable().draw("m", 0.0) is None


def test_a_counted_fault_stops_after_its_count():
    table = FaultTable()
    table.set("m", "error_500", FaultSpec(probability=1, count=2))
    assert kinds_drawn(table, "m", [0.5] * 4) == ["error_500", "error_500", None, None]
    assert table.snapshot()[0]["fired"] == 2


def test_star_rules_apply_to_every_model_unless_it_has_that_kind_itself():
    table = FaultTable()
    table.set("*", "error_502", FaultSpec(probability=1))
    table.set("a", "error_502", FaultSpec(probability=0))
    assert kinds_drawn(table, "b", [0.5]) == ["error_502"]
    assert kinds_drawn(table, "a", [0.5]) == [None]


def test_faults_are_per_model():
    table = FaultTable()
    table.set("a", "hang", FaultSpec())
    assert table.draw("b", 0.0) is None
    assert table.draw("a", 0.999).kind == "hang"


@pytest.mark.parametrize(("model", "kind", "left"), [
    (None, None, set()),
    ("a", None, {("b", "reset")}),
    ("a", "reset", {("a", "malformed"), ("b", "reset")}),
])
def test_clear_removes_all_one_model_or_one_kind(model, kind, left):
    table = FaultTable()
    table.set("a", "reset", FaultSpec())
    table.set("a", "malformed", FaultSpec())
    table.set("b", "reset", FaultSpec())
    table.clear(model, kind)
    assert {(f["model"], f["kind"]) for f in table.snapshot()} == left


def test_reset_restores_the_configured_faults_and_their_counts():
    table = FaultTable({"m": {"no_usage": FaultSpec(probability=1, count=1)}})
    table.draw("m", 0.1)
    table.clear()
    assert table.draw("m", 0.1) is None
    table.reset()
    assert table.draw("m", 0.1).kind == "no_usage"
