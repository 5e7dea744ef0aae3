#!/usr/bin/env bash
# Installs Debian's chromium, which the report test of `spotter simulate` opens
# headless, when /usr/bin/chromium is missing. Prints the browser's path.
# Needs root (or sudo) and the Debian archive; without them it says so and the
# browser test skips itself.
set -euo pipefail

bin=${CHROMIUM:-/usr/bin/chromium}
if [[ -x $bin ]]; then
	echo "$bin"
	exit 0
fi
sudo=()
if [[ $(id -u) -ne 0 ]]; then
	if ! command -v sudo >/dev/null; then
		echo "hack/chromium.sh: $bin is missing and installing it needs root" >&2
		exit 1
	fi
	sudo=(sudo)
fi
echo "hack/chromium.sh: installing chromium from the Debian archive" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq >&2
"${sudo[@]}" apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >&2
echo "$bin"
