#!/usr/bin/env bash
# System packages the kernel environment's sandbox needs (idempotent; `make test` and `make demo` run it).
#   bubblewrap  - builds every sandbox's file system and namespaces (shiftkit/kernels/sandbox.py)
#   libseccomp2 - the candidate worker's seccomp filter, loaded through ctypes (shiftkit/kernels/seccomp.py)
# Both are Debian packages; nothing is installed where they are already present.
set -euo pipefail
need=()
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
ldconfig -p 2>/dev/null | grep -q 'libseccomp\.so\.2' || need+=(libseccomp2)
if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "sysdeps: missing ${need[*]}; install them as root: apt-get install -y ${need[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
echo "sysdeps: installed ${need[*]}"
