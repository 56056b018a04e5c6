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
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install -q -e '.[test]'
    echo "$want" > "$stamp"
  fi
  export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
}

job=${1:-demo}
shift || true
case "$job" in
  setup) setup ;;
  demo)
    setup
    example=tflkit/examples/tiny_classifier.tflite
    .venv/bin/tflkit inspect "$example"
    ;;
  test)
    setup --browser
    .venv/bin/ruff check .
    .venv/bin/python -m pytest -q "$@"
    ;;
  *) echo "usage: ./dev.sh [demo|test|setup] [pytest args]" >&2; exit 2 ;;
esac
