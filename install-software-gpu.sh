#!/usr/bin/env bash
# Install Mesa >= 25 lavapipe (software Vulkan) from bookworm-backports, reusing the mirror of the
# system's own Debian apt source. Needs root; a no-op (with a note) otherwise.
set -euo pipefail

if [ "$(id -u)" != 0 ]; then
  echo "install-software-gpu: not root, skipping the Debian packages for the software GPU" >&2
  exit 0
fi
if ! command -v apt-get >/dev/null; then
  echo "install-software-gpu: no apt-get, skipping" >&2
  exit 0
fi

mesa_version() { dpkg-query -W -f '${Version}' mesa-vulkan-drivers 2>/dev/null | sed -E 's/^[0-9]+://; s/[^0-9.].*//'; }
current=$(mesa_version || true)
if [ -n "$current" ] && [ "${current%%.*}" -ge 25 ] 2>/dev/null; then
  echo "install-software-gpu: mesa-vulkan-drivers $current already installed"
  exit 0
fi

. /etc/os-release
codename=${VERSION_CODENAME:-bookworm}
mirror=""
for f in /etc/apt/sources.list.d/*.sources; do
  [ -f "$f" ] || continue
  mirror=$(awk '/^URIs:/ {print $2; exit}' "$f" | grep -v -- '-security' || true)
  [ -n "$mirror" ] && break
done
if [ -z "$mirror" ] && [ -f /etc/apt/sources.list ]; then
  mirror=$(awk '$1=="deb" && $0 !~ /security/ {for (i=2;i<=NF;i++) if ($i ~ /^[a-z]+:\/\//) {print $i; exit}}' /etc/apt/sources.list)
fi
if [ -z "$mirror" ]; then
  echo "install-software-gpu: could not find the system's Debian mirror in its apt sources" >&2
  exit 1
fi

list=/etc/apt/sources.list.d/tflkit-backports.list
echo "deb $mirror ${codename}-backports main" > "$list"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq -t "${codename}-backports" mesa-vulkan-drivers libvulkan1 >/dev/null
echo "install-software-gpu: mesa-vulkan-drivers $(mesa_version) installed"
