"""``tflkit/rewriter/rules/index.py`` is what its generator renders from the catalogue, and the
rules it offers for an op type are the catalogue's that may fix that type, flags and order kept
(``tests/test_rule_totality.py`` checks, op by op on the corpus, that a rule's pattern takes no
op outside its ``fixes`` unless it says ``any_op_type``)."""

from __future__ import annotations

from tflkit.rewriter.rules import catalog, fixing, index_gen


def test_committed_index_is_generated_from_the_catalogue() -> None:
    committed = index_gen.TARGET.read_text(encoding="utf-8")
    assert committed == index_gen.render(), (
        "tflkit/rewriter/rules/index.py is stale: run python -m tflkit.rewriter.rules.index_gen"
    )


def test_fixing_offers_the_catalogue_rules_of_each_op_type() -> None:
    rules = catalog()
    op_types = sorted({t for rule in rules for t in rule.fixes} | {"NOT_AN_OP_TYPE"})
    for op_type in op_types:
        expected = [r for r in rules if r.any_op_type or op_type in r.fixes]
        offered = fixing(op_type)
        assert [type(r) for r in offered] == [type(r) for r in expected], op_type
        assert [offered.is_opt_in(r) for r in offered] == [rules.is_opt_in(r) for r in expected]
    assert [r.name for r in fixing("NOT_AN_OP_TYPE")] == ["fold_constants"]
    assert [r.name for r in fixing("LOG_SOFTMAX")] == ["fold_constants", "log_softmax"]
