"""Fuzz ``tflkit`` with mutants of real models; print the numbers, optionally write a report.

    python -m tests.fuzz.run --count 2000 --seed 1 --report docs/fuzz.md

Each mutant (see :mod:`tests.fuzz.mutators`) goes through ``inspect``, ``check``, ``rewrite -o``
and ``validate`` with the CPU runners only (``-r cpu -r cpu-ref``: the GPU runners already run
in a child process with a timeout, and a GPU compile per mutant would take hours on the software
GPU). Each command runs in its own child process with a timeout (:mod:`tests.fuzz.execute`).
Bad outcomes are crashes, hangs, tracebacks, internal errors (exit 3), errors without one clear
``tflkit: error:`` line, and a written ``rewrite`` output that is not a sound model or a stray
temporary file. Mutant ``i`` of seed ``s`` is reproducible alone: ``--seed s --only i --keep
DIR`` writes it to ``DIR``.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import multiprocessing
import os
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.fuzz import execute, mutators

REAL = ("deeplabv3.tflite", "embedding_model.tflite", "keyword_spotting_pacman_v3.float32.tflite")
GENERATED = ("if_cond", "while_loop", "conv_dense", "full_int8", "lstm", "sparse_weights")
COMMANDS = ("inspect", "check", "rewrite", "validate")


@dataclass
class Seed:
    name: str
    data: bytes

    @property
    def sha(self) -> str:
        return hashlib.sha256(self.data).hexdigest()[:12]


@dataclass
class Result:
    index: int
    seed: str
    mutator: str
    what: str
    outcomes: list[execute.Outcome] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)  # output problems found after the commands

    @property
    def bad(self) -> bool:
        return bool(self.extra) or any(o.bad for o in self.outcomes)


def load_seeds(real_only: bool = False) -> list[Seed]:
    """Real float models (fetched into the test cache) and generated ones."""
    from tests.conftest_corpus import cache_root, ensure_generated, tensorflow_version
    from tests.corpus.fetch import fetch_real_float

    real = {p.name: p for p in fetch_real_float(cache_root() / "real")}
    seeds = [Seed(name, real[name].read_bytes()) for name in REAL]
    version = tensorflow_version()
    if not real_only and version is not None:
        folder = ensure_generated(cache_root(), version)
        seeds += [Seed(f"{n}.tflite", (folder / f"{n}.tflite").read_bytes()) for n in GENERATED]
    return seeds


def make_mutant(
    seeds: list[Seed], seed: int, index: int, only: str | None = None
) -> tuple[Seed, bytes, str, str]:
    """Mutant ``index`` of run ``seed``: deterministic, so any one can be rebuilt alone."""
    rng = random.Random(f"{seed}:{index}:{only or ''}")
    base = seeds[index % len(seeds)]
    donor = rng.choice(seeds)
    data, name, what = mutators.mutate(rng, base.data, donor.data, only)
    return base, data, name, what


def _argv(command: str, model: Path, out: Path) -> list[str]:
    if command == "rewrite":
        return ["rewrite", str(model), "-o", str(out)]
    if command == "validate":
        return ["validate", str(model), "-r", "cpu", "-r", "cpu-ref", "-n", "1", "--timeout", "60"]
    return [command, str(model)]


def run_one(
    seeds: list[Seed],
    seed: int,
    index: int,
    work: Path,
    *,
    timeout: float,
    mode: str = "fork",
    only: str | None = None,
) -> Result:
    """Make mutant ``index`` and run every command on it."""
    base, data, name, what = make_mutant(seeds, seed, index, only)
    result = Result(index, base.name, name, what)
    case = Path(tempfile.mkdtemp(prefix=f"m{index}-", dir=work))
    model, out = case / "mutant.tflite", case / "out.tflite"
    model.write_bytes(data)
    for command in COMMANDS:
        result.outcomes.append(
            execute.run_command(_argv(command, model, out), timeout=timeout, mode=mode)
        )
    result.extra = _output_problems(result.outcomes[COMMANDS.index("rewrite")], model, out, data)
    shutil.rmtree(case, ignore_errors=True)
    return result


def _output_problems(rewrite: execute.Outcome, model: Path, out: Path, data: bytes) -> list[str]:
    from tflkit.errors import ModelLoadError
    from tflkit.fsio import is_temporary
    from tflkit.ir.structure import verify_bytes

    problems = []
    if model.read_bytes() != data:
        problems.append("the input model was modified")
    stray = [p.name for p in out.parent.iterdir() if is_temporary(p.name)]
    if stray:
        problems.append(f"stray temporary files {stray}")
    if rewrite.code == 0:
        if not out.is_file():
            if "nothing to do" not in rewrite.message:  # it says so when no rule fired
                problems.append("rewrite exited 0 without writing its output or saying why")
        else:
            try:
                verify_bytes(out.read_bytes(), str(out))
            except ModelLoadError as exc:
                problems.append(f"rewrite wrote an unsound model: {exc}")
    elif rewrite.code == 2 and out.exists():
        problems.append("rewrite rejected the input but wrote an output")
    return problems


def summarize(results: list[Result]) -> dict[str, collections.Counter[str]]:
    table: dict[str, collections.Counter[str]] = {c: collections.Counter() for c in COMMANDS}
    for result in results:
        for outcome in result.outcomes:
            table[outcome.command][outcome.kind] += 1
    return table


KINDS = ("ok", "rejected", *execute.BAD)


def format_numbers(results: list[Result], seconds: float) -> str:
    table = summarize(results)
    lines = [
        f"{len(results)} mutants, {sum(len(r.outcomes) for r in results)} command runs, "
        f"{seconds:.0f} s",
        "| command | " + " | ".join(KINDS) + " |",
        "|---|" + "---:|" * len(KINDS),
    ]
    for command in COMMANDS:
        lines.append(f"| {command} | " + " | ".join(str(table[command][k]) for k in KINDS) + " |")
    bad = [r for r in results if r.bad]
    rejected = sum(table[c]["rejected"] for c in COMMANDS)
    unexplained = sum(table[c]["unexplained"] for c in COMMANDS)
    explained = 100.0 * rejected / (rejected + unexplained) if rejected + unexplained else 100.0
    crashes = sum(table[c]["crash"] for c in COMMANDS)
    hangs = sum(table[c]["hang"] for c in COMMANDS)
    lines += [
        "",
        f"crashes: {crashes}, hangs: {hangs}, internal errors: "
        f"{sum(table[c]['internal'] for c in COMMANDS)}, tracebacks: "
        f"{sum(table[c]['traceback'] for c in COMMANDS)}, output problems: "
        f"{sum(1 for r in results if r.extra)}",
        f"rejections explained in one line: {rejected} of {rejected + unexplained} "
        f"({explained:.1f}%)",
        f"mutants with a bad outcome: {len(bad)}",
    ]
    return "\n".join(lines)


def format_report(
    results: list[Result], seeds: list[Seed], args: argparse.Namespace, seconds: float
) -> str:
    by_mutator: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for result in results:
        kinds = {o.kind for o in result.outcomes}
        by_mutator[result.mutator]["mutants"] += 1
        by_mutator[result.mutator]["rejected by inspect"] += result.outcomes[0].kind == "rejected"
        by_mutator[result.mutator]["bad"] += result.bad
        by_mutator[result.mutator]["loaded"] += "ok" in kinds
    command = (
        f"python -m tests.fuzz.run --count {args.count} --seed {args.seed} --mode {args.mode} "
        f"--timeout {args.timeout:g} --jobs {args.jobs} --report {args.report}"
    )
    parts = [
        "# Fuzzing report",
        "",
        "Mutants of real models through `inspect`, `check`, `rewrite` and `validate` "
        "(`validate` with the CPU runners only: `-r cpu -r cpu-ref -n 1`), each command in its "
        "own child process with a timeout and a 4 GiB address-space limit. Produced by:",
        "",
        f"    {command}",
        "",
        "Seed models (mutant *i* mutates seed *i mod N*; the donor of a splice is random):",
        "",
        *(f"- `{s.name}` ({len(s.data)} bytes, sha256 {s.sha}...)" for s in seeds),
        "",
        "## Numbers",
        "",
        format_numbers(results, seconds),
        "",
        "## By mutator",
        "",
        "| mutator | mutants | rejected by inspect | loaded by some command | bad |",
        "|---|---:|---:|---:|---:|",
        *(
            f"| {name} | {c['mutants']} | {c['rejected by inspect']} | {c['loaded']} | {c['bad']} |"
            for name, c in sorted(by_mutator.items())
        ),
        "",
        "## Bad outcomes",
        "",
    ]
    bad = [r for r in results if r.bad]
    if not bad:
        parts.append("None.")
    for result in bad[:200]:
        parts.append(f"- mutant {result.index} (`{result.seed}`, {result.mutator}: {result.what})")
        for outcome in result.outcomes:
            if outcome.bad:
                parts.append(f"  - `{outcome.command}` {outcome.kind}: {outcome.message[:300]}")
        parts += [f"  - {problem}" for problem in result.extra]
    parts += [
        "",
        "## Sample of one-line rejections",
        "",
        *sorted(
            {
                f"- {o.message[:200]}"
                for r in results[:400]
                for o in r.outcomes
                if o.kind == "rejected" and o.command == "inspect"
            }
        )[:25],
        "",
    ]
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per command")
    parser.add_argument("--mode", choices=("fork", "spawn"), default="fork")
    parser.add_argument("--report", type=Path, help="write a Markdown report here")
    parser.add_argument("--only", type=int, action="append", help="run only mutant N")
    parser.add_argument("--keep", type=Path, help="write bad (or --only) mutants here")
    parser.add_argument("--real-only", action="store_true", help="only the real models")
    parser.add_argument("--jobs", type=int, default=1, help="mutants run in parallel")
    args = parser.parse_args(argv)
    seeds = load_seeds(args.real_only)
    if args.mode == "fork":
        execute.preload()
    indices = args.only or list(range(args.count))
    start = time.perf_counter()
    if args.jobs > 1:
        context = multiprocessing.get_context("fork")
        shares = [(seeds, args, indices[k :: args.jobs]) for k in range(args.jobs)]
        with context.Pool(args.jobs) as pool:
            results = sorted(
                (r for part in pool.starmap(_run_share, shares) for r in part),
                key=lambda r: r.index,
            )
    else:
        results = _run_share(seeds, args, indices)
    seconds = time.perf_counter() - start
    print(format_numbers(results, seconds))
    if args.report is not None:
        from tflkit.fsio import write_atomic

        write_atomic(args.report, format_report(results, seeds, args, seconds))
        print(f"report: {args.report}")
    return 1 if any(r.bad for r in results) else 0


def _run_share(seeds: list[Seed], args: argparse.Namespace, indices: list[int]) -> list[Result]:
    """Run the mutants ``indices`` one after the other (one job's share)."""
    results: list[Result] = []
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tflkit-fuzz-") as tmp:
        for n, index in enumerate(indices, 1):
            result = run_one(
                seeds, args.seed, index, Path(tmp), timeout=args.timeout, mode=args.mode
            )
            results.append(result)
            if result.bad or args.only:
                _keep(args.keep, seeds, args.seed, index)
                bad = [o for o in result.outcomes if o.bad]
                print(
                    f"[{index}] BAD {result.seed} {result.mutator} ({result.what}): "
                    + "; ".join(f"{o.command} {o.kind}: {o.message[:160]}" for o in bad)
                    + "; ".join(result.extra),
                    flush=True,
                )
            if n % 50 == 0:
                elapsed = time.perf_counter() - start
                print(f"{n}/{len(indices)} mutants of this job, {elapsed:.0f} s", flush=True)
    return results


def _keep(folder: Path | None, seeds: list[Seed], seed: int, index: int) -> None:
    if folder is None:
        return
    folder.mkdir(parents=True, exist_ok=True)
    _, data, _, _ = make_mutant(seeds, seed, index)
    (folder / f"mutant-{seed}-{index}.tflite").write_bytes(data)


if __name__ == "__main__":
    os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.gettempdir())
    sys.exit(main())
