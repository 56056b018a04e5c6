#!/usr/bin/env bash
# Set up everything a fresh machine needs (idempotent), then run a job.
#   ./dev.sh demo   run tflkit on the bundled example model
#   ./dev.sh test   run the whole test suite (and ruff)
#   ./dev.sh setup [--browser]  only set up (--browser: also what the tests need)
set -euo pipefail
cd "$(dirname "$0")"

setup() {
  ./install-system-packages.sh "$@"
  if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
  fi
  local stamp=.venv/.tflkit-installed want
  want=$(cat pyproject.toml | sha256sum | cut -c1-16)
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "setup: installing Python packages into .venv (log: .venv/install.log)"
    if ! { .venv/bin/python -m pip install --upgrade pip &&
           .venv/bin/python -m pip install -e '.[test]'; } > .venv/install.log 2>&1; then
      tail -n 30 .venv/install.log >&2
      echo "setup: pip install failed (full log: .venv/install.log)" >&2
      exit 1
    fi
    echo "$want" > "$stamp"
  fi
  export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
}

# The ONNX (onnx2tf) and PyTorch (litert-torch) converters live in venvs tflkit builds on first
# use; for the tests they go in the test cache (CI caches it), where tests/test_convert_foreign.py
# finds them; LiteRT.js for the browser harness too.
foreign_envs() {
  local cache=${TFLKIT_TEST_CACHE:-$HOME/.cache/tflkit-tests}
  TFLKIT_CONVERTERS_DIR=$cache/converters .venv/bin/tflkit converters install onnx torch
  TFLKIT_BROWSER_DIR=$cache/browser .venv/bin/tflkit harness install browser
}

job=${1:-demo}
shift || true
case "$job" in
  setup) setup "$@" ;;
  demo)
    setup
    example=tflkit/examples/tiny_classifier.tflite
    out=${TMPDIR:-/tmp}/tflkit-demo
    fixed=$out/tiny_classifier.gpu.tflite
    mkdir -p "$out"
    step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }
    # The conversion first: the ONNX twin of the example (its converter env is built on first use)
    step .venv/bin/tflkit convert --gpu-ready tflkit/examples/tiny_classifier.onnx \
      -o "$out/tiny_classifier_onnx.tflite"
    step .venv/bin/tflkit inspect "$example"
    step .venv/bin/tflkit check --probe "$example"
    step .venv/bin/tflkit rewrite "$example" -o "$fixed" --probe
    step .venv/bin/tflkit check --probe "$fixed"
    step .venv/bin/tflkit validate "$fixed" --html "$out/validate.html"
    echo; echo "rewritten model: $fixed"; echo "HTML report: $out/validate.html"
    ;;
  test)
    setup --browser
    foreign_envs
    .venv/bin/ruff check .
    .venv/bin/ruff format --check .
    .venv/bin/python -m pytest -q -n 2 "$@"  # two workers: GPU shader compiles are CPU-bound
    ;;
  *) echo "usage: ./dev.sh [demo|test|setup] [pytest args]" >&2; exit 2 ;;
esac
