#!/usr/bin/env bash
# Install braind with its test extras into .venv and run the whole test suite (extra args go to pytest).
set -euo pipefail
cd "$(dirname "$0")"
python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]'
.venv/bin/ruff check braind tests bench
.venv/bin/mypy
exec .venv/bin/python -m pytest "$@"
