#!/usr/bin/env bash
# Prints the path of a working Python 3.6 (for the kernel-side syntax check), or explains how to get one.
for py in "${PYTHON36:-}" python3.6 "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.6*/bin/python3.6; do
  [ -n "$py" ] || continue
  if "$py" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 6))' >/dev/null 2>&1; then
    command -v "$py"
    exit 0
  fi
done
echo "error: the kernel-side syntax check needs Python 3.6 (python3.6 on PATH, in pyenv, or PYTHON36=/path)." >&2
echo "       install one with 'pyenv install 3.6'." >&2
exit 2
