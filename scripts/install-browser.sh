#!/usr/bin/env bash
# Installs headless Chromium and its WebDriver from Debian's packages for the JupyterLab browser test
# (tests/cli/test_lab.py), only where they are missing. No browser is downloaded by Selenium or Playwright.
set -euo pipefail
command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1 && exit 0
echo "installing system packages: chromium chromium-driver"
if command -v apt-get >/dev/null 2>&1; then
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium chromium-driver
else
  echo "error: install Chromium and its chromedriver by hand (the browser test skips without them)" >&2
  exit 2
fi
