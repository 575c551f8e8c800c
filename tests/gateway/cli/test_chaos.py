"""`costgate chaos` is registered and checks its arguments before starting anything."""

from __future__ import annotations

import pytest

from gateway.cli.main import main
from gateway.devtools.chaos.scenarios import SCENARIOS


def test_list_prints_the_scenarios_in_run_order(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["chaos", "--list"]) == 0
    assert capsys.readouterr().out.split() == list(SCENARIOS)
    assert main(["chaos", "--list", "--only", "down,hostile"]) == 0
    assert capsys.readouterr().out.split() == ["hostile", "down"]


@pytest.mark.parametrize("argv", [["--only", "no-such"], ["--soak", "soon"],
                                  ["--sample-every", "0s"]])
def test_bad_arguments_exit_2_without_a_stack(argv: list[str],
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["chaos", *argv]) == 2
    assert "costgate chaos:" in capsys.readouterr().err
