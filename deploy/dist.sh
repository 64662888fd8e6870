#!/usr/bin/env bash
# `make dist`: the server and its tools as one tarball that runs by path on a
# Linux host without the container or any of Stoker's build dependencies:
#   stoker-VERSION-linux-x86_64/bin/   stoker-server, stoker-bench, stoker-diagnose,
#                                      stoker-materialize, stoker-profile, stoker-health
#                                      (and libstoker_spm.so, loaded beside them)
#   stoker-VERSION-linux-x86_64/lib/   every shared library they load but the C
#                                      library's own (libc, libm, ld.so, ...), found
#                                      through RPATH $ORIGIN/../lib (no ld.so.conf,
#                                      no LD_LIBRARY_PATH)
# The C library must be at least the build machine's (Debian bookworm: glibc
# 2.36); the C++ runtime travels in lib/.
# Usage: dist.sh BUILD_DIR OUT_DIR VERSION
set -euo pipefail
build=$(cd "$1" && pwd)
out=$2
version=$3
name=stoker-$version-linux-x86_64
bins=(server/stoker-server client/stoker-bench client/stoker-diagnose materialize/stoker-materialize
  materialize/stoker-profile tools/stoker-health storage/stoker-storage)
modules=(dataplane/libstoker_spm.so)
command -v patchelf >/dev/null || { echo "dist: patchelf is needed (deploy/install-deps.sh installs it)" >&2; exit 1; }
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/$name/bin" "$stage/$name/lib" "$out"
for b in "${bins[@]}" "${modules[@]}"; do
  [ -x "$build/$b" ] || [ -f "$build/$b" ] || { echo "dist: $build/$b is missing (make build first)" >&2; exit 1; }
  install -m 755 -s "$build/$b" "$stage/$name/bin/"
done
paths=()
for b in "${bins[@]}" "${modules[@]}"; do paths+=("$build/$b"); done
"$(dirname "$0")/container/shared_libs.sh" "${paths[@]}" | while read -r lib; do
  install -m 644 "$(readlink -f "$lib")" "$stage/$name/lib/$(basename "$lib")"
done
for f in "$stage/$name"/bin/*; do patchelf --set-rpath '$ORIGIN/../lib' "$f"; done
for f in "$stage/$name"/lib/*; do patchelf --set-rpath '$ORIGIN' "$f"; done
cat > "$stage/$name/README" <<EOF
Stoker $version: the data server and its tools, with the shared libraries they
load (lib/), for x86-64 Linux with glibc 2.36 or later. Run them by path:
  $name/bin/stoker-server --data-root=/data --port=50051 --metrics-port=9464
  $name/bin/stoker-bench --servers=127.0.0.1:50051 --dataset=train
Each takes --help. Documentation: README.md and docs/ of the Stoker repository.
EOF
tar -C "$stage" -czf "$out/$name.tar.gz" "$name"
echo "dist: $out/$name.tar.gz ($(du -m "$out/$name.tar.gz" | cut -f1) MB, $(ls "$stage/$name/lib" | wc -l) libraries)"
