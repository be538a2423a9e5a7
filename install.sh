#!/usr/bin/env bash
# Install braind for the current user and start it on the default memory root.
# - a virtualenv in ~/.local/lib/braind, the command linked into ~/.local/bin
# - with a systemd user session: the user units are installed and started (socket activation)
# - without one: `braind start` runs it detached
set -euo pipefail
cd "$(dirname "$0")"
prefix="${BRAIND_PREFIX:-$HOME/.local/lib/braind}"
bin="$HOME/.local/bin"
python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "braind needs Python 3.11 or newer" >&2; exit 1; }
python3 -m venv "$prefix"
"$prefix/bin/python" -m pip install -q --disable-pip-version-check .
mkdir -p "$bin"
ln -sf "$prefix/bin/braind" "$bin/braind"
if systemctl --user show-environment >/dev/null 2>&1; then
  units="${XDG_CONFIG_HOME:-$HOME/.config}/systemd/user"
  mkdir -p "$units"
  cp systemd/braind.service systemd/braind.socket "$units/"
  systemctl --user daemon-reload
  systemctl --user enable --now braind.socket braind.service
  echo "braind is running under systemd (systemctl --user status braind)"
else
  "$bin/braind" status >/dev/null 2>&1 || "$bin/braind" start
fi
"$bin/braind" status
