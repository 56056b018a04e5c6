"""Behaviour diff: the CLI's JSON reports of two git revisions on the corpus, compared.

A refactor keeps every behaviour when each command prints the same report with the same exit
code on every corpus model. Record each revision, then diff the two records::

    PYTHONPATH=. .venv/bin/python bench/behaviour_diff.py record REV --out DIR \\
        [--only SUBSTR ...] [--validate-only SUBSTR ...]
    PYTHONPATH=. .venv/bin/python bench/behaviour_diff.py diff DIR_A DIR_B \\
        [--out docs/behaviour-diff.md]

``record`` checks REV out with ``git worktree add --detach`` into a temporary folder (removed
afterwards) and runs that checkout's CLI as ``<this python> -m tflkit`` with
``PYTHONPATH=<worktree>:<shim>``. The shim is a ``sitecustomize`` that maps the worktree's
``package-dir`` folders (``delegates/``, ``converters/``) to ``tflkit.delegates`` /
``tflkit.converters`` as the editable install does for this checkout; without it those two
would still be imported from the editable install's folder. The modules' files are printed and
kept in ``DIR/meta.json`` as proof. The corpus (``tests/corpus``, from this checkout, the same
for both records) gets ``inspect --json``, ``check --json`` and ``rewrite --json -o TMP`` on
every model, and ``validate --json -n 2 --timeout 120`` on the ``--validate-only`` models
(default :data:`VALIDATE_SLICE`). Each run is ``DIR/<command>/<model>.json`` (exit code, parsed
stdout) with its stderr beside it (``.stderr.txt``).

``diff`` compares the exit codes and the reports, minus :data:`VOLATILE` (fields that differ
between two records of the same revision) and with the record's own folders replaced by
placeholders, then prints a markdown report and writes it to ``--out``.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TIMEOUT_S = 600.0
VALIDATE_ARGS = ("-n", "2", "--timeout", "120")
COMMANDS = ("inspect", "check", "rewrite", "validate")
META = "meta.json"
TRUNCATE = 120

#: The default ``validate`` slice (model name substrings, one model each): small and varied.
VALIDATE_SLICE = (
    "generated/conv_dense",  # float CNN, fully on the GPU
    "generated/full_int8",  # full-integer int8
    "generated/custom_op",  # CUSTOM op: nothing on the GPU
    "generated/dynamic_batch",  # dynamic batch dimension
    "generated/if_cond",  # IF control flow, two branch subgraphs
    "generated/keras_attention_fp16",  # attention with fp16 weights (DEQUANTIZE)
    "mltk/anomaly_detection",  # a detector: int8, dynamic input, the GPU refuses it
    "birdnet/BirdNET_GLOBAL_6K_V2.4_MData_Model_V2_FP16",  # fp16 storage loses accuracy
)

#: Report fields dropped before comparing: (command or ``*``, path pattern, why it varies).
#: A pattern's segments are dict keys or list indices (fnmatch: ``*`` is any one segment, or
#: part of one), ``**`` any number of segments. Found by diffing two records of the same
#: revision; counts next to the times (``inference_seconds.count``, ``speed.runs``) are kept.
#: Not dropped but rewritten: the record's temporary folders (the ``rewrite -o`` output path
#: in ``rewrite``'s ``output``) become ``<SCRATCH>`` / ``<WORKTREE>`` / ``<TMP>``, see
#: :func:`placeholders`. The reports hold no commit id, tflkit version or output hash.
VOLATILE: tuple[tuple[str, str, str], ...] = (
    ("validate", "wall_seconds", "wall time of the whole validate"),
    ("validate", "runners.*.wall_seconds", "wall time of one runner"),
    ("validate", "runners.*.compile_seconds", "wall time of the runner's compile"),
    ("validate", "runners.*.inference_seconds.total", "wall time of the inferences"),
    ("validate", "runners.*.inference_seconds.mean", "wall time of the inferences"),
    ("validate", "runners.*.inference_seconds.min", "wall time of the inferences"),
    ("validate", "runners.*.inference_seconds.max", "wall time of the inferences"),
    ("validate", "runners.*.speed.*_s", "wall times: compile, first, p50, p90 inference"),
    ("validate", "speed.rows.*.*_s", "the same wall times in the speed table"),
    ("validate", "speed.rows.*.gpu_speedup", "a ratio of two of those wall times"),
)


# --------------------------------------------------------------------------------------------
# record
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Model:
    """A corpus model: its name (``generated/conv_dense``) and file."""

    name: str
    path: Path


def corpus(only: list[str]) -> list[Model]:
    """The generated corpus then the world corpus, as ``bench/sweep.py`` finds them."""
    from tests.conftest_corpus import cache_root, ensure_generated, tensorflow_version
    from tests.corpus import generate
    from tests.corpus.fetch import fetch_world

    version = tensorflow_version()
    if version is None:
        raise SystemExit("behaviour_diff: TensorFlow is needed to generate the corpus")
    generated = ensure_generated(cache_root(), version)
    models = [Model(f"generated/{n}", generated / f"{n}.tflite") for n in generate.GENERATORS]
    models += [Model(n, p) for n, p in fetch_world(cache_root() / "real").items()]
    return [m for m in models if matches(m.name, only)]


def matches(name: str, substrings: list[str] | tuple[str, ...]) -> bool:
    """True when no substring is given or one of them is in ``name``."""
    return not substrings or any(s in name for s in substrings)


def git(*args: str, cwd: Path = REPO) -> str:
    """``git ARGS`` in ``cwd``: its stdout, stripped (raises on failure)."""
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


SHIM = '''"""behaviour_diff: the package-dir folders of the checkout, as an editable install."""
import importlib.abc, importlib.util, os, sys

MAPPING = {mapping!r}


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname in MAPPING:
            init = os.path.join(MAPPING[fullname], "__init__.py")
            return importlib.util.spec_from_file_location(fullname, init)
        return None


sys.meta_path.insert(0, _Finder())
'''


def package_dirs(worktree: Path) -> dict[str, str]:
    """The checkout's ``[tool.setuptools.package-dir]``: package name -> folder."""
    config = tomllib.loads((worktree / "pyproject.toml").read_text())
    mapped = config.get("tool", {}).get("setuptools", {}).get("package-dir", {})
    return {name: str(worktree / folder) for name, folder in mapped.items() if name}


def write_shim(worktree: Path, shim: Path) -> None:
    """A ``sitecustomize`` in ``shim`` importing the mapped packages from ``worktree``."""
    shim.mkdir(parents=True, exist_ok=True)
    (shim / "sitecustomize.py").write_text(SHIM.format(mapping=package_dirs(worktree)))


def cli_env(worktree: Path, shim: Path) -> dict[str, str]:
    """The environment the checkout's CLI runs in (its children inherit ``PYTHONPATH``)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(worktree), str(shim)])
    env.setdefault("XDG_RUNTIME_DIR", tempfile.gettempdir())
    return env


PROOF = (
    "import json, tflkit, tflkit.delegates, tflkit.converters, tflkit.proc.child_env as c; "
    "print(json.dumps({'tflkit': tflkit.__file__, 'tflkit.delegates': tflkit.delegates.__file__,"
    " 'tflkit.converters': tflkit.converters.__file__, 'child_root': str(c.project_root())}))"
)


def prove_checkout(worktree: Path, env: dict[str, str], cwd: Path) -> dict[str, str]:
    """Where ``tflkit`` and its mapped packages are imported from; exits unless the worktree."""
    done = subprocess.run(
        [sys.executable, "-c", PROOF], env=env, cwd=cwd, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"behaviour_diff: the checkout does not import:\n{done.stderr}")
    files = json.loads(done.stdout)
    outside = {k: v for k, v in files.items() if not Path(v).resolve().is_relative_to(worktree)}
    if outside:
        raise SystemExit(f"behaviour_diff: imported from outside {worktree}: {outside}")
    return files


def run_cli(args: list[str], env: dict[str, str], cwd: Path, timeout: float) -> dict[str, Any]:
    """One ``python -m tflkit ARGS`` run: exit code, hang, seconds, stdout JSON, stderr."""
    from bench.sweep import run_process

    done = run_process([sys.executable, "-m", "tflkit", *args], timeout, env=env, cwd=cwd)
    try:
        report, unparsed = (json.loads(done.stdout), None) if done.stdout.strip() else (None, None)
    except ValueError:
        report, unparsed = None, done.stdout
    return {
        "code": done.code,
        "hung": done.hung,
        "seconds": done.seconds,
        "json": report,
        "stdout_not_json": unparsed,
        "stderr": done.stderr,
    }


def command_args(command: str, model: Model, scratch: Path) -> list[str]:
    """The CLI arguments of ``command`` on ``model`` (rewrite writes under ``scratch``)."""
    path = str(model.path)
    if command == "rewrite":
        out = scratch / "rewritten" / (model.name.replace("/", "__") + ".tflite")
        return ["rewrite", "--json", "-o", str(out), path]
    if command == "validate":
        return ["validate", "--json", *VALIDATE_ARGS, path]
    return [command, "--json", path]


def save_run(out: Path, command: str, model: Model, args: list[str], run: dict[str, Any]) -> None:
    """``out/<command>/<model>.json`` and its ``.stderr.txt`` beside it."""
    target = out / command / f"{model.name}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    stderr = run.pop("stderr")
    entry = {"model": model.name, "command": command, "args": args, **run}
    target.write_text(json.dumps(entry, indent=1, sort_keys=True) + "\n")
    target.with_name(target.name.removesuffix(".json") + ".stderr.txt").write_text(stderr)


def record_models(
    models: list[Model], validate: list[str], env: dict[str, str], scratch: Path, out: Path
) -> dict[str, float]:
    """Every command on every model (validate on the slice); seconds spent per command."""
    spent = dict.fromkeys(COMMANDS, 0.0)
    for i, model in enumerate(models):
        commands = [c for c in COMMANDS if c != "validate" or matches(model.name, validate)]
        print(f"[{i + 1}/{len(models)}] {model.name}: {' '.join(commands)}", file=sys.stderr)
        for command in commands:
            args = command_args(command, model, scratch)
            run = run_cli(args, env, scratch, TIMEOUT_S)
            spent[command] += run["seconds"]
            save_run(out, command, model, args, run)
    return {c: round(s, 1) for c, s in spent.items()}


def write_meta(out: Path, meta: dict[str, Any]) -> None:
    """``out/meta.json``: what was recorded, where, and how long it took."""
    out.mkdir(parents=True, exist_ok=True)
    (out / META).write_text(json.dumps(meta, indent=1) + "\n")


def record(rev: str, out: Path, only: list[str], validate: list[str]) -> None:
    """Record revision ``rev``'s reports on the corpus into ``out``."""
    if out.exists() and any(out.iterdir()):
        raise SystemExit(f"behaviour_diff: {out} is not empty")
    commit = git("rev-parse", "--verify", f"{rev}^{{commit}}")
    models = corpus(only)
    start = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="tflkit-bdiff-"))
    worktree, shim, scratch = tmp / "worktree", tmp / "shim", tmp / "scratch"
    meta: dict[str, Any] = {
        "revision": rev,
        "commit": commit,
        "tmp": str(tmp),
        "worktree": str(worktree),
        "scratch": str(scratch),
        "python": sys.executable,
        "models": [m.name for m in models],
        "validated": [m.name for m in models if matches(m.name, validate)],
    }
    git("worktree", "add", "--detach", str(worktree), commit)
    try:
        write_shim(worktree, shim)
        scratch.mkdir()  # the CLI's cwd: `-m` puts it first on sys.path, so never this checkout
        env = cli_env(worktree, shim)
        meta["imported_from"] = prove_checkout(worktree, env, scratch)
        print(json.dumps(meta["imported_from"], indent=1), file=sys.stderr)
        write_meta(out, meta)
        meta["seconds_by_command"] = record_models(models, validate, env, scratch, out)
    finally:
        git("worktree", "remove", "--force", str(worktree))
        shutil.rmtree(tmp, ignore_errors=True)
    meta["seconds"] = round(time.perf_counter() - start, 1)
    write_meta(out, meta)
    print(f"recorded {commit[:10]} in {meta['seconds']:.0f} s into {out}", file=sys.stderr)


# --------------------------------------------------------------------------------------------
# diff
# --------------------------------------------------------------------------------------------
JsonPath = tuple[str | int, ...]


def load_record(directory: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """A record's meta and its runs by ``<command>/<model>``."""
    meta = json.loads((directory / META).read_text())
    runs = {
        str(p.relative_to(directory).with_suffix("")): json.loads(p.read_text())
        for p in sorted(directory.rglob("*.json"))
        if p.name != META
    }
    return meta, runs


def path_matches(path: JsonPath, pattern: str) -> bool:
    """Whether the JSON ``path`` matches ``pattern`` (segments, ``*`` one, ``**`` any)."""
    return _match([str(s) for s in path], pattern.split("."))


def _match(segments: list[str], parts: list[str]) -> bool:
    if not parts:
        return not segments
    if parts[0] == "**":
        return any(_match(segments[i:], parts[1:]) for i in range(len(segments) + 1))
    head = bool(segments) and fnmatch.fnmatchcase(segments[0], parts[0])
    return head and _match(segments[1:], parts[1:])


def volatile(command: str, path: JsonPath) -> bool:
    """Whether the field at ``path`` of a ``command`` run is in :data:`VOLATILE`."""
    return any(c in ("*", command) and path_matches(path, p) for c, p, _ in VOLATILE)


def normalize(value: Any, command: str, places: dict[str, str], path: JsonPath = ()) -> Any:
    """``value`` without its volatile fields, the record's folders replaced by placeholders."""
    if isinstance(value, dict):
        return {
            k: normalize(v, command, places, (*path, k))
            for k, v in value.items()
            if not volatile(command, (*path, k))
        }
    if isinstance(value, list):
        return [normalize(v, command, places, (*path, i)) for i, v in enumerate(value)]
    if isinstance(value, str):
        for folder, placeholder in places.items():
            value = value.replace(folder, placeholder)
    return value


def placeholders(meta: dict[str, Any]) -> dict[str, str]:
    """The record's own folders (longest first) and the placeholder each becomes."""
    places = {meta["scratch"]: "<SCRATCH>", meta["worktree"]: "<WORKTREE>", meta["tmp"]: "<TMP>"}
    return dict(sorted(places.items(), key=lambda item: -len(item[0])))


def differences(a: Any, b: Any, path: JsonPath = ()) -> Iterator[tuple[JsonPath, Any, Any]]:
    """``(path, a's value, b's value)`` for each leaf where ``a`` and ``b`` differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in [*a, *(k for k in b if k not in a)]:
            yield from differences(a.get(key, MISSING), b.get(key, MISSING), (*path, key))
    elif isinstance(a, list) and isinstance(b, list):
        for i in range(max(len(a), len(b))):
            x, y = (a[i] if i < len(a) else MISSING), (b[i] if i < len(b) else MISSING)
            yield from differences(x, y, (*path, i))
    elif a != b or type(a) is not type(b):
        yield (path, a, b)


class _Missing:
    def __repr__(self) -> str:
        return "(absent)"


MISSING = _Missing()


def json_path(path: JsonPath) -> str:
    """``runners[2].speed`` from ``("runners", 2, "speed")``."""
    text = ""
    for segment in path:
        text += f"[{segment}]" if isinstance(segment, int) else f".{segment}"
    return text.lstrip(".") or "(root)"


def shown(value: Any) -> str:
    """``value`` as compact JSON, truncated to :data:`TRUNCATE` characters."""
    text = repr(value) if value is MISSING else json.dumps(value, sort_keys=True)
    text = text.replace("|", "\\|").replace("`", "'")
    return text if len(text) <= TRUNCATE else text[: TRUNCATE - 1] + "…"


def comparable(run: dict[str, Any], places: dict[str, str]) -> dict[str, Any]:
    """The parts of a run that must not change: exit code, hang, stdout (the bench's own
    ``seconds`` and the run's stderr are not compared)."""
    kept = {k: run.get(k) for k in ("code", "hung", "stdout_not_json")}
    return {**kept, "json": normalize(run.get("json"), run["command"], places)}


def run_differences(
    a: dict[str, Any] | None,
    b: dict[str, Any] | None,
    places_a: dict[str, str],
    places_b: dict[str, str],
) -> list[tuple[JsonPath, Any, Any]]:
    """The differences of two runs of one command on one model (one line if a run is absent)."""
    if a is None or b is None:
        exit_code = "exit {}".format((a or b or {}).get("code"))
        return [
            (("run",), MISSING if a is None else exit_code, MISSING if b is None else exit_code)
        ]
    return list(differences(comparable(a, places_a), comparable(b, places_b)))


def compare(dir_a: Path, dir_b: Path) -> tuple[dict[str, list[int]], dict[str, list[str]]]:
    """Per command: [identical, different] run counts and the difference lines."""
    meta_a, runs_a = load_record(dir_a)
    meta_b, runs_b = load_record(dir_b)
    places_a, places_b = placeholders(meta_a), placeholders(meta_b)
    counts: dict[str, list[int]] = {}
    lines: dict[str, list[str]] = {}
    for key in sorted(set(runs_a) | set(runs_b)):
        command, model = key.split("/", 1)
        found = run_differences(runs_a.get(key), runs_b.get(key), places_a, places_b)
        tally = counts.setdefault(command, [0, 0])
        tally[bool(found)] += 1
        lines.setdefault(command, []).extend(
            f"| `{model}` | `{json_path(p)}` | `{shown(x)}` | `{shown(y)}` |" for p, x, y in found
        )
    return counts, lines


def render(dir_a: Path, dir_b: Path) -> str:
    """The markdown report of ``dir_a`` against ``dir_b``."""
    counts, lines = compare(dir_a, dir_b)
    meta_a, meta_b = (json.loads((d / META).read_text()) for d in (dir_a, dir_b))
    order = [c for c in COMMANDS if c in counts] + sorted(set(counts) - set(COMMANDS))
    out = [
        "# Behaviour diff",
        "",
        f"A: `{dir_a}` (`{meta_a['revision']}` = `{meta_a['commit'][:10]}`); "
        f"B: `{dir_b}` (`{meta_b['revision']}` = `{meta_b['commit'][:10]}`). Produced by "
        "`PYTHONPATH=. python bench/behaviour_diff.py diff A B`: exit codes and `--json` "
        f"reports, without the {len(VOLATILE)} volatile fields of `VOLATILE`.",
        "",
        "| command | identical | different |",
        "|---|---|---|",
        *(f"| {c} | {counts[c][0]} | {counts[c][1]} |" for c in order),
        "",
    ]
    for command in order:
        if lines[command]:
            out += [f"## {command}", "", "| model | path | A | B |", "|---|---|---|---|"]
            out += [*lines[command], ""]
    total = sum(n for _, n in counts.values())
    out.append(f"{total} run(s) differ." if total else "No differences.")
    return "\n".join(out) + "\n"


def diff(dir_a: Path, dir_b: Path, out: Path | None) -> None:
    """Print the report of ``dir_a`` against ``dir_b`` and write it to ``out``."""
    text = render(dir_a, dir_b)
    print(text, end="")
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        print(f"wrote {out}", file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    """The ``record`` and ``diff`` subcommands."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="action", required=True)
    rec = sub.add_parser("record", help="record a revision's reports on the corpus")
    rec.add_argument("rev", help="git revision")
    rec.add_argument("--out", type=Path, required=True, help="record folder (new or empty)")
    rec.add_argument("--only", action="append", default=[], help="model name substring")
    rec.add_argument(
        "--validate-only", action="append", default=None, help="validate these (substring)"
    )
    dif = sub.add_parser("diff", help="compare two records")
    dif.add_argument("dir_a", type=Path)
    dif.add_argument("dir_b", type=Path)
    dif.add_argument("--out", type=Path, default=REPO / "docs" / "behaviour-diff.md")
    args = parser.parse_args(argv)
    if args.action == "record":
        record(args.rev, args.out, args.only, args.validate_only or list(VALIDATE_SLICE))
    else:
        diff(args.dir_a, args.dir_b, args.out)


if __name__ == "__main__":
    main()
