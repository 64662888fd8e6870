#!/usr/bin/env bash
# The wheels and the server tarball `make wheel` and `make dist` made, tried
# as a user would, here and on another distribution:
#   1. Each wheel: under 40 MB with the programs and the media modules; tagged
#      manylinux_2_34 and no file in it needs more (glibc 2.34, GLIBCXX_3.4.29);
#      none of the libraries OpenCV's codecs used to pull in (GDAL, HDF5,
#      Poppler, MariaDB, GL), and no FFmpeg (the host's is loaded).
#   2. This host (bookworm, Python 3.11, FFmpeg 5.1): in a fresh venv without
#      numpy, `import stoker` fails with a clear ImportError and no leak
#      report; the cp311 wheel installed with pip into a venv (timed) gives
#      the seven programs as commands in its bin/; no file installed from the
#      wheel or the tarball holds a path of this build (repository or build
#      folder); then, with the repository and the build tree out of sight (a
#      mount namespace with them covered), the venv's stoker-server serves
#      and the venv's loader reads images, audio and video in local mode and
#      from it; `ldd` names nothing outside the wheel but glibc's and the C++
#      runtime; with the build's pyenv (PyPI's grpcio, Debian's torch),
#      grpcio imported before and after stoker, both used in one process.
#   3. A Debian trixie root made with debootstrap (glibc 2.41, Python 3.13,
#      Debian's torch 2.x, FFmpeg 7.1's libraries, none of Stoker's build
#      dependencies), run with unshare + chroot: the abi3 wheel installed
#      with pip into two venvs there, ldd checked; the first venv's
#      stoker-server serves images, audio and video to the second venv's
#      loader, which reads them in local mode too, with torch and numpy; this
#      host's server and PyPI's grpcio (cp313) imported first; the server
#      tarball unpacked there, its stoker-server serving an epoch (media
#      included) and its tools answering --help.
# Where debootstrap or unshare cannot work (no root), the steps that need
# them are skipped and the test exits 77 (skipped) after the others pass,
# saying why.
# Usage: wheel_test.sh REPO_ROOT BUILD_DIR DIST_DIR WHEELHOUSE_CP313
set -uo pipefail
repo=$(cd "$1" && pwd) build=$(cd "$2" && pwd) dist=$(cd "$3" && pwd) wheelhouse=$4
pyenv=$build/pyenv/bin/python
work=$(mktemp -d)
passed=0 failed=0 pids=()
ok() { echo "ok: $1"; passed=$((passed + 1)); }
fail() { echo "FAIL: $1"; [ -n "${2:-}" ] && echo "$2" | tail -30; failed=$((failed + 1)); }
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
finish() {
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ] || exit 1
  exit "${1:-0}"
}
max_mb=40
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

cp311=$(ls "$dist"/stoker-*-cp311-cp311-manylinux_*.whl 2>/dev/null | head -1)
abi3=$(ls "$dist"/stoker-*-cp312-abi3-manylinux_*.whl 2>/dev/null | head -1)
tarball=$(ls "$dist"/stoker-*-linux-x86_64.tar.gz 2>/dev/null | head -1)
[ -n "$cp311" ] && [ -n "$abi3" ] && [ -n "$tarball" ] \
  || { echo "FAIL: no wheels or tarball in $dist (make wheel dist makes them)"; exit 1; }

# --- 1. the wheels ------------------------------------------------------------
for whl in "$cp311" "$abi3"; do
  name=$(basename "$whl")
  bytes=$(stat -c %s "$whl")
  [ "$bytes" -lt $((max_mb * 1024 * 1024)) ] && ok "$name: $((bytes / 1024 / 1024)) MB, under $max_mb MB" \
    || fail "$name is $((bytes / 1024 / 1024)) MB, over $max_mb MB"
  [[ "$name" == *manylinux_2_34_x86_64* ]] && ok "$name: tagged manylinux_2_34" || fail "$name: not tagged manylinux_2_34"
  rm -rf "$work/unzipped" && unzip -q "$whl" -d "$work/unzipped"
  newer=$(find "$work/unzipped" -type f \( -name '*.so*' -o -name 'stoker-*' \) | while read -r f; do
    v=$(objdump -T "$f" 2>/dev/null | grep -o 'UND.*(GLIBC_2\.\(3[5-9]\|[4-9][0-9]\)[^)]*)\|UND.*(GLIBCXX_3\.4\.3[0-9])' | sort -u)
    [ -z "$v" ] || echo "${f#$work/unzipped/}: $v"; done)
  [ -z "$newer" ] && ok "$name: no file needs more than glibc 2.34 and GLIBCXX_3.4.29 ($(find "$work/unzipped" -type f | wc -l) files)" \
    || fail "$name: files need a newer glibc or libstdc++" "$newer"
  programs=$(ls "$work/unzipped/stoker" | grep -c '^stoker-')
  modules=$(ls "$work/unzipped/stoker" | grep '^libstoker_media_ffmpeg' | tr '\n' ' ')
  [ "$programs" -eq 7 ] && [ -n "$modules" ] && ok "$name: 7 programs, media modules $modules" \
    || fail "$name: $programs programs, media modules '$modules'"
  unwanted=$(unzip -Z1 "$whl" | grep -E 'gdal|hdf5|poppler|mariadb|opencv_imgcodecs|libav(format|codec|util)|libsw(scale|resample)' || true)
  [ -z "$unwanted" ] && ok "$name carries no GDAL, HDF5, Poppler, MariaDB or FFmpeg ($(unzip -Z1 "$whl" | grep -c '\.so') shared objects)" \
    || fail "$name carries libraries it must not" "$unwanted"
  # The programs' shared OpenCV brings GLX and X11 into the wheel; the
  # extension, which training containers load, needs neither.
  gl=$(patchelf --print-needed "$work"/unzipped/stoker/_stoker_ext*.so | grep -E 'libGL|libX11' || true)
  [ -z "$gl" ] && ok "$name: the extension needs no GL or X11" || fail "$name: the extension needs GL or X11" "$gl"
done

# The extension's resolved libraries: inside SITE (the wheel's own folders)
# or glibc's, the C++ runtime's and the loader.
check_ldd() {  # LDD_OUTPUT SITE WHAT
  local outside
  outside=$(echo "$1" | awk -v site="$2" '
    /not found/ { print; next }
    /=>/ { path = $3; n = split(path, parts, "/"); base = parts[n]
           if (index(path, site) == 1) next
           if (base ~ /^(libc|libm|libpthread|libdl|librt|libresolv|libutil|libstdc\+\+|libgcc_s)\.so/) next
           print }')
  [ -z "$outside" ] && ok "$3: ldd names nothing outside the wheel but glibc, libstdc++/libgcc_s and the loader" \
    || fail "$3: ldd names libraries outside the wheel" "$outside"
}

# --- 2. this host: Python 3.11 ----------------------------------------------
# The wheels and the test's script copied out of the repository (pip records
# where a wheel came from).
mkdir -p "$work/wheels" && cp "$cp311" "$abi3" "$work/wheels/" && cp "$repo/python/tests/wheel_epochs.py" "$work/"
cp311=$work/wheels/$(basename "$cp311") abi3=$work/wheels/$(basename "$abi3")
# Without numpy (a declared dependency), `import stoker` says so, and no
# extension is loaded to leak.
/usr/bin/python3 -m venv "$work/bare" >/dev/null
"$work/bare/bin/pip" install -q --disable-pip-version-check --no-index --no-deps "$cp311" >/dev/null 2>&1
out=$(cd "$work" && "$work/bare/bin/python" -c 'import stoker' 2>&1)
if [ $? -ne 0 ] && echo "$out" | grep -q "ImportError: stoker needs NumPy" && ! echo "$out" | grep -qi "leak"; then
  ok "a venv without numpy: $(echo "$out" | tail -1)"
else
  fail "a venv without numpy: no clear ImportError, or a leak report" "$out"
fi
/usr/bin/python3 -m venv --system-site-packages "$work/venv" >/dev/null
t0=$(date +%s.%N)
if out=$("$work/venv/bin/pip" install -q --disable-pip-version-check --no-index "$cp311" 2>&1); then
  ok "pip install $(basename "$cp311") into a venv (numpy from Debian's packages): $(elapsed "$t0") s"
else
  fail "pip install of the cp311 wheel" "$out"
fi
site=$("$work/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
commands=$(ls "$work/venv/bin" | grep -c '^stoker-')
help=$("$work/venv/bin/stoker-server" --help 2>&1)  # absl's --help exits 1
[ "$commands" -eq 7 ] && echo "$help" | grep -q "Stoker data server" \
  && ok "the venv's bin/ has 7 stoker commands; stoker-server --help runs" \
  || fail "the venv's bin/ has $commands stoker commands, or stoker-server --help failed"
check_ldd "$(ldd "$site"/stoker/_stoker_ext*.so 2>&1)" "$site/stoker" "bookworm venv, $(basename "$site"/stoker/_stoker_ext*.so)"
check_ldd "$(ldd "$site"/stoker/libstoker_spm.so 2>&1)" "$site/stoker" "bookworm venv, libstoker_spm.so"
check_ldd "$(ldd "$site"/stoker/stoker-server 2>&1)" "$site/stoker" "bookworm venv, stoker-server"
# No path of the build machine in anything installed (or in the tarball).
mkdir -p "$work/tarball" && tar -C "$work/tarball" -xzf "$tarball"
leaks=$(grep -rl -F -e "$repo" -e "$build" "$site/stoker" "$site"/stoker.libs "$work/tarball" 2>/dev/null || true)
[ -z "$leaks" ] && ok "no file installed from the wheel or the tarball names $repo or $build ($(find "$site/stoker" "$site"/stoker.libs "$work/tarball" -type f | wc -l) files)" \
  || fail "files name the build machine's paths" "$leaks"

"$build/tests/stoker-make-images" --out="$work/data/ds" --classes=4 --per-class=16 --min-side=48 --max-side=96 --seed=1
# The tarball's client library (the C ABI) with the libraries it carries: a C
# program built here against it with pkg-config runs an epoch in local mode.
tdir=$(ls -d "$work"/tarball/stoker-*-linux-x86_64)
check_ldd "$(ldd "$tdir/lib/libstoker_client.so.1" 2>&1)" "$tdir/lib" "the tarball's lib/libstoker_client.so.1"
cflags=$(PKG_CONFIG_PATH=$tdir/lib/pkgconfig pkg-config --cflags --libs stoker-client)
if cc -std=c99 -O2 -o "$work/c_epoch" "$repo/examples/c_epoch/epoch.c" $cflags 2>"$work/cc.log"; then
  out=$("$work/c_epoch" local_workers=2 data_root="$work/data" dataset=ds batch_size=8 device=cpu metrics_port=-1 \
        'pipeline=center_crop(32)' 2>&1)
  echo "$out" | grep -q '^images 64$' \
    && ok "a C program built against the tarball's libstoker_client.so (pkg-config) ran an epoch of 64 images" \
    || fail "the C program on the tarball's client library" "$out"
else
  fail "cc against the tarball's client library (pkg-config stoker-client)" "$(cat "$work/cc.log")"
fi
# Audio and video, two classes of two each.
for c in a b; do
  mkdir -p "$work/data/clips/$c" "$work/data/videos/$c"
  for i in 1 2; do
    ffmpeg -v error -y -f lavfi -i "sine=frequency=$((300 * i)):sample_rate=22050:duration=0.8" "$work/data/clips/$c/$i.wav" &&
    ffmpeg -v error -y -f lavfi -i testsrc2=size=64x48:rate=25:duration=0.6 -c:v libx264 -pix_fmt yuv420p \
      "$work/data/videos/$c/$i.mp4" || { fail "ffmpeg could not make the test media"; finish; }
  done
done
# serve_and_read SERVER LOG PYTHON ARGS...: starts SERVER (a stoker-server) on
# a free port of 127.0.0.1, runs PYTHON wheel_epochs.py --servers ADDR ARGS,
# stops the server; the script's output, then the server's log on failure.
cat > "$work/serve_and_read.sh" <<'SH'
server=$1 log=$2 python=$3; shift 3
"$server" --host=127.0.0.1 --port=0 --metrics-port=-1 --workers=2 --data-root="$DATA" >"$log" 2>&1 &
pid=$!
for _ in $(seq 1 200); do
  port=$(sed -n 's/.*listening on [0-9.]*:\([0-9]*\).*/\1/p' "$log" | head -1); [ -n "$port" ] && break; sleep 0.1
done
[ -n "$port" ] || { echo "the server did not start:"; tail -5 "$log"; kill $pid; exit 1; }
"$python" "$WORK/wheel_epochs.py" --servers 127.0.0.1:$port "$@"; rc=$?
kill $pid; wait $pid
[ $rc -eq 0 ] || tail -5 "$log"
exit $rc
SH
# With the repository and the build tree covered (a mount namespace), the
# venv's own stoker-server and loader.
epochs="--data-root $work/data --media --expect-site $site --frameworks numpy"
if [ "$(id -u)" -eq 0 ] && unshare --mount true 2>/dev/null; then
  out=$(cd "$work" && DATA=$work/data WORK=$work unshare --mount sh -c \
        "mount -t tmpfs none '$repo' && mount -t tmpfs none '$build' 2>/dev/null; ls '$repo' | wc -l | grep -qx 0 || exit 9
         sh '$work/serve_and_read.sh' '$work/venv/bin/stoker-server' '$work/venv-server.log' '$work/venv/bin/python' $epochs" 2>&1) \
    && ok "bookworm, repository and build tree out of sight: the venv's stoker-server served, its loader read images, audio and video locally and from it ($(echo "$out" | grep -c '^ok') checks; $(echo "$out" | sed -n 's/^ok: media decoding through //p'))" \
    || fail "bookworm venv with the build tree out of sight" "$out"
else
  out=$(cd "$work" && DATA=$work/data WORK=$work sh "$work/serve_and_read.sh" "$work/venv/bin/stoker-server" \
        "$work/venv-server.log" "$work/venv/bin/python" $epochs 2>&1) \
    && ok "bookworm (build tree in sight: no mount namespace without root): the venv's server and loader, images, audio and video" \
    || fail "bookworm venv epochs" "$out"
fi
# The venv's stoker-server, for PyPI's grpcio beside stoker in the build's pyenv.
"$work/venv/bin/stoker-server" --host=127.0.0.1 --port=0 --metrics-port=-1 --data-root="$work/data" --workers=2 \
  >"$work/server.log" 2>&1 &
pids+=($!)
port=
for _ in $(seq 1 200); do
  port=$(sed -n 's/.*listening on [0-9.]*:\([0-9]*\).*/\1/p' "$work/server.log" | head -1)
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { fail "stoker-server did not start" "$(cat "$work/server.log")"; finish; }
server=127.0.0.1:$port
"$pyenv" -m pip install -q --disable-pip-version-check --no-deps --no-index --target "$work/site" "$cp311" >/dev/null
for order in after first; do
  out=$(cd "$work" && PYTHONPATH="$work/site" "$pyenv" "$work/wheel_epochs.py" --servers "$server" \
        --data-root "$work/data" --expect-site "$work/site" --grpc $order 2>&1) \
    && ok "bookworm, PyPI's grpcio imported $order stoker and used, epochs in local mode and from a server: $(echo "$out" | grep -c '^ok') checks" \
    || fail "bookworm epochs, grpcio imported $order stoker" "$out"
done

# --- 3. Debian trixie ---------------------------------------------------------
why=
if [ "$(id -u)" -ne 0 ]; then why="debootstrap and chroot need root"
elif ! command -v debootstrap >/dev/null; then why="debootstrap is not installed"
elif ! unshare --mount --pid --fork true 2>/dev/null; then why="unshare cannot make mount and pid namespaces here"
fi
if [ -n "$why" ]; then
  echo "SKIPPED: the Debian trixie root: $why"
  finish 77
fi
root=$build/trixie-root
# FFmpeg 7.1's libraries (the host's FFmpeg the wheel's second media module loads).
packages="python3 python3-venv python3-torch python3-numpy libavformat61 libavcodec61 libswscale8 libswresample5"
if [ "$(cat "$root/.stoker-ready" 2>/dev/null)" != "$packages" ]; then
  rm -rf "$root"
  mirror=$(sed -n 's/^URIs: \(http[^ ]*debian\)$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
  mirror=${mirror:-http://deb.debian.org/debian}
  t0=$(date +%s)
  if ! out=$(debootstrap --variant=minbase trixie "$root" "$mirror" 2>&1); then
    fail "debootstrap trixie from $mirror" "$out"; finish
  fi
  if ! out=$(chroot "$root" /usr/bin/env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
             $packages 2>&1); then
    fail "apt-get install $packages in the trixie root" "$out"; finish
  fi
  rm -rf "$root"/var/cache/apt/archives/*.deb
  echo "$packages" > "$root/.stoker-ready"
  echo "trixie root with $packages: $(( $(date +%s) - t0 )) s"
fi
# Bounded: a hung step fails the test instead of holding ctest.
in_root() { timeout 300 unshare --mount --pid --fork --mount-proc="$root/proc" chroot "$root" "$@"; }
t=/tmp/stoker-wheel-test
rm -rf "${root:?}$t" && mkdir -p "$root$t/wheels"
grpcio=$(ls "$wheelhouse"/grpcio-*cp313*.whl 2>/dev/null | head -1)
[ -n "$grpcio" ] || { fail "no grpcio cp313 wheel in $wheelhouse (make test downloads it)"; finish; }
cp "$abi3" "$grpcio" "$root$t/wheels/"
cp "$work/wheel_epochs.py" "$work/serve_and_read.sh" "$root$t/" && cp -r "$work/data" "$root$t/data"
tar -C "$root$t" -xzf "$tarball"
info=$(in_root /usr/bin/env python3 -c 'import platform, sys, torch; print(f"Python {sys.version.split()[0]}, glibc {platform.libc_ver()[1]}, torch {torch.__version__}")' 2>/dev/null)
ok "trixie root: $info"
# None of Stoker's build dependencies. (Debian's torch does bring a
# libprotobuf.so.32 of its own, loaded in the same process as the wheel's.)
# (FFmpeg's codecs bring libjpeg62-turbo's runtime library; the ldd checks
# below show the wheel loading its own copy.)
none=$(in_root sh -c 'for l in libgrpc++.so libopencv_core.so libabsl_base.so libturbojpeg.so libprometheus-cpp-core.so; do
  ldconfig -p | grep -q "$l" && echo "$l"; done; dpkg -l "*-dev" 2>/dev/null | grep "^ii" | grep -E "grpc|protobuf|opencv|absl|turbojpeg"')
[ -z "$none" ] && ok "trixie root has none of Stoker's build dependencies (gRPC, OpenCV, Abseil, libjpeg-turbo, prometheus-cpp, their -dev packages)" \
  || fail "the trixie root has libraries Stoker links" "$none"
in_root python3 -m venv --system-site-packages $t/venv >/dev/null
t0=$(date +%s.%N)
if out=$(in_root $t/venv/bin/pip install -q --disable-pip-version-check --no-index $t/wheels/"$(basename "$abi3")" 2>&1); then
  ok "trixie: pip install $(basename "$abi3") into a venv: $(elapsed "$t0") s"
else
  fail "trixie: pip install of the abi3 wheel" "$out"; finish
fi
tsite=$(in_root $t/venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
check_ldd "$(in_root sh -c "ldd $tsite/stoker/_stoker_ext.abi3.so" 2>&1)" "$tsite/stoker" "trixie venv, _stoker_ext.abi3.so"
check_ldd "$(in_root sh -c "ldd $tsite/stoker/stoker-server" 2>&1)" "$tsite/stoker" "trixie venv, stoker-server"
# The FFmpeg 7 module: the root's FFmpeg (and its codecs) resolve, the rest is the wheel's.
out=$(in_root sh -c "ldd $tsite/stoker/libstoker_media_ffmpeg7.so" 2>&1)
echo "$out" | grep -q "libavformat.so.61 => /" && ! echo "$out" | grep -q "not found" \
  && ok "trixie venv, libstoker_media_ffmpeg7.so: the root's FFmpeg 7 resolves ($(echo "$out" | grep -c '=>') libraries)" \
  || fail "trixie venv, libstoker_media_ffmpeg7.so does not resolve" "$out"
# A second venv for the loader; the first venv's stoker-server serves it.
in_root python3 -m venv --system-site-packages $t/venv2 >/dev/null
in_root $t/venv2/bin/pip install -q --disable-pip-version-check --no-index $t/wheels/"$(basename "$abi3")" >/dev/null 2>&1
tsite2=$(in_root $t/venv2/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
out=$(in_root env DATA=$t/data WORK=$t sh $t/serve_and_read.sh $t/venv/bin/stoker-server $t/venv-server.log \
        $t/venv2/bin/python --data-root $t/data --media --expect-site "$tsite2" 2>&1) \
  && ok "trixie: the first venv's stoker-server, the second venv's loader: images (torch and numpy), audio and video, locally and from the server: $(echo "$out" | grep -c '^ok') checks; $(echo "$out" | sed -n 's/^ok: media decoding through //p')" \
  || fail "trixie: venv server and loader" "$out"
out=$(in_root $t/venv/bin/python $t/wheel_epochs.py --servers "$server" --expect-site "$tsite" 2>&1) \
  && ok "trixie: this host's server, torch and numpy: $(echo "$out" | grep -c '^ok') checks; $(echo "$out" | sed -n 's/^ok: \(protobuf copies.*\)/\1/p')" \
  || fail "trixie epochs" "$out"
out=$(in_root $t/venv/bin/pip install -q --disable-pip-version-check --no-index $t/wheels/"$(basename "$grpcio")" 2>&1) \
  || fail "trixie: pip install $(basename "$grpcio")" "$out"
for order in first after; do
  out=$(in_root $t/venv/bin/python $t/wheel_epochs.py --servers "$server" --grpc $order --expect-site "$tsite" 2>&1) \
    && ok "trixie: PyPI's grpcio imported $order stoker and used: $(echo "$out" | grep -c '^ok') checks" \
    || fail "trixie epochs, grpcio imported $order stoker" "$out"
done
# The server tarball, run by path in the trixie root.
dir=$t/$(basename "$tarball" .tar.gz)
helped=0
for tool in stoker-bench stoker-diagnose stoker-materialize stoker-profile stoker-health stoker-storage; do
  # absl's --help exits 1: the output tells that the binary loaded and ran.
  out=$(in_root "$dir/bin/$tool" --help 2>&1)
  echo "$out" | grep -q "Flags from" && helped=$((helped + 1)) || fail "trixie: $tool --help from the tarball" "$out"
done
[ "$helped" -eq 6 ] && ok "trixie: the tarball's six tools load and print their --help"
# The tarball's client library in trixie (none of bookworm's gRPC, protobuf
# or Abseil there): the C program, built here, finds it beside itself.
if cc -std=c99 -O2 -o "$root$t/c_epoch" "$repo/examples/c_epoch/epoch.c" -I"$root$dir/include" -L"$root$dir/lib" \
     -lstoker_client -Wl,-rpath-link,"$root$dir/lib" -Wl,-rpath,"\$ORIGIN/$(basename "$dir")/lib" \
     2>"$work/cc-trixie.log"; then
  out=$(in_root "$t/c_epoch" local_workers=2 data_root=$t/data dataset=ds batch_size=8 device=cpu metrics_port=-1 \
        'pipeline=center_crop(32)' 2>&1)
  echo "$out" | grep -q '^images 64$' \
    && ok "trixie: a C program on the tarball's libstoker_client.so ran an epoch of 64 images in local mode" \
    || fail "trixie: the C program on the tarball's client library" "$out"
else
  fail "cc against the tarball's client library for the trixie root" "$(cat "$work/cc-trixie.log")"
fi
out=$(in_root env DATA=$t/data WORK=$t sh $t/serve_and_read.sh $dir/bin/stoker-server $t/server.log \
        $t/venv/bin/python --frameworks numpy --media --expect-site $tsite 2>&1) \
  && ok "trixie: the tarball's stoker-server served images, audio and video there ($(echo "$out" | grep -c '^ok') checks)" \
  || fail "trixie: the tarball's stoker-server" "$out"
rm -rf "${root:?}$t"
finish
