#!/usr/bin/env bash
# Prints the path of a working Python 3.11 for the kit's host side, or explains how to get one.
# A candidate counts only if it runs: a pyenv shim for an inactive version does not.
for py in "${HOST_PYTHON:-}" python3.11 "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.11*/bin/python3.11 /usr/bin/python3.11 \
          "$HOME"/miniconda3/bin/python3.11 "$HOME"/miniforge3/bin/python3.11; do
  [ -n "$py" ] || continue
  if "$py" -c 'import sys, venv; sys.exit(sys.version_info[:2] != (3, 11))' >/dev/null 2>&1; then
    command -v "$py"
    exit 0
  fi
done
echo "error: the kit's host side needs Python 3.11 with venv (python3.11 on PATH, in pyenv, or HOST_PYTHON=/path)." >&2
echo "       install one with 'pyenv install 3.11' or 'apt-get install python3.11 python3.11-venv'." >&2
exit 2
