"""``validate B.litertlm --repro DIR``: an engine finding as a script anyone with LiteRT-LM can
run, to see it again or to file it upstream.

``DIR/repro.py`` needs only ``litert-lm-api`` (no tflkit): for a score fault it runs the prompt
greedily on the engine's CPU, scores that continuation on its GPU (fp16 activations, the
engine's default, or fp32 where tflkit found fp32 faulty too) and prints both runtimes' scores
token by token; for a GPU engine that refuses or aborts, it starts the GPU engine on the prompt.
It prints ``REPRODUCED`` and exits 1 when the finding shows (an abort kills it with the engine's
own line). ``DIR/README.md`` says what tflkit found, with which command, versions and GPU.
The bundle is not copied (they run to gigabytes): the script takes its path, the original's by
default. tflkit runs the script once before it reports the directory.
"""

from __future__ import annotations

import importlib.metadata
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tflkit.compare.tokens import SCORE_TOL
from tflkit.fsio import write_atomic

__all__ = ["EngineFinding", "EngineRepro", "write_engine_repro"]

_SCRIPT = '''\
"""{title}

Found by: {command}
Needs: pip install litert-lm-api=={version}
Run:   python repro.py [BUNDLE]   (default: the bundle tflkit validated)
Exit 1 and REPRODUCED when it shows; an engine abort kills the process with its own line.
"""

import math
import os
import sys

import litert_lm
from litert_lm import interfaces

BUNDLE = sys.argv[1] if len(sys.argv) > 1 else {bundle!r}
PROMPT = {prompt!r}
MAX_TOKENS = {tokens}
KIND = {kind!r}  # "scores": the GPU scores the CPU's continuation wrong; "engine": it fails
ACTIVATION = {activation!r}  # the GPU's activations: None (the engine's default, fp16) or "fp32"
TOLERANCE = {tolerance}  # |GPU - CPU| of a token's log-probability (healthy bundles: <= 0.0123)
# On a software GPU (lavapipe) the engine's GPU numbers vary from run to run unless its process
# runs on one CPU (a race between the engine's and the driver's threads, measured by tflkit):
ONE_CPU = {one_cpu}


def engine(backend):
    kwargs = {{}}
    if backend == "gpu" and ACTIVATION == "fp32":
        kwargs["activation_data_type"] = interfaces.ActivationDataType.FLOAT32
    chosen = interfaces.Backend.GPU() if backend == "gpu" else interfaces.Backend.CPU()
    return litert_lm.Engine(BUNDLE, backend=chosen, **kwargs)


def session(eng):
    return eng.create_session(
        apply_prompt_template=False,
        sampler_config=interfaces.SamplerConfig(top_k=1),
        max_output_tokens=MAX_TOKENS,
    )


def greedy(eng):
    s = session(eng)
    s.run_prefill([PROMPT])
    text = s.run_decode().texts[0]
    s.close()
    return text


def scores(eng, text):
    s = session(eng)
    s.run_prefill([PROMPT])
    out = s.run_text_scoring([text], store_token_lengths=True)
    s.close()
    return [float(v) for v in (out.token_scores or [[]])[0]]


if ONE_CPU and hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, [min(os.sched_getaffinity(0))])
if KIND == "engine":
    try:
        eng = engine("gpu")
        print("GPU:", repr(greedy(eng)))
        eng.close()
    except Exception as exc:  # the engine's refusal, with its own message
        print(f"REPRODUCED: the GPU engine failed: {{exc}}")
        raise SystemExit(1) from None
    print("not reproduced: the GPU engine ran the prompt")
    raise SystemExit(0)

cpu = engine("cpu")
text = greedy(cpu)
want = scores(cpu, text)
cpu.close()
gpu = engine("gpu")
got = scores(gpu, text)
gpu.close()
print(f"prompt {{PROMPT!r}}; the CPU's greedy continuation {{text!r}}")
print("step  cpu score  gpu score  difference")
bad = None
for step, (c, g) in enumerate(zip(want, got)):
    d = g - c if math.isfinite(c) and math.isfinite(g) else float("nan")
    print(f"{{step:4d}}  {{c:9.4f}}  {{g:9.4f}}  {{d:10.4f}}")
    if bad is None and (not math.isfinite(g) or abs(d) > TOLERANCE) and math.isfinite(c):
        bad = step
if bad is None:
    print(f"not reproduced: every GPU score within {{TOLERANCE}} of the CPU's")
    raise SystemExit(0)
print(f"REPRODUCED: the GPU's score of the CPU's token at step {{bad}} is off by more than "
      f"{{TOLERANCE}} (or not finite)")
raise SystemExit(1)
'''


@dataclass
class EngineRepro:
    """What ``--repro`` did for a bundle: ``written`` (the script showed the finding when tflkit
    ran it, and the directory holds ``repro.py`` and ``README.md``), one line, and what the
    script printed."""

    written: bool
    line: str
    directory: Path | None = None
    output: str = ""

    def to_json(self) -> dict[str, object]:
        return {
            "written": self.written,
            "directory": None if self.directory is None else str(self.directory),
            "line": self.line,
            "output": self.output,
        }


@dataclass(frozen=True)
class EngineFinding:
    """What a repro script shows: ``kind`` "scores" (the GPU scores the CPU's continuation of
    ``prompt`` wrong) or "engine" (the GPU engine refuses or aborts), the GPU's activations
    (None: the engine's default, fp16; or "fp32") and tflkit's finding line."""

    kind: str
    prompt: str
    activation: str | None
    line: str


def write_engine_repro(
    found: EngineFinding | None,
    bundle: Path,
    directory: Path,
    *,
    command: str,
    max_output_tokens: int = 16,
    one_cpu: bool = False,
    timeout: float = 900.0,
) -> EngineRepro:
    """Write ``repro.py`` and ``README.md`` for the engine finding ``found`` to ``directory``
    once the script, run here, shows it (else nothing, and why)."""
    if found is None:
        return EngineRepro(False, "repro: nothing written: the engine's GPU had no finding")
    kind, prompt, activation, finding = found.kind, found.prompt, found.activation, found.line
    version = importlib.metadata.version("litert-lm-api")
    script = _SCRIPT.format(
        title=f"LiteRT-LM {version}: {finding}".replace('"""', "'''"),
        command=command,
        version=version,
        bundle=str(bundle.resolve()),
        prompt=prompt,
        tokens=max_output_tokens,
        kind=kind,
        activation=activation,
        tolerance=SCORE_TOL,
        one_cpu=one_cpu,
    )
    from tflkit.proc.worker import run_worker

    with tempfile.TemporaryDirectory(prefix="tflkit-engine-repro-") as tmp:
        (Path(tmp) / "repro.py").write_text(script)
        done = run_worker([sys.executable, "repro.py"], cwd=tmp, timeout=timeout)
    if done.timed_out:
        return EngineRepro(False, f"repro: nothing written: the script ran over {timeout:g} s")
    aborted = done.returncode is not None and done.returncode < 0
    output = (_own_lines(done.output) + (_fatal_lines(done.output) if aborted else "")).strip()
    if "REPRODUCED" not in done.output and not aborted:
        return EngineRepro(
            False,
            f"repro: nothing written: the script did not show it in one run ({done.how})",
            output=output,
        )
    write_atomic(directory / "repro.py", script)
    write_atomic(directory / "README.md", _readme(finding, command, version, kind, output))
    return EngineRepro(
        True,
        f"repro: {directory}/repro.py shows it ({done.how}; needs only litert-lm-api {version})",
        directory,
        output,
    )


#: How the engine's native log lines start (an abort's ``F...`` line and stack trace too).
_NATIVE = ("INFO:", "WARNING:", "ERROR:", "I0000", "W0000", "E0000", "F0000", "Warning:", "***",
           "    @")  # fmt: skip


#: An abort's line: glog's ``F`` + month and day (``F0000`` before the log is set up), a space.
_FATAL = re.compile(r"F\d{4} ")


def _own_lines(stdout: str) -> str:
    """What the script printed, without the engine's native log lines."""
    return "\n".join(line for line in stdout.splitlines() if not line.startswith(_NATIVE))


def _fatal_lines(output: str, n: int = 3) -> str:
    """An abort's ``F...`` line and the lines after it."""
    lines = output.splitlines()
    start = next((i for i, line in enumerate(lines) if _FATAL.match(line)), None)
    return "" if start is None else "\n" + "\n".join(lines[start : start + n])


def _readme(finding: str, command: str, version: str, kind: str, output: str) -> str:
    from tflkit.gpu.availability import gpu_available

    what = (
        "runs the prompt greedily on the engine's CPU, scores that continuation on its GPU and "
        "prints both runtimes' scores token by token"
        if kind == "scores"
        else "starts the engine on the GPU and runs the prompt"
    )
    return (
        f"# LiteRT-LM on the GPU: {finding}\n\n"
        f"Found by `{command}`.\n\n"
        f"- LiteRT-LM: litert-lm-api {version}\n"
        f"- GPU: {gpu_available()[1]}\n\n"
        f"`python repro.py [BUNDLE]` (needs only `pip install litert-lm-api=={version}`) {what}. "
        "It prints REPRODUCED and exits 1 when the finding shows; an engine abort kills it with "
        "the engine's own line.\n\nWhat it printed here:\n\n```\n" + output + "\n```\n"
    )
