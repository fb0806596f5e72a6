#!/usr/bin/env bash
# Installs the system libraries MXNet's wheels load but do not ship (libgomp, libquadmath),
# only where they are missing. Needs root (or sudo) on Debian/Ubuntu; elsewhere it says what to install.
set -euo pipefail
missing=()
for pair in libgomp.so.1:libgomp1 libquadmath.so.0:libquadmath0; do
  lib=${pair%%:*}; pkg=${pair##*:}
  ldconfig -p 2>/dev/null | grep -q "$lib" || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing system packages: ${missing[*]}"
if command -v apt-get >/dev/null 2>&1; then
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
else
  echo "error: install ${missing[*]} (or your distribution's libgomp/libquadmath) by hand" >&2
  exit 2
fi
