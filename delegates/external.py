"""A classic external TFLite delegate (``--delegate path.so``) through ``load_delegate``.

The delegate runs in a child process with a timeout (a vendor delegate can abort or hang). The
model is run by tensor names, so it works for models without signatures; signature output names
are mapped back by the caller-provided tensor -> name table.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from tflkit.proc.worker import python_command, run_worker

from . import _delegate_worker
from .child_files import read_output_sets, read_state, write_input_sets
from .protocol import Feed, RunnerUnavailable, RunResult

__all__ = ["ExternalDelegateRunner"]


class ExternalDelegateRunner:
    """Runs the model on the CPU Interpreter with an external delegate library."""

    def __init__(
        self,
        model: bytes,
        library: str | os.PathLike[str],
        *,
        options: Mapping[str, str] | None = None,
        input_tensors: Mapping[str, str] | None = None,
        output_names: Mapping[str, str] | None = None,
        timeout: float = 300.0,
        name: str = "delegate",
    ) -> None:
        self.model = model
        self.library = Path(library)
        self.options = dict(options or {})
        self.input_tensors = dict(input_tensors or {})
        self.output_names = dict(output_names or {})
        self.timeout = timeout
        self.name = name

    def activate(self) -> None:
        if not self.library.is_file():
            raise RunnerUnavailable(f"delegate library {self.library} does not exist")

    def deactivate(self) -> None:
        """Nothing held: the child process is gone."""

    def infer(self, feeds: Sequence[Feed]) -> RunResult:
        names = list(feeds[0]) if feeds else []
        tensor_names = [self.input_tensors.get(n, n) for n in names]
        with tempfile.TemporaryDirectory(prefix="tflkit-delegate-") as tmp:
            work = Path(tmp)
            (work / "model.tflite").write_bytes(self.model)
            write_input_sets(work / "in.npz", feeds, names)
            (work / "names.json").write_text(json.dumps(tensor_names))
            cmd = python_command(_delegate_worker.main, "--model", work / "model.tflite")
            cmd += ["--delegate", str(self.library.resolve()), "--inputs", str(work / "in.npz")]
            cmd += ["--names", str(work / "names.json"), "--result", str(work / "r.json")]
            cmd += ["--outputs", str(work / "out.npz")]
            for key, value in self.options.items():
                cmd += ["--option", f"{key}={value}"]
            finished = run_worker(cmd, cwd=work, timeout=self.timeout)
            if finished.timed_out:
                return RunResult(self.name, "timeout", error=f"no answer in {self.timeout:g} s")
            wall = finished.seconds
            state = read_state(work / "r.json") or {}
            executed = {"runtime": "LiteRT Interpreter", "delegate": str(self.library)}
            if state.get("stage") != "done":
                stage = state.get("stage", "start")
                return RunResult(
                    self.name,
                    "crashed",
                    executed=executed,
                    error=f"{finished.how} during {stage}: {finished.last_line}",
                )
            if state.get("error"):
                status = "unavailable" if "load_delegate" in state["error"] else "compile_error"
                return RunResult(self.name, status, executed=executed, error=state["error"])
            labels = [self.output_names.get(n, n) for n in state["output_names"]]
            outputs = read_output_sets(work / "out.npz", state["sets"], labels)
        return RunResult(
            self.name,
            "ok",
            outputs=outputs,
            executed=executed,
            compile_seconds=state.get("compile_seconds"),
            infer_seconds=state.get("infer_seconds", []),
            notes=[f"child process wall time {wall:.2f} s"],
        )
