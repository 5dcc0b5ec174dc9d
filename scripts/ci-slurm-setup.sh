#!/usr/bin/env bash
# Install what the real-Slurm integration tests (pytest -m slurm) need: slurm-wlm and munge.
# Run as root on a Debian/Ubuntu CI machine; idempotent (does nothing when both are installed).
# The tests start their own munged/slurmctld/slurmd under a temporary directory, so nothing is
# configured or started here.
set -euo pipefail
if command -v slurmctld >/dev/null && command -v slurmd >/dev/null \
   && command -v munged >/dev/null && command -v mungekey >/dev/null; then
    echo "ci-slurm-setup: slurm-wlm and munge already installed"
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "ci-slurm-setup: must run as root (apt-get install)" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# a mirror hiccup should not fail CI: three tries, then fail loudly (the slurm suite is required)
for try in 1 2 3; do
    if apt-get update -qq && apt-get install -y -qq slurm-wlm munge; then
        exit 0
    fi
    echo "ci-slurm-setup: apt-get failed (try $try of 3)" >&2
    sleep $((try * 10))
done
exit 1
