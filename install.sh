#!/usr/bin/env bash
# Install braind for the current user and start it on the default memory root.
#   ./install.sh              install, or upgrade in place and restart the daemon
#   ./install.sh --uninstall  remove what install.sh installed (never the memory or the index)
# - a virtualenv in ~/.local/lib/braind ($BRAIND_PREFIX), with the MCP extra, the command linked into ~/.local/bin
# - with a systemd user session: the user units are installed and (re)started (socket activation)
# - without one: `braind start` runs it detached (`braind stop` first when upgrading)
set -euo pipefail
cd "$(dirname "$0")"
prefix="${BRAIND_PREFIX:-$HOME/.local/lib/braind}"
bin="$HOME/.local/bin"
link="$bin/braind"
units="${XDG_CONFIG_HOME:-$HOME/.config}/systemd/user"

say() { printf 'braind: %s\n' "$*"; }

have_systemd() { systemctl --user show-environment >/dev/null 2>&1; }

# The profile the login shell reads, for the PATH advice.
profile() {
  case "$(basename "${SHELL:-sh}")" in
    bash) echo "$HOME/.bashrc" ;;
    zsh) echo "${ZDOTDIR:-$HOME}/.zshrc" ;;
    fish) echo "$HOME/.config/fish/config.fish" ;;
    *) echo "$HOME/.profile" ;;
  esac
}

path_advice() {
  case ":$PATH:" in
    *":$bin:"*) return ;;
  esac
  local file line
  file="$(profile)"
  if [ "$(basename "${SHELL:-sh}")" = fish ]; then
    line="fish_add_path $bin"
  else
    line="export PATH=\"\$HOME/.local/bin:\$PATH\""
  fi
  say "$bin is not on your PATH, so the command \`braind\` is not found yet. Add this line to $file:"
  printf '\n    %s\n\n' "$line"
  say "then open a new terminal (or run it once in this one). Until then, run $link"
}

stop_detached() {
  if [ -x "$link" ] && "$link" status >/dev/null 2>&1; then
    "$link" stop >/dev/null 2>&1 || true
  fi
}

uninstall() {
  if have_systemd && [ -f "$units/braind.service" ]; then
    systemctl --user disable --now braind.socket braind.service >/dev/null 2>&1 || true
    rm -f "$units/braind.service" "$units/braind.socket"
    systemctl --user daemon-reload || true
    say "stopped and removed the systemd user units"
  else
    stop_detached
  fi
  if [ -L "$link" ] && [ "$(readlink "$link")" = "$prefix/bin/braind" ]; then
    rm -f "$link"
    say "removed $link"
  fi
  if [ -d "$prefix" ] && [ -x "$prefix/bin/python" ]; then
    rm -rf "$prefix"
    say "removed $prefix"
  fi
  say "kept your memory and the index (the memory root, ~/.local/state/braind, ~/.config/braind); delete them yourself to forget everything"
}

install() {
  python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "braind needs Python 3.11 or newer" >&2; exit 1; }
  local upgrade=""
  [ -x "$prefix/bin/braind" ] && upgrade=1
  python3 -m venv "$prefix"
  "$prefix/bin/python" -m pip install -q --disable-pip-version-check --upgrade '.[mcp]'
  mkdir -p "$bin"
  ln -sfn "$prefix/bin/braind" "$link"
  if have_systemd; then
    mkdir -p "$units"
    cp systemd/braind.service systemd/braind.socket "$units/"
    systemctl --user daemon-reload
    systemctl --user enable --now braind.socket braind.service
    [ -n "$upgrade" ] && systemctl --user restart braind.service
    say "running under systemd (systemctl --user status braind)"
  else
    [ -n "$upgrade" ] && stop_detached
    "$link" status >/dev/null 2>&1 || "$link" start
  fi
  say "${upgrade:+upgraded and restarted; }installed $("$link" --version) in $prefix"
  say "the command for agent configs (MCP servers, hooks): $link"
  path_advice
  "$link" status
}

case "${1:-}" in
  --uninstall) uninstall ;;
  "") install ;;
  -h | --help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//' ;;
  *) echo "usage: ./install.sh [--uninstall]" >&2; exit 2 ;;
esac
