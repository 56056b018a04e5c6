"""LiteRT-LM ``.litertlm`` bundles: the file format read and written, ``inspect``/``check`` on
the bundle corpus (``tests/corpus/llm_bundle_build.py``: litert-torch's ``convert_to_litert``,
tinyllama shrunk, random weights; built once into the test cache), and ``validate`` /
``rewrite`` through the real LiteRT-LM engine (``litert-lm-api``) on the CPU and on the GPU
(lavapipe), the engine in a child process.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.cli import run_tflkit
from tflkit.bundle.litertlm import BLOCK, load_bundle, save_bundle
from tflkit.bundle.llm_metadata import decode_llm_metadata
from tflkit.errors import ModelLoadError
from tflkit.validation.bundle_subject import CPU, GPU


def _bytes(path: Path) -> bytes:
    return path.read_bytes()


def test_bundle_reads_as_built(llm_bundles):
    manifest = json.loads((llm_bundles / "MANIFEST.json").read_text())["bundles"]
    entry = manifest["tkv_int8_hf"]
    bundle = load_bundle(llm_bundles / entry["file"])
    assert bundle.version[0] == 1
    kinds = [s.kind for s in bundle.sections]
    assert sorted(kinds) == ["HF_Tokenizer_Zlib", "LlmMetadataProto", "TFLiteModel"]
    assert all(s.begin % BLOCK == 0 for s in bundle.sections)
    meta = decode_llm_metadata(bundle.view(bundle.of_kind("LlmMetadataProto")[0]))
    assert meta["start_token"] == {"ids": [entry["start_token_id"]]}
    assert meta["stop_tokens"] == [{"ids": entry["stop_token_ids"]}]
    assert meta["max_num_tokens"] == entry["kv_cache_len"]
    (section,) = bundle.of_kind("TFLiteModel")
    assert section.model_type == "prefill_decode"
    model = bundle.model(section)  # ir.load on a view of the bundle's map
    assert [s.key for s in model.signatures] == [f"prefill_{entry['prefill_len']}", "decode"]
    view = bundle.view(section)
    assert isinstance(view, memoryview) and view.obj is bundle.data  # no copy


def test_bundle_written_back_is_byte_identical_and_a_section_swaps_alone(llm_bundles, tmp_path):
    source = llm_bundles / "tkv_int8_sp.litertlm"
    bundle = load_bundle(source)
    save_bundle(bundle, tmp_path / "same.litertlm")
    assert _bytes(tmp_path / "same.litertlm") == _bytes(source)
    (section,) = bundle.of_kind("TFLiteModel")
    grown = bytes(bundle.view(section)) + b"\0" * 20_000  # one more block
    spans = save_bundle(bundle, tmp_path / "grown.litertlm", {section.index: grown})
    again = load_bundle(tmp_path / "grown.litertlm")
    for old, new, (begin, end) in zip(bundle.sections, again.sections, spans, strict=True):
        assert (new.begin, new.end) == (begin, end) and new.begin % BLOCK == 0
        if old.index != section.index:
            assert bytes(again.view(new)) == bytes(bundle.view(old))
    assert bytes(again.view(section.index)) == grown
    with pytest.raises(Exception, match="overwrite"):
        save_bundle(bundle, source)


@pytest.mark.parametrize(
    ("cut", "message"),
    [
        (lambda d: d[:20], "truncated .litertlm bundle"),
        (lambda d: d[:100], "header ends at byte"),
        (lambda d: d[:40_000], "spans bytes"),
        (lambda d: b"LITERTLX" + d[8:], "not a LiteRT-LM bundle"),
        (lambda d: d[:8] + (9).to_bytes(4, "little") + d[12:], "format version 9"),
    ],
)
def test_broken_bundles_get_one_line_exit_2(llm_bundles, tmp_path, cut, message):
    data = _bytes(llm_bundles / "tkv_int8_hf.litertlm")
    broken = tmp_path / "broken.litertlm"
    broken.write_bytes(cut(data))
    with pytest.raises(ModelLoadError, match=message):
        load_bundle(broken)
    if data[:8] == cut(data)[:8]:  # the CLI knows it for a bundle by its magic
        done = run_tflkit("inspect", str(broken))
        assert done.returncode == 2, done.stderr
        assert message in done.stderr and "Traceback" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1


def test_inspect_says_what_the_engine_will_refuse(llm_bundles):
    def inspected(name: str) -> dict:
        done = run_tflkit("inspect", str(llm_bundles / f"{name}.litertlm"), "--json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    healthy = inspected("tkv_int8_sp")
    assert healthy["format"] == "litertlm"
    assert healthy["tokenizer"]["kind"] == "sentencepiece"
    assert healthy["tokenizer"]["vocab_size"] == 256
    assert healthy["llm_metadata"]["max_num_tokens"] == 32
    (model,) = healthy["models"]
    assert model["warnings"] == [] and model["inspect"]["subgraphs"]
    warned = {
        "tkv_int8_sp_small": "the tokenizer has 210 tokens and the model's logits 256",
        "default_int8_hf": "reads the context length from its axis 2 (2)",
        "tkv_none_hf": "EMBEDDING_LOOKUP reads a float32 table",
    }
    for name, text in warned.items():
        (model,) = inspected(name)["models"]
        assert any(text in w for w in model["warnings"]), (name, model["warnings"])


def test_check_reports_each_tflite_section(llm_bundles):
    done = run_tflkit("check", str(llm_bundles / "tkv_int8_hf.litertlm"), "--json")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    report = json.loads(done.stdout)
    (section,) = [s for s in report["sections"] if s["type"] == "TFLiteModel"]
    assert section["skipped"] is None
    assert section["check"]["sha256"]  # of the section's bytes, a view of the bundle
    names = [s["name"] for s in section["check"]["subgraphs"]]
    assert names[0] == "decode"  # decode first, as for a .tflite
    # one GPU statement: the table's crash verdict is the accelerator's, the engine is another path
    from tflkit.bundle.describe import ACCELERATOR_SCOPE, ENGINE_NOTE

    assert not section["check"]["compiles"]
    assert section["check"]["summary"].startswith(ACCELERATOR_SCOPE)
    assert ENGINE_NOTE in section["warnings"]


def test_backend_constraint_is_honoured(llm_bundles, tmp_path):
    path = llm_bundles / "tkv_int8_hf_cpu_only.litertlm"
    done = run_tflkit("check", str(path), "--json")
    assert done.returncode == 0, done.stderr
    (section,) = json.loads(done.stdout)["sections"]
    assert section["backend_constraint"] == "cpu" and section["check"] is None
    assert "never gives it to the GPU" in section["skipped"]
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("the weather today is\n\nonce upon a time\n")
    code, report = _validate(path, "--prompts", str(prompts))
    assert report["schema"] == "tflkit.validate-litertlm/1"
    assert code == 0 and list(report["runs"]) == [CPU]
    assert report["prompts"] == ["the weather today is", "once upon a time"]
    assert [p["prompt"] for p in report["runs"][CPU]["prompts"]] == report["prompts"]
    assert "backend_constraint cpu" in report["notes"][0]


def _validate(path: Path, *args: str) -> tuple[int, dict]:
    done = run_tflkit("validate", str(path), "--json", *args, timeout=900)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


@pytest.mark.gpu
def test_validate_healthy_bundle_passes_with_the_engines_figures(llm_bundles, gpu, tmp_path):
    bundle = tmp_path / "tkv_int8_sp.litertlm"
    shutil.copyfile(llm_bundles / bundle.name, bundle)
    code, report = _validate(bundle)
    assert code == 0, report["findings"]
    # the engine's caches (it writes them beside the model by default) stay in tflkit's own
    # folders, one per run: nothing lands beside the user's bundle
    assert sorted(p.name for p in tmp_path.iterdir()) == [bundle.name]
    for backend in (CPU, GPU):
        run = report["runs"][backend]
        assert run["status"] == "ok"
        assert run["figures"]["last_decode_tokens_per_second"] > 0
        assert run["figures"]["init_time_in_second"] > 0
    for c in report["comparisons"][GPU]:
        assert not c["fault"], (c["verdict"], c["margins_at_part"], report["findings"])
        if c["verdict"] in ("agrees", "consistent"):
            assert c["worst_score_delta"] <= report["thresholds"]["score_tol"]
        else:  # the GPU's numbers varied: right again in a later run (a note, not a finding)
            assert c["unstable"] and c["repeats"], c
    # on the software GPU the engine runs on one CPU (see the busy-machine test below)
    assert len(report["runs"][GPU]["executed"]["cpus"]) == 1


@pytest.mark.gpu
def test_healthy_bundle_beside_other_gpu_work_gives_the_same_numbers(llm_bundles, gpu, tmp_path):
    """Another process compiling and running a model on the GPU in a loop made the engine's GPU
    scores vary on lavapipe (a healthy bundle off by up to 1.08, wrong in three runs in a row,
    when the engine's threads ran on both cores): pinned to one CPU they are the idle machine's,
    run after run."""
    from tests.busy_gpu import busy_gpu

    bundle = tmp_path / "tkv_int8_sp.litertlm"
    shutil.copyfile(llm_bundles / bundle.name, bundle)
    reports = []
    with busy_gpu([llm_bundles / "toy_model_with_kv_cache.tflite"]):
        for _ in range(3):
            code, report = _validate(bundle)
            assert code == 0, report["findings"]
            reports.append(report)
    for report in reports:
        assert not report["notes"], report["notes"]
        for c in report["comparisons"][GPU]:
            assert c["verdict"] in ("agrees", "consistent") and not c["repeats"], c
            assert c["worst_score_delta"] <= report["thresholds"]["score_tol"]
    first = [c["gpu_scores_of_cpu_tokens"] for c in reports[0]["comparisons"][GPU]]
    for report in reports[1:]:
        again = [c["gpu_scores_of_cpu_tokens"] for c in report["comparisons"][GPU]]
        assert again == first  # bit for bit, as on an idle machine


def _imports(script: Path) -> set[str]:
    import ast

    tree = ast.parse(script.read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    return {n.split(".")[0] for n in names} | {
        n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module
    }


@pytest.mark.gpu
def test_repro_of_an_engine_finding_shows_it_with_litert_lm_alone(llm_bundles, gpu, tmp_path):
    """``--repro DIR`` on a bundle: a script of LiteRT-LM alone that shows the finding (the
    planted overflow's NaN scores; the float bundle's GPU abort), checked by running it."""
    import subprocess
    import sys

    planted = llm_bundles / "tkv_int8_hf_norm_x3e5.litertlm"
    code, report = _validate(
        planted, "--prompt", "once upon a time", "--repro", str(tmp_path / "a")
    )
    assert code == 1 and report["repro"]["written"], report
    script = tmp_path / "a" / "repro.py"
    assert _imports(script) <= {"math", "os", "sys", "litert_lm"}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True)
    assert done.returncode == 1 and "REPRODUCED" in done.stdout, done.stdout[-2000:]
    assert "        nan " in done.stdout  # the GPU's scores, token by token
    readme = (tmp_path / "a" / "README.md").read_text()
    assert "non-finite scores from step 2" in readme and "litert-lm-api" in readme

    aborts = llm_bundles / "tkv_none_hf.litertlm"
    code, report = _validate(aborts, "--prompt", "the weather", "--repro", str(tmp_path / "b"))
    assert code == 1 and report["repro"]["written"], report["repro"]
    assert "killed by signal 6" in report["repro"]["line"]  # SIGABRT: the engine's abort
    assert "Unsupported external weights type" in (tmp_path / "b" / "README.md").read_text()


@pytest.mark.gpu
def test_repro_without_an_engine_finding_writes_nothing(llm_bundles, gpu, tmp_path):
    healthy, out = llm_bundles / "tkv_int8_hf.litertlm", tmp_path / "r"
    code, report = _validate(healthy, "--prompt", "the weather", "--repro", str(out))
    assert code == 0 and not report["repro"]["written"], report["repro"]
    assert "no finding" in report["repro"]["line"] and not out.exists()


def _record(scores: list[float]) -> dict:
    """An engine worker's record of one prompt: greedy ids, their scores, the GPU's scoring."""
    ids = list(range(len(scores)))
    return {"prompt": "p", "prompt_ids": [1], "ids": ids, "scores": scores, "scored": scores}


def test_a_fault_is_one_that_comes_back_and_a_prompt_right_again_is_unstable():
    """The verdict over repeated GPU runs (``tflkit.compare.tokens``): the same wrong numbers
    again is a reproduced fault; wrong in every run with different numbers is still a fault;
    wrong, then right in a later run, is unstable (a note, not a finding)."""
    from tflkit.compare.tokens import SAME_TOL, compare_prompt

    cpu = _record([-1.0, -2.0, -3.0])

    def gpu(scored: list[float]) -> dict:
        return {**_record([-1.0, -2.0, -3.0]), "scored": scored}

    first = compare_prompt(cpu, gpu([-1.0, -2.4, -3.0]))
    assert first.verdict == "off" and first.fault and not first.settled(2)
    first.repeats += [compare_prompt(cpu, gpu([-1.0, -2.4 + SAME_TOL / 2, -3.0])) for _ in "ab"]
    assert first.settled(2) and first.reproduced and first.fault and "(the same)" in first.line()

    varying = compare_prompt(cpu, gpu([-1.0, -2.4, -3.0]))
    varying.repeats += [compare_prompt(cpu, gpu([-1.0, -2.3, -3.0])) for _ in "ab"]
    assert varying.fault and not varying.reproduced and not varying.settled(2)
    assert "different numbers each time" in varying.line()

    glitch = compare_prompt(cpu, gpu([-1.0, -2.4, -3.0]))
    glitch.repeats += [
        compare_prompt(cpu, gpu([-1.0, -2.3, -3.0])),
        compare_prompt(cpu, gpu([-1.0, -2.0, -3.0])),
    ]
    assert glitch.unstable and not glitch.fault and glitch.settled(2)
    assert glitch.right_again == 3 and "right again in run 3" in glitch.line()
    assert glitch.repeats[-1].verdict == "agrees"


@pytest.mark.gpu
def test_validate_finds_the_planted_fp16_overflow_and_its_fix(llm_bundles, gpu):
    code, report = _validate(
        llm_bundles / "tkv_int8_hf_norm_x3e5.litertlm", "--prompt", "once upon a time there was"
    )
    assert code == 1
    (c,) = report["comparisons"][GPU]
    assert c["verdict"] == "non-finite" and c["nonfinite_from_step"] == 0 and c["fault"]
    assert report["first_divergent_step"]["step"] == 0
    assert report["fp32"]["finite"]  # fp32 activations: the overflow is gone
    assert report["fp32"]["decode_tps_fp32"] > 0
    # the section through --steps: the planted op named at step 0, by the fp16 emulation and by
    # --localize on the GPU in fp16 (the engine's default activations)
    found = report["localized"]
    (op,) = found["fp16_emulation"]["ops"]
    assert found["fp16_emulation"]["step"] == 0
    assert op["op_type"] == "MUL" and "RMSNorm_final_norm" in op["output"]
    gpu_op = found["gpu"]["first_divergent_op"]
    assert found["gpu"]["runner"] == "gpu-fp16" and found["gpu"]["step"] == 0
    assert gpu_op["op_index"] == op["op_index"]
    assert any("RMSNorm_final_norm" in name for name in gpu_op["outputs"])


@pytest.mark.gpu
def test_engine_abort_and_refusals_are_findings_with_the_engines_line(llm_bundles, gpu):
    code, report = _validate(llm_bundles / "tkv_none_hf.litertlm", "--prompt", "the weather")
    assert code == 1
    assert report["runs"][CPU]["status"] == "ok"
    gpu = report["runs"][GPU]
    assert (gpu["status"], gpu["how"]) == ("crashed", "aborted")
    assert "EMBEDDING_LOOKUP: Unsupported external weights type" in gpu["error"]
    code, report = _validate(llm_bundles / "default_int8_hf.litertlm", "--prompt", "the weather")
    assert code == 1
    cpu, gpu = report["runs"][CPU], report["runs"][GPU]
    assert (cpu["status"], cpu["how"]) == ("run_error", "refused")
    assert "Input token ids are too long" in cpu["error"]
    assert (gpu["status"], gpu["how"]) == ("compile_error", "refused")
    assert "GATHER_ND" in gpu["error"]
    # a tokenizer smaller than the logits: a finding whether or not this run's greedy ids hit it
    code, report = _validate(llm_bundles / "tkv_int8_sp_small.litertlm", "--prompt", "the")
    assert code == 1
    assert any("the tokenizer has 210 tokens" in f for f in report["findings"])


@pytest.mark.gpu
def test_rewritten_bundle_keeps_other_sections_and_the_engine_runs_it(llm_bundles, tmp_path, gpu):
    source = llm_bundles / "tkv_int8_hf.litertlm"
    out = tmp_path / "out.litertlm"
    done = run_tflkit("rewrite", str(source), "-o", str(out), "--json", timeout=900)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["written"] and report["engine_proof"]["cpu"]["same"]
    assert report["engine_proof"]["gpu"]["same"]
    before, after = load_bundle(source), load_bundle(out)
    assert report["untouched_sections"] == [0, 1]
    for index in report["untouched_sections"]:
        assert bytes(after.view(index)) == bytes(before.view(index))
        assert after.sections[index].items == before.sections[index].items
    assert all(s.begin % BLOCK == 0 for s in after.sections)
    assert not any(op.type == "STABLEHLO_COMPOSITE" for op in after.model(2).iter_ops())


def _foreign_words(source: Path, target: Path) -> Path:
    """``source`` with its HF tokenizer's words respelled as words no English prompt has
    (``zorab``, ``zorac``, ...): the same ids, the same model, a vocabulary tflkit's prompts
    miss."""
    import string
    import zlib

    bundle = load_bundle(source)
    (section,) = bundle.of_kind("HF_Tokenizer_Zlib")
    spec = json.loads(zlib.decompress(bytes(bundle.view(section))[8:]))
    special = {t["content"] for t in spec["added_tokens"]}
    letters = string.ascii_lowercase
    spec["model"]["vocab"] = {
        (word if word in special else f"zor{letters[i // 26 % 26]}{letters[i % 26]}"): i
        for word, i in spec["model"]["vocab"].items()
    }
    text = json.dumps(spec).encode()
    save_bundle(
        bundle, target, {section.index: len(text).to_bytes(8, "little") + zlib.compress(text)}
    )
    return target


def test_vocabulary_prompts_are_the_tokenizers_own_words(llm_bundles, tmp_path):
    """Prompts of a bundle's own words, for SentencePiece and HF tokenizers alike: alphabetic
    words of the vocabulary, no special token, five to a prompt."""
    from tests.corpus.llm_bundle_build import WORDS
    from tflkit.bundle.prompts import vocabulary_prompts

    for name in ("tkv_int8_sp.litertlm", "tkv_int8_hf.litertlm"):
        prompts = vocabulary_prompts(load_bundle(llm_bundles / name))
        assert len(prompts) == 3, (name, prompts)
        for prompt in prompts:
            assert len(prompt.split()) == 5 and set(prompt.split()) <= set(WORDS), (name, prompt)
    foreign = vocabulary_prompts(
        load_bundle(_foreign_words(llm_bundles / "tkv_int8_hf.litertlm", tmp_path / "f.litertlm"))
    )
    assert all(w.startswith("zor") for p in foreign for w in p.split()), foreign


@pytest.mark.gpu
def test_a_tokenizer_that_misses_tflkits_prompts_gets_prompts_of_its_own_words(
    llm_bundles, gpu, tmp_path
):
    """tflkit's English prompts read back as ``<unk>`` on a bundle whose vocabulary is other
    words: validate says so and judges both backends on prompts of the tokenizer's own words
    (every id a real token), not on unknown tokens."""
    bundle = _foreign_words(llm_bundles / "tkv_int8_hf.litertlm", tmp_path / "foreign.litertlm")
    code, report = _validate(bundle)
    assert code == 0, report["findings"]
    assert all(w.startswith("zor") for p in report["prompts"] for w in p.split()), report["prompts"]
    (note,) = [n for n in report["notes"] if "tokenizer's own words" in n]
    assert "'the weather today is' reads back as" in note
    unk = 3  # tests/corpus/llm_bundle_build.UNK
    for run in (CPU, GPU):
        for record in report["runs"][run]["prompts"]:
            assert record["prompt_ids"] and unk not in record["prompt_ids"], record
    assert not any("not text this bundle's tokenizer knows" in f for f in report["findings"])
