#!/usr/bin/env bash
# Debian packages tflkit needs, installed when run as root (a no-op with a note otherwise):
#  - always: Mesa >= 25 lavapipe (software Vulkan GPU) from bookworm-backports, reusing the
#    mirror of the system's own Debian apt source;
#  - with --browser (what ./dev.sh test passes): Chromium, used by the tests to render the HTML
#    reports headless and by the browser harness (with nodejs and npm, which fetch LiteRT.js, and
#    Appium for a test), its ChromeDriver (chromium-driver, the WebDriver server of the tests),
#    the on-device tests' real peers (adb and adbd from bookworm-backports, OpenSSH server and
#    client) and a JDK (javac) for the Android harness's protocol module.
set -euo pipefail

with_browser=0
[ "${1:-}" = "--browser" ] && with_browser=1

if [ "$(id -u)" != 0 ]; then
  echo "install-system-packages: not root, skipping the Debian packages" >&2
  exit 0
fi
if ! command -v apt-get >/dev/null; then
  echo "install-system-packages: no apt-get, skipping the Debian packages" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive

if [ "$with_browser" = 1 ] && ! command -v chromium >/dev/null; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends chromium >/dev/null
  echo "install-system-packages: $(chromium --version 2>/dev/null) installed"
fi
# chromium-driver: ChromeDriver, the W3C WebDriver server of --device webdriver:URL's tests
if [ "$with_browser" = 1 ] && ! command -v chromedriver >/dev/null; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends chromium-driver >/dev/null
  echo "install-system-packages: $(chromedriver --version 2>/dev/null | cut -d' ' -f1-2) installed"
fi
# npm fetches LiteRT.js (@litertjs/core) once for the browser harness (delegates/browser/)
if [ "$with_browser" = 1 ] && ! command -v npm >/dev/null; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
  echo "install-system-packages: npm $(npm --version 2>/dev/null) installed"
fi

mesa_version() { dpkg-query -W -f '${Version}' mesa-vulkan-drivers 2>/dev/null | sed -E 's/^[0-9]+://; s/[^0-9.].*//'; }
current=$(mesa_version || true)
mesa_ok=0
if [ -n "$current" ] && [ "${current%%.*}" -ge 25 ] 2>/dev/null; then
  echo "install-system-packages: mesa-vulkan-drivers $current already installed"
  mesa_ok=1
fi
need_adb=0
missing=""
if [ "$with_browser" = 1 ]; then
  { command -v adb && { command -v adbd || [ -x /usr/sbin/adbd ]; }; } >/dev/null || need_adb=1
  [ -x /usr/sbin/sshd ] || missing="$missing openssh-server"
  command -v ssh >/dev/null || missing="$missing openssh-client"
  command -v javac >/dev/null || missing="$missing openjdk-17-jdk-headless"
fi
if [ "$mesa_ok" = 1 ] && [ "$need_adb" = 0 ] && [ -z "$missing" ]; then
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
  echo "install-system-packages: could not find the system's Debian mirror in its apt sources" >&2
  exit 1
fi

list=/etc/apt/sources.list.d/tflkit-backports.list
echo "deb $mirror ${codename}-backports main" > "$list"
apt-get update -qq
if [ "$mesa_ok" = 0 ]; then
  apt-get install -y -qq -t "${codename}-backports" mesa-vulkan-drivers libvulkan1 >/dev/null
  echo "install-system-packages: mesa-vulkan-drivers $(mesa_version) installed"
fi
if [ "$need_adb" = 1 ]; then
  apt-get install -y -qq -t "${codename}-backports" adb adbd >/dev/null
  echo "install-system-packages: adb and adbd installed"
fi
if [ -n "$missing" ]; then
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $missing >/dev/null
  echo "install-system-packages:$missing installed"
fi
