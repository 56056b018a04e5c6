#!/usr/bin/env bash
# Set up everything a fresh machine needs (idempotent), then run a job.
#   ./dev.sh demo   run tflkit on the bundled example model
#   ./dev.sh test   run the whole test suite (and ruff)
#   ./dev.sh setup  only set up
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

# The converters for ONNX (onnx2tf) and PyTorch (litert-torch) pin versions that clash with
# ours: each gets its own venv in the test cache, where tests/test_convert_foreign.py finds it.
foreign_envs() {
  local root=${TFLKIT_TEST_CACHE:-$HOME/.cache/tflkit-tests}/envs
  make_env "$root/onnx2tf" onnx2tf==1.29.24
  make_env "$root/torch" torch==2.13.0 litert-torch==0.10.0
  if [ ! -f "$root/torch/.tflkit-editable" ]; then
    "$root/torch/bin/python" -m pip install -q --no-deps --no-build-isolation -e . \
      >> "$root/torch.log" 2>&1 && touch "$root/torch/.tflkit-editable"
  fi
}

make_env() {
  local dir=$1 want
  shift
  want="$*"
  if [ "$(cat "$dir/.tflkit-ready" 2>/dev/null)" = "$want" ]; then
    return 0
  fi
  echo "setup: creating $dir ($want; log: $dir.log)"
  rm -rf "$dir"
  mkdir -p "$(dirname "$dir")"
  if ! { python3 -m venv "$dir" && "$dir/bin/python" -m pip install "$@"; } > "$dir.log" 2>&1; then
    tail -n 30 "$dir.log" >&2
    echo "setup: could not create $dir (log: $dir.log)" >&2
    exit 1
  fi
  echo "$want" > "$dir/.tflkit-ready"
}

job=${1:-demo}
shift || true
case "$job" in
  setup) setup ;;
  demo)
    setup
    example=tflkit/examples/tiny_classifier.tflite
    out=${TMPDIR:-/tmp}/tflkit-demo
    fixed=$out/tiny_classifier.gpu.tflite
    mkdir -p "$out"
    step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }
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
    .venv/bin/python -m pytest -q "$@"
    ;;
  *) echo "usage: ./dev.sh [demo|test|setup] [pytest args]" >&2; exit 2 ;;
esac
