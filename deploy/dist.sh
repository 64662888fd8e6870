#!/usr/bin/env bash
# `make dist`: the server and its tools as one tarball that runs by path on a
# Linux host without the container, Python or any of Stoker's build
# dependencies. Made from the wheel `make wheel` repaired (the same programs,
# modules and libraries, checked there against the manylinux_2_34 policy), so
# both need the same host: x86-64, glibc 2.34 or later, the C++ runtime of
# GCC 11 or later (libstdc++.so.6, GLIBCXX_3.4.29), and FFmpeg's libraries
# for audio and video (5 or 7; never bundled, Debian's FFmpeg is GPL).
#   stoker-VERSION-linux-x86_64/bin/   stoker-server, stoker-bench, stoker-diagnose,
#                                      stoker-materialize, stoker-profile, stoker-health,
#                                      stoker-storage, and the modules loaded beside
#                                      them (libstoker_spm.so, libstoker_media_ffmpegN.so)
#   stoker-VERSION-linux-x86_64/lib/   the shared libraries they load but glibc's and
#                                      the C++ runtime's, found through RPATH
#                                      $ORIGIN/../lib (no ld.so.conf, no LD_LIBRARY_PATH);
#                                      libstoker_client.so.1, the client's C ABI for
#                                      C and C++ training jobs (RPATH $ORIGIN), and
#                                      pkgconfig/stoker-client.pc
#   stoker-VERSION-linux-x86_64/include/stoker/   its headers (c_api.h, client.h)
# Usage: dist.sh DIST_DIR VERSION   (the wheels of `make wheel` are in DIST_DIR)
set -euo pipefail
out=$1
version=$2
name=stoker-$version-linux-x86_64
wheel=$(ls "$out"/stoker-"$version"-cp*-manylinux_*_x86_64.whl 2>/dev/null | head -1 || true)
[ -n "$wheel" ] || { echo "dist: no wheel in $out (make wheel first)" >&2; exit 1; }
command -v patchelf >/dev/null || { echo "dist: patchelf is needed (deploy/install-deps.sh installs it)" >&2; exit 1; }
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
unzip -q "$wheel" -d "$stage/wheel"
mkdir -p "$stage/$name/bin" "$stage/$name/lib"
programs=$(sed -n 's/^\(stoker-[a-z]*\) = .*/\1/p' "$stage"/wheel/stoker-*.dist-info/entry_points.txt)
[ -n "$programs" ] || { echo "dist: $wheel has no programs (entry_points.txt)" >&2; exit 1; }
for p in $programs; do install -m 755 "$stage/wheel/stoker/$p" "$stage/$name/bin/"; done
for m in "$stage"/wheel/stoker/libstoker_*.so; do install -m 755 "$m" "$stage/$name/bin/"; done
for l in "$stage"/wheel/stoker.libs/*; do install -m 644 "$l" "$stage/$name/lib/"; done
# DT_RPATH (not RUNPATH, patchelf's default): it serves the libraries'
# own needs too, as auditwheel's does in the wheel.
for f in "$stage/$name"/bin/*; do patchelf --force-rpath --set-rpath '$ORIGIN/../lib' "$f"; done
# The client library beside the libraries it loads, its headers and its
# pkg-config file (the prefix found from the file's own place).
repo=$(cd "$(dirname "$0")/.." && pwd)
client=$stage/wheel/stoker/libstoker_client.so.1
[ -f "$client" ] || { echo "dist: $wheel has no libstoker_client.so.1" >&2; exit 1; }
install -m 755 "$client" "$stage/$name/lib/"
patchelf --force-rpath --set-rpath '$ORIGIN' "$stage/$name/lib/libstoker_client.so.1"
ln -s libstoker_client.so.1 "$stage/$name/lib/libstoker_client.so"
mkdir -p "$stage/$name/include/stoker" "$stage/$name/lib/pkgconfig"
install -m 644 "$repo"/include/stoker/{c_api.h,client.h,client_options.inc} "$stage/$name/include/stoker/"
sed -e 's|@STOKER_PC_PREFIX@|${pcfiledir}/../..|' -e 's|@CMAKE_INSTALL_LIBDIR@|lib|' \
  -e 's|@CMAKE_INSTALL_INCLUDEDIR@|include|' -e "s|@PROJECT_VERSION@|$version|" \
  "$repo/cmake/stoker-client.pc.in" > "$stage/$name/lib/pkgconfig/stoker-client.pc"
cat > "$stage/$name/README" <<README
Stoker $version: the data server and its tools, with the shared libraries they
load (lib/), for x86-64 Linux with glibc 2.34 or later (Debian 12+, Ubuntu
22.04+, RHEL/Rocky/Alma 9+, Amazon Linux 2023). Run them by path:
  $name/bin/stoker-server --data-root=/data --port=50051 --metrics-port=9464
  $name/bin/stoker-bench --servers=127.0.0.1:50051 --dataset=train
Each takes --help. Audio and video use the host's FFmpeg libraries, 5.1
(apt install libavformat59 libavcodec59 libswscale6 libswresample4: Debian 12)
or 7.1 (libavformat61 ...: Debian 13).
The same programs come with the Python package: pip install stoker.
A C or C++ training job links lib/libstoker_client.so (include/stoker/client.h,
c_api.h; docs: Use from C++):
  c++ -std=c++17 train.cc \$(PKG_CONFIG_PATH=$name/lib/pkgconfig pkg-config --cflags --libs stoker-client)
README
tar -C "$stage" -czf "$out/$name.tar.gz" "$name"
echo "dist: $out/$name.tar.gz ($(du -m "$out/$name.tar.gz" | cut -f1) MB, $(ls "$stage/$name/lib" | wc -l) libraries)"
