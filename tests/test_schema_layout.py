"""``tflkit/ir/schema_layout.py`` is what its generator renders from the installed schema, and
reading and checking a model imports neither numpy nor the generated schema."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest_corpus import Corpus
from tflkit.ir import schema_layout_gen

REPO = Path(__file__).resolve().parents[1]


def test_committed_layout_is_generated_from_the_installed_schema() -> None:
    committed = schema_layout_gen.TARGET.read_text(encoding="utf-8")
    assert committed == schema_layout_gen.render(), (
        "tflkit/ir/schema_layout.py is stale: run python -m tflkit.ir.schema_layout_gen"
    )


def test_layout_agrees_with_the_object_api() -> None:
    """Spot checks against the generated code, field by field, for the tables the reader walks."""
    from ai_edge_litert import schema_py_generated as fb

    from tflkit.ir import schema_layout

    for table in ("Model", "SubGraph", "Tensor", "Operator", "Buffer", "Conv2DOptions"):
        attributes = [f[4] for f in schema_layout.TABLES[table]]
        assert set(attributes) <= set(vars(getattr(fb, f"{table}T")())), table
    assert (
        schema_layout.BuiltinOperator.STABLEHLO_COMPOSITE == fb.BuiltinOperator.STABLEHLO_COMPOSITE
    )
    assert (
        vars(schema_layout.TensorType).items()
        >= {k: v for k, v in vars(fb.TensorType).items() if not k.startswith("_")}.items()
    )


def test_check_imports_neither_numpy_nor_the_generated_schema(corpus: Corpus) -> None:
    """``tflkit check --json`` reads options, quantization and small constants itself."""
    model = corpus.path("full_int8")
    script = (
        "import json, sys\n"
        "from tflkit.cli.main import main\n"
        f"code = main(['check', '--json', {str(model)!r}])\n"
        "heavy = ('numpy', 'flatbuffers', 'ai_edge_litert.schema_py_generated')\n"
        "print(json.dumps([code, [m for m in heavy if m in sys.modules]]), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    report = json.loads(done.stdout)
    assert report["ops"], done.stderr
    assert json.loads(done.stderr.strip().splitlines()[-1]) == [0, []], done.stderr
