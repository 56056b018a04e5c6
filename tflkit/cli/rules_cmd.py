"""``tflkit rules``: every rewrite rule of the one catalogue, what it fixes and its numeric
contract."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from tflkit.cli.options import JsonOption


def rule_records() -> list[dict[str, Any]]:
    """One record per rule of the catalogue, in the order ``rewrite`` tries them."""
    from tflkit.rewriter.rules import catalog

    rules = catalog()
    return [
        {
            "name": rule.name,
            "default": not rules.is_opt_in(rule),
            "ops": list(rule.fixes),
            "codes": [str(code) for code in rule.codes],
            "summary": rule.summary,
            "contract": rule.contract.describe(),
            "exact": rule.contract.exact,
        }
        for rule in rules
    ]


def rules(
    name: Annotated[
        str | None, typer.Argument(help="Show one rule (its name, as --rule takes it).")
    ] = None,
    json_output: JsonOption = False,
) -> None:
    """The rewrite rules: what each fixes (op, reason), how it rewrites, and how far it may
    move the outputs (exact, or a stated bound). Default rules run in every `rewrite`; opt-in
    ones only with `rewrite --rule NAME`."""
    from tflkit.cli.output import console, print_json
    from tflkit.errors import UsageError

    records = rule_records()
    if name is not None:
        records = [r for r in records if r["name"] == name]
        if not records:
            known = ", ".join(r["name"] for r in rule_records())
            raise UsageError(f"no rewrite rule {name!r}; known rules: {known}")
    if json_output:
        print_json({"schema": "tflkit.rules/1", "rules": records})
        return
    _render(records, console())


def _render(records: list[dict[str, Any]], out: Any) -> None:
    from rich import box
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for header in ("rule", "run", "fixes", "contract"):
        table.add_column(header, overflow="fold")
    for r in records:
        fixes = ", ".join(r["ops"]) + (f" ({', '.join(r['codes'])})" if r["codes"] else "")
        table.add_row(r["name"], "default" if r["default"] else "opt-in", fixes, r["contract"])
    out.print(table)
    if len(records) == 1:
        out.print(records[0]["summary"])
    else:
        defaults = sum(r["default"] for r in records)
        out.print(
            f"{len(records)} rules, {defaults} default, {len(records) - defaults} opt-in "
            "(`tflkit rules NAME` says what one does; --json has every field)"
        )
