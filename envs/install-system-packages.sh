#!/usr/bin/env bash
# Install the Debian packages given as arguments when their command is missing.
# Usage: envs/install-system-packages.sh fio:fio sshd:openssh-server ...   (command:package)
set -euo pipefail
missing=()
for pair in "$@"; do
  command_name=${pair%%:*}
  package=${pair#*:}
  if ! command -v "$command_name" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$command_name" ]; then
    missing+=("$package")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "storbench needs these Debian packages: ${missing[*]}" >&2
  echo "Install them as root: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "installing ${missing[*]} with apt-get" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
