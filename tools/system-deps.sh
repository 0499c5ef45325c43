#!/usr/bin/env bash
# The system packages the build needs that pip cannot give: a C++ compiler and Python's venv.
# Eigen (cmeel-eigen) and CMake (cmake) come from pip with requirements.txt, so on a machine that
# has g++ and python3-venv nothing here runs and no root is needed. Only what is missing is
# installed (apt-get; sudo when not root). ccache only speeds up rebuilds: installed when apt can
# be used, skipped (with a note) when not.
set -euo pipefail
need=()
command -v g++ >/dev/null 2>&1 || need+=(g++)
python3 -c "import venv, ensurepip" >/dev/null 2>&1 || need+=(python3-venv)
can_apt() { [ "$(id -u)" -eq 0 ] || sudo -n true 2>/dev/null; }
if ! command -v ccache >/dev/null 2>&1; then
  if can_apt && command -v apt-get >/dev/null 2>&1; then need+=(ccache); else echo "system-deps: no ccache (optional: faster rebuilds)"; fi
fi
if [ ${#need[@]} -gt 0 ]; then
  if ! command -v apt-get >/dev/null 2>&1 || ! can_apt; then
    echo "system-deps: missing ${need[*]} and no apt-get with root here; install them (a C++17 compiler," \
         "Python's venv module) and run again" >&2
    exit 1
  fi
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "system-deps: installing ${need[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}"
fi
