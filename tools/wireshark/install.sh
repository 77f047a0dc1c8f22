#!/usr/bin/env bash
# Installs the SMT dissector for Wireshark and tshark of the current user:
#
#   tools/wireshark/install.sh
#
# copies smt.lua into Wireshark's personal Lua plugin folder
# (~/.local/lib/wireshark/plugins, or $WIRESHARK_PLUGIN_DIR if set).
# Restart Wireshark (or Analyze > Reload Lua Plugins) to load it; tshark
# loads it on its next run. Remove the file to uninstall.
set -euo pipefail
src="$(cd "$(dirname "$0")" && pwd)/smt.lua"
dest="${WIRESHARK_PLUGIN_DIR:-$HOME/.local/lib/wireshark/plugins}"
mkdir -p "$dest"
cp "$src" "$dest/smt.lua"
echo "installed $dest/smt.lua"
