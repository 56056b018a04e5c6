"""``tflkit rules``: the one rule catalogue listed, each rule with what it fixes and its numeric
contract; one rule by name; an unknown name is one line (exit 2)."""

from __future__ import annotations

import json

from tflkit.cli.main import main
from tflkit.rewriter.rules import catalog


def test_rules_json_lists_the_catalogue(capsys) -> None:
    assert main(["rules", "--json"]) == 0
    records = json.loads(capsys.readouterr().out)["rules"]
    assert [r["name"] for r in records] == catalog().names()
    by_name = {r["name"]: r for r in records}
    assert by_name["transpose_conv_same_to_valid"]["contract"] == "exact (bit-identical)"
    pointwise = by_name["int8_pointwise_float_weights"]
    assert pointwise["default"] and pointwise["codes"] == ["WRONG_RESULT"]
    assert pointwise["contract"].startswith("within 0.02 of each output's peak")
    assert {r["name"] for r in records if not r["default"]} == {
        r.name for r in catalog() if catalog().is_opt_in(r)
    }


def test_rules_terminal_one_line_per_rule_and_one_rule(capsys) -> None:
    assert main(["rules"]) == 0
    text = capsys.readouterr().out
    assert "erf_approx" in text and "opt-in" in text and "default" in text
    assert main(["rules", "batch_matmul_broadcast"]) == 0
    one = capsys.readouterr().out
    assert "batch_matmul_broadcast" in one and "fold_fill" not in one


def test_unknown_rule_is_one_line(capsys) -> None:
    assert main(["rules", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tflkit: error: no rewrite rule 'nope'") and err.count("\n") == 1
