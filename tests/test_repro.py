"""``tflkit validate --localize --repro DIR`` on the real GPU accelerator (software GPU).

An fp16 overflow is planted in a real model (openwakeword) the way ``bench/validate_faults.py``
plants it (``y*a*b +1 *1/b*1/a`` appended to its output: ``*b`` leaves fp16's range); the CLI
writes the repro; ``python repro.py`` in a fresh process (cwd=DIR, no PYTHONPATH) must reproduce the
overflow on the GPU by itself. A healthy model writes nothing and says so in one line. The real
faults of ``bench/repro_faults.py`` (docs/repro.md): magika's fp16 NaN (a few-op repro),
BirdNET's metadata model and a planted weight (nothing written, one line why).
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest_corpus import cache_root
from tests.needs import unavailable
from tests.test_validate_faults import _peak, plant_fp16_overflow, plant_weight
from tflkit import ir
from tflkit.cli.main import main
from tflkit.validation.options import ValidateOptions

pytestmark = pytest.mark.gpu


def _fresh_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.setdefault("XDG_RUNTIME_DIR", "/tmp")
    return env


def _run_repro(directory: Path) -> subprocess.CompletedProcess[str]:
    """``python repro.py`` in ``directory``, a fresh process without tflkit on the path."""
    return subprocess.run(
        [sys.executable, "repro.py"],
        cwd=directory,
        env=_fresh_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def magika_model(cache: Path) -> Path:
    """magika 0.5.1's file-type classifier (ONNX) converted by ``tflkit convert`` and made
    GPU-ready by ``tflkit rewrite``, once, in the test cache (shared with
    ``bench/repro_faults.py``)."""
    from tests.test_convert_foreign import MODELS, _fetch

    out = cache / "repro" / "magika_v1.tflite"
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, TFLKIT_CONVERTERS_DIR=str(cache / "converters"))
    env.setdefault("XDG_RUNTIME_DIR", "/tmp")
    converted = out.with_name("magika_v1.converted.tflite")
    cli = [sys.executable, "-m", "tflkit.cli.main"]
    for args in (
        ["convert", str(_fetch(MODELS["magika_v1"])), "-o", str(converted)],
        ["rewrite", str(converted), "-o", str(out)],
    ):
        done = subprocess.run(
            cli + args, capture_output=True, text=True, env=env, timeout=1800, check=False
        )
        if done.returncode != 0:
            unavailable(f"tflkit {args[0]} of magika failed: {done.stderr.strip()[-300:]}")
    return out


def _imports(script: str) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(script)):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            roots.add((node.module or "").split(".")[0])
    return roots


def test_repro_of_a_planted_fp16_overflow_reproduces_alone(world_models, gpu, tmp_path, capsys):
    source = world_models["openwakeword/hey_mycroft_v0.1"]  # a real 23-op keyword model
    planted = tmp_path / "planted.tflite"
    target = plant_fp16_overflow(source, planted, peak=_peak(source), merged=False)
    out = tmp_path / "repro"
    # the default runners: localization runs on the first failing pair's runner, the fp16
    # emulation; the repro is checked on the GPU in fp16
    code = main(["validate", str(planted), "-n", "2", "--localize", "--repro", str(out), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1
    verdicts = {c["pair"]: c["verdict"] for c in report["comparisons"]}
    assert verdicts["cpu-fp16:cpu"] == verdicts["gpu-fp16:cpu"] == "fail"
    assert verdicts["gpu-fp32:cpu"] != "fail"  # fp32 holds the planted chain (not meaningful
    # on these inputs: the wake-word probability barely moves)
    assert report["localization"]["runner"] == "cpu-fp16"
    (note,) = [n for n in report["notes"] if n.startswith("repro:")]
    assert note.startswith(f"repro: wrote {out} (1 op ending at op #")
    assert sorted(p.name for p in out.iterdir()) == [
        "README.md",
        "inputs.npz",
        "model.tflite",
        "repro.py",
    ]

    # The model: the planted *b MUL alone (the culprit reproduces without growing the chunk).
    model = ir.load(out / "model.tflite")
    assert [op.type for op in model.main.ops] == ["MUL"]
    assert [t.name for t in model.main.outputs] == [target]
    (x_tensor,) = model.main.inputs
    factor = float(next(t for t in model.main.ops[0].inputs if t.is_constant).data)

    # inputs.npz: the CPU's value of the MUL's input on the first input set, recomputed here
    # from the original model (y * a, y its CPU output) with its own Interpreter.
    from ai_edge_litert.interpreter import Interpreter

    feed = ValidateOptions(num_inputs=2).make_sets(ir.load(planted)).feeds[0]
    interpreter = Interpreter(model_path=str(source))
    (y,) = interpreter.get_signature_runner()(**feed).values()
    planted_model = ir.load(planted)
    pre = next(op for op in planted_model.main.ops if op.outputs[0].name == "planted/pre_scale")
    a = float(next(t for t in pre.inputs if t.is_constant).data)
    with np.load(out / "inputs.npz") as npz:
        assert npz.files == [x_tensor.name]
        x = npz[x_tensor.name]
    np.testing.assert_allclose(x, y * a, rtol=1e-3, atol=1e-3 * np.abs(y * a).max())
    overflowing = int((np.abs(x.astype(np.float64) * factor) > 65504).sum())
    assert overflowing > 0  # the fault, in numpy: the MUL's exact product leaves fp16's range

    # repro.py: only ai-edge-litert and numpy, and it reproduces in a fresh process.
    script = (out / "repro.py").read_text()
    assert _imports(script) == {"numpy", "ai_edge_litert"}
    assert "enforce_f32=False" in script
    done = subprocess.run(
        [sys.executable, "repro.py"],
        cwd=out,
        env=_fresh_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr[-2000:]
    assert f"REPRODUCED: ['{target}'] out of bound" in done.stdout
    line = next(s for s in done.stdout.splitlines() if s.startswith(f"{target}: "))
    gpu_only = int(re.search(r"inf/nan on the GPU only: (\d+)", line).group(1))
    assert gpu_only == overflowing  # every product above 65504 is inf on the GPU, no other

    # README.md: versions, adapter, precision, the op, the numbers, the command.
    import importlib.metadata

    readme = (out / "README.md").read_text()
    assert f"ai-edge-litert {importlib.metadata.version('ai-edge-litert')}" in readme
    assert re.search(r"GPU adapter: \S.* \(vendor \S+, arch \S+, backend \S+", readme)
    assert "precision: fp16" in readme and "type: `MUL`" in readme
    assert line in readme  # the script's own numbers
    assert f"`tflkit validate {planted} --num-inputs 2 --localize --repro {out} --json`" in readme


def test_healthy_model_writes_no_repro_and_says_so(corpus, gpu, tmp_path, capsys):
    out = tmp_path / "repro"
    args = ["validate", str(corpus.path("conv_dense")), "-n", "2", "-r", "cpu", "-r", "gpu-fp16"]
    code = main([*args, "--repro", str(out), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["verdict"] == "pass"
    assert not out.exists()
    (note,) = [n for n in report["notes"] if "repro" in n]
    assert "\n" not in note
    assert note == "repro: nothing written: no pair fails, so there is no divergence to reproduce"


def test_chunk_grows_backwards_until_the_gpu_shows_the_fault(corpus, gpu, tmp_path):
    """Named on the last op of the planted chain (its inputs from the CPU fit fp16, so alone it
    is right on the GPU), the repro grows backwards until the chunk holds the overflowing MUL."""
    from tflkit.compare.divergence import Localization, OpError
    from tflkit.ir.entry import entry_point
    from tflkit.validation.repro import write_repro

    source = corpus.path("conv_dense")
    planted = tmp_path / "planted.tflite"
    target = plant_fp16_overflow(source, planted, peak=_peak(source), merged=False)
    data = planted.read_bytes()
    model = ir.load(data)
    ops = model.main.ops
    first = next(op for op in ops if op.outputs[0].name == target)  # the *b MUL
    last = ops[-1]  # the final *1/a MUL
    assert [op.type for op in ops[first.index :]] == ["MUL", "ADD", "MUL", "MUL"]
    loc = Localization("gpu-fp16", 0.05)
    loc.culprits = [OpError(last.index, last.type, [t.name for t in last.outputs])]
    loc.first_divergent = OpError(first.index, first.type, [target])
    feed = ValidateOptions(num_inputs=2).make_sets(model).feeds[0]
    _, _, inputs, _ = entry_point(model)
    out = tmp_path / "repro"
    repro = write_repro(data, feed, inputs, loc, out, label="planted.tflite")
    end = last.index
    # alone: right on the GPU; with the *1/b MUL before it: fed the ADD's output (262017),
    # beyond fp16 on the CPU already, skipped; from the *b MUL on: the GPU overflows there.
    assert repro.tried == [
        ([end], "not reproduced"),
        ([end - 1, end], "input beyond fp16"),
        (list(range(first.index, end + 1)), "reproduced"),
    ]
    assert repro.written and repro.ops == list(range(first.index, end + 1))
    chunk = ir.load(out / "model.tflite")
    assert [op.type for op in chunk.main.ops] == ["MUL", "ADD", "MUL", "MUL"]
    assert [t.name for t in chunk.main.outputs] == [t.name for t in last.outputs]
    done = subprocess.run(
        [sys.executable, "repro.py"],
        cwd=out,
        env=_fresh_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 1 and "REPRODUCED" in done.stdout, done.stdout


def test_check_probe_repro_of_the_pack_crash_dies_the_same_way(corpus, gpu, tmp_path, capsys):
    """PACK of one tensor twice (``tf.stack([x, x])``) aborts the accelerator at compile time
    (DESIGN.md); ``check --probe --repro`` writes the op alone and a script that dies alike."""
    out = tmp_path / "repro"
    model = corpus.path("pack_same_tensor")
    code = main(["check", str(model), "--repro", str(out), "--json"])
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert code == 0 and report["probe"]["status"] == "crashed"
    crash = report["probe"]["crash"]
    assert (
        crash["op_type"] == "PACK"
        and "Check failed: !IsInput(consumer, value)" in (crash["message"])
    )
    (line,) = [s for s in captured.err.splitlines() if s.startswith("repro:")]
    assert line.startswith(f"repro: wrote {out} (1 op ending at op #{crash['op_index']} PACK")
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "model.tflite", "repro.py"]
    chunk = ir.load(out / "model.tflite")
    (op,) = chunk.main.ops
    assert op.type == "PACK" and op.inputs[0] is op.inputs[1]  # the same tensor, twice
    script = (out / "repro.py").read_text()
    assert _imports(script) == {"numpy", "ai_edge_litert"}
    done = subprocess.run(
        [sys.executable, "repro.py"],
        cwd=out,
        env=_fresh_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode != 0, done.stdout
    assert "Check failed: !IsInput(consumer, value)" in done.stderr
    assert "not reproduced" not in done.stdout
    readme = (out / "README.md").read_text()
    assert "Check failed: !IsInput(consumer, value)" in readme and "type: `PACK`" in readme


def test_repro_of_magikas_fp16_nan_is_one_op_and_reproduces_alone(gpu, tmp_path, capsys):
    """magika's classifier gives NaN on the GPU in fp16 (a FULLY_CONNECTED reaches 7.1e5): the
    repro is that op (at most 3 ops) and its script reproduces the NaN by itself."""
    model = magika_model(cache_root())
    out = tmp_path / "repro"
    code = main(["validate", str(model), "-n", "2", "--localize", "--repro", str(out), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1
    verdicts = {c["pair"]: c["verdict"] for c in report["comparisons"]}
    assert verdicts["gpu-fp16:cpu"] == verdicts["cpu-fp16:cpu"] == "fail"
    (note,) = [n for n in report["notes"] if n.startswith("repro:")]
    assert note.startswith(f"repro: wrote {out} ("), note
    chunk = ir.load(out / "model.tflite")
    assert len(chunk.main.ops) <= 3, [op.type for op in chunk.main.ops]
    assert "FULLY_CONNECTED" in [op.type for op in chunk.main.ops]
    done = _run_repro(out)
    assert done.returncode == 1, done.stdout + done.stderr[-2000:]
    assert "REPRODUCED" in done.stdout
    assert re.search(r"inf/nan on the GPU only: [1-9]", done.stdout), done.stdout


def test_planted_fp16_merged_overflow_reproduces_in_one_op(world_models, gpu, tmp_path, capsys):
    """``y*k*1/k``: the software GPU merges the multiplies in the whole model and does not
    overflow, the emulation does; alone, the ``*k`` MUL overflows on the GPU too."""
    source = world_models["openwakeword/hey_mycroft_v0.1"]
    planted = tmp_path / "planted.tflite"
    target = plant_fp16_overflow(source, planted, peak=_peak(source), merged=True)
    out = tmp_path / "repro"
    args = ["validate", str(planted), "-n", "2", "-r", "cpu", "-r", "cpu-fp16", "-r", "gpu-fp16"]
    code = main([*args, "--localize", "--repro", str(out), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1 and report["localization"]["runner"] == "cpu-fp16"
    chunk = ir.load(out / "model.tflite")
    assert [op.type for op in chunk.main.ops] == ["MUL"]
    assert [t.name for t in chunk.main.outputs] == [target]
    done = _run_repro(out)
    assert done.returncode == 1 and f"REPRODUCED: ['{target}'] out of bound" in done.stdout


def test_no_repro_for_a_loss_spread_over_many_ops(world_models, gpu, tmp_path, capsys):
    """BirdNET's metadata model fails in fp16 (emulation and GPU) from fp16 storage of SIN's
    arguments, a loss no op shows beyond the bound, alone or in the chain: nothing is written,
    and one line says why with the largest figures."""
    model = world_models["birdnet/BirdNET_GLOBAL_6K_V2.4_MData_Model_V2_FP16"]
    out = tmp_path / "repro"
    code = main(["validate", str(model), "-n", "2", "--localize", "--repro", str(out), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1 and not out.exists()
    (note,) = [n for n in report["notes"] if n.startswith("repro:")]
    assert "\n" not in note
    assert note.startswith(
        "repro: nothing written: no op parts from the CPU by more than 0.05 of its peak on "
        "cpu-fp16, alone (largest: op #"
    ), note
    assert "small losses spread over many ops" in note


def test_no_repro_against_a_tflite_reference_says_why(world_models, tmp_path, capsys):
    """A changed weight, found against the .tflite it replaces (both on the CPU): no GPU fault,
    so nothing is written, and the line names where the two models part."""
    source = world_models["openwakeword/hey_mycroft_v0.1"]
    planted = tmp_path / "planted.tflite"
    target = plant_weight(source, planted)
    out = tmp_path / "repro"
    args = ["validate", str(planted), "-n", "2", "-r", "cpu", "--reference", str(source)]
    code = main([*args, "--localize-on", "reference", "--repro", str(out), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1 and not out.exists()
    culprit = report["localization"]["culprits"][0]
    op = next(o for o in report["localization"]["ops"] if o["op_index"] == culprit)
    assert op["outputs"] == [target]
    (note,) = [n for n in report["notes"] if n.startswith("repro:")]
    assert note == (
        "repro: nothing written: localization ran on reference (this model against the .tflite "
        "it replaces, both on the CPU), so the difference is between two models, not a GPU "
        f"fault the CPU-vs-GPU repro could show; the models part at op #{culprit} "
        f"{op['op_type']}"
    )
