#!/usr/bin/env bash
# Lays out the runtime image's files under OUT: the Stoker binaries in
# OUT/usr/local/bin and the shared libraries they load (ldd's closure) in
# OUT/usr/local/lib/stoker, except the C library's own (libc, libm, ld.so,
# ...), which the runtime base image has; an ld.so.conf.d entry points at
# them. Used by the Containerfile's build stage and by the container test.
# Usage: collect.sh BUILD_DIR OUT
set -euo pipefail
build=$1 out=$2
bins=(server/stoker-server client/stoker-bench client/stoker-diagnose materialize/stoker-materialize
  tools/stoker-health storage/stoker-storage)
mkdir -p "$out/usr/local/bin" "$out/usr/local/lib/stoker" "$out/etc/ld.so.conf.d"
for b in "${bins[@]}"; do
  install -m 755 -s "$build/$b" "$out/usr/local/bin/"
done
# SentencePiece's and FFmpeg's modules (loaded with dlopen, so ldd does not
# see them): beside the binaries, where stoker-server looks for them.
modules=(dataplane/libstoker_spm.so)
[ -f "$build/dataplane/libstoker_media.so" ] && modules+=(dataplane/libstoker_media.so)
for m in "${modules[@]}"; do
  install -m 755 -s "$build/$m" "$out/usr/local/bin/"
done
# Their libraries, but not the media module's: FFmpeg and the codecs it
# loads are the image's Debian packages (apt in the runtime stage).
paths=()
for b in "${bins[@]}" dataplane/libstoker_spm.so; do paths+=("$build/$b"); done
"$(dirname "$0")/shared_libs.sh" "${paths[@]}" | while read -r lib; do
  cp -L "$lib" "$out/usr/local/lib/stoker/"
done
echo /usr/local/lib/stoker > "$out/etc/ld.so.conf.d/stoker.conf"
# The CAs that HTTPS data roots (s3://, https://) are checked against.
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  install -D -m 644 /etc/ssl/certs/ca-certificates.crt "$out/etc/ssl/certs/ca-certificates.crt"
fi
echo "collect.sh: $(ls "$out/usr/local/bin" | wc -l) binaries, $(ls "$out/usr/local/lib/stoker" | wc -l) libraries" \
  "($(du -sh "$out/usr/local/lib/stoker" | cut -f1))"
