#!/usr/bin/env bash
# Install what the dashboard's browser tests (tests/test_dashboard_browser.py) need: Debian's
# `chromium`, run headless by the tests (--dump-dom, --screenshot). Run as root on a
# Debian/Ubuntu CI machine; idempotent (does nothing when chromium is already installed).
set -euo pipefail
if command -v chromium >/dev/null || command -v chromium-browser >/dev/null; then
    echo "ci-browser-setup: chromium already installed"
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "ci-browser-setup: must run as root (apt-get install)" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# a mirror hiccup should not fail CI: three tries, then fail loudly (the browser tests are required)
for try in 1 2 3; do
    if apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core; then
        exit 0
    fi
    echo "ci-browser-setup: apt-get failed (try $try of 3)" >&2
    sleep $((try * 10))
done
exit 1
