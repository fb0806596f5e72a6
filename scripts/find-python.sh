#!/usr/bin/env bash
# Usage: scripts/find-python.sh 3.11|3.6|3.X
# Prints the path of a working Python of that version (with venv), or explains how to get one.
#   3.11: the kit's host side (override: HOST_PYTHON=/path)
#   3.6:  the kernel-side syntax check (override: PYTHON36=/path)
#   3.X:  another (make demo asks for 3.12, the Python of its runtime 1.9.1+py3.12+numpy1.26.4)
# A candidate counts only if it runs: a pyenv shim for an inactive version does not.
want="${1:?usage: $0 3.11|3.6}"
case "$want" in
  3.11) override="${HOST_PYTHON:-}"; purpose="the kit's host side"; var=HOST_PYTHON ;;
  3.6) override="${PYTHON36:-}"; purpose="the kernel-side syntax check"; var=PYTHON36 ;;
  3.[0-9]*) override=""; purpose="a runtime on Python $want"; var=PATH ;;
  *) echo "error: $0 takes a Python version such as 3.11, not $want" >&2; exit 2 ;;
esac
major="${want%%.*}" minor="${want#*.}"
for py in "$override" "python$want" "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$want"*/bin/"python$want" "/usr/bin/python$want" \
          "$HOME/miniconda3/bin/python$want" "$HOME/miniforge3/bin/python$want"; do
  [ -n "$py" ] || continue
  if "$py" -c "import sys, venv; sys.exit(sys.version_info[:2] != ($major, $minor))" >/dev/null 2>&1; then
    command -v "$py"
    exit 0
  fi
done
echo "error: $purpose needs Python $want with venv (python$want on PATH, in pyenv, or $var=/path)." >&2
echo "       install one with 'pyenv install $want' or 'apt-get install python$want python$want-venv'." >&2
exit 2
