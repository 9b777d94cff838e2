#!/usr/bin/env bash
# Builds the Debian package with cpack, installs it with dpkg and runs `rapide --version` from
# PATH (issue 20). Needs root for dpkg -i: outside CI a non-root run is a skip (exit 77);
# with CI=true it fails. The package is removed afterwards unless it was installed before.
# Usage: deb_install_test.sh BUILD_DIR
set -euo pipefail
build=$1
if [ "$(id -u)" -ne 0 ]; then
  if [ "${CI:-}" = "true" ]; then
    echo "FAIL: installing the .deb needs root (CI runs as root)"
    exit 1
  fi
  echo "SKIPPED package_deb_install: dpkg -i needs root (run as root, or in CI)"
  exit 77
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# A copy of the build's CPack config writing into $out, so parallel tests and the build
# folder itself see no package files appear.
(cd "$build" && cpack -G DEB -B "$out" >"$out/cpack.log" 2>&1) || {
  cat "$out/cpack.log"
  exit 1
}
deb=$(ls "$out"/rapide_*.deb)
echo "built $(basename "$deb")"
depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
for lib in libc6 libstdc++6 libspdlog libfmt libreadline; do
  case "$depends" in
    *"$lib"*) ;;
    *) echo "FAIL: the package does not declare a dependency on $lib"; exit 1 ;;
  esac
done
contents=$(dpkg-deb -c "$deb")
for f in ./usr/bin/rapide ./usr/share/doc/rapide/README.md ./usr/share/doc/rapide/LICENSE \
         ./usr/share/doc/rapide/rapide-help.txt; do
  grep -q " $f\$" <<<"$contents" || { echo "FAIL: $f is not in the package"; exit 1; }
done

was_installed=0
dpkg-query -W -f='${Status}' rapide 2>/dev/null | grep -q "install ok installed" && was_installed=1
dpkg -i "$deb" >/dev/null
version=$(env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin rapide --version)
[ "$was_installed" -eq 1 ] || dpkg -r rapide >/dev/null
echo "$version"
grep -q '^rapide [0-9]' <<<"$version" || { echo "FAIL: no version line"; exit 1; }
grep -q '^commit [0-9a-f]' <<<"$version" || { echo "FAIL: no commit line"; exit 1; }
grep -q '^kernels \(scalar\|avx2\|avx512\)' <<<"$version" || { echo "FAIL: no kernel ISA"; exit 1; }
echo "PASS: the .deb installs rapide on PATH"
