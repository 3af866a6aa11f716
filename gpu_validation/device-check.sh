#!/usr/bin/env bash
# The one short script to run on a machine with a GPU (see docs/ARCHITECTURE.md): builds the
# release tree with gpu_validation, runs the NCCL probe and every test labelled `gpu`.
# Prints what it measured; exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
scripts/setup
cmake --preset release -DLOCKSTEP_GPU=ON >/dev/null
cmake --build --preset release -j "$(nproc)"
build/release/bin/lockstep-nccl-probe
ctest --test-dir build/release -L gpu --output-on-failure
