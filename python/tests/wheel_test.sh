#!/usr/bin/env bash
# The wheels and the server tarball `make wheel` and `make dist` made, tried
# as a user would, here and on another distribution:
#   1. Each wheel: under 30 MB, a manylinux tag from `auditwheel show`, none
#      of the libraries OpenCV's codecs used to pull in (GDAL, HDF5, Poppler,
#      MariaDB, X11, GL).
#   2. This host (bookworm, Python 3.11): the cp311 wheel installed with pip
#      into a fresh venv (timed); `ldd` of the installed extension names no
#      library outside the wheel but glibc's, libstdc++/libgcc_s and the
#      loader; then, with the build's pyenv (PyPI's grpcio, Debian's torch),
#      grpcio imported before and after stoker, both used in one process, and
#      epochs from a stoker-server (torch and numpy).
#   3. A Debian trixie root made with debootstrap (glibc 2.41, Python 3.13,
#      Debian's torch 2.x, none of Stoker's build dependencies), run with
#      unshare + chroot: the abi3 wheel installed with pip into a venv there,
#      ldd checked; epochs in local mode and from this host's stoker-server,
#      with torch and numpy, and again with PyPI's grpcio (cp313) imported
#      first; the server tarball unpacked there, its stoker-server serving an
#      epoch to the same loader and its tools answering --help.
# Where debootstrap or unshare cannot work (no root), step 3 is skipped and
# the test exits 77 (skipped) after the others pass, saying why.
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
max_mb=30
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
  show=$("$pyenv" -m auditwheel show "$whl" 2>&1 | tr -s ' \n' ' ')
  tag=$(echo "$show" | sed -n 's/.*consistent with the following platform tag: "\(manylinux_[0-9_]*x86_64\)".*/\1/p')
  [ -n "$tag" ] && [[ "$name" == *"$tag"* ]] && ok "$name: auditwheel show: $tag" || fail "$name: auditwheel show gave no manylinux tag" "$show"
  unwanted=$(unzip -Z1 "$whl" | grep -E 'gdal|hdf5|poppler|mariadb|libX11|libxcb|libGL[.Xd]|opencv_imgcodecs' || true)
  [ -z "$unwanted" ] && ok "$name carries no GDAL, HDF5, Poppler, MariaDB, X11 or GL ($(unzip -Z1 "$whl" | grep -c '\.so') shared objects)" \
    || fail "$name carries libraries it must not" "$unwanted"
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
/usr/bin/python3 -m venv "$work/venv" >/dev/null
t0=$(date +%s.%N)
if out=$("$work/venv/bin/pip" install -q --disable-pip-version-check --no-index "$cp311" 2>&1); then
  ok "pip install $(basename "$cp311") into a fresh venv: $(elapsed "$t0") s"
else
  fail "pip install of the cp311 wheel" "$out"
fi
site=$("$work/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
check_ldd "$(ldd "$site"/stoker/_stoker_ext*.so 2>&1)" "$site/stoker" "bookworm venv, $(basename "$site"/stoker/_stoker_ext*.so)"
check_ldd "$(ldd "$site"/stoker/libstoker_spm.so 2>&1)" "$site/stoker" "bookworm venv, libstoker_spm.so"
out=$(cd "$work" && "$work/venv/bin/python" -c 'import stoker, sys; assert "torch" not in sys.modules; print(stoker.__file__)' 2>&1) \
  && ok "import stoker in a venv without torch, numpy or Debian's packages ($out)" || fail "import stoker in a bare venv" "$out"

"$build/tests/stoker-make-images" --out="$work/data/ds" --classes=4 --per-class=16 --min-side=48 --max-side=96 --seed=1
# A stoker-server on 127.0.0.1 (a free port), stopped at exit.
"$build/server/stoker-server" --host=127.0.0.1 --port=0 --metrics-port=-1 --data-root="$work/data" --workers=2 \
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
  out=$(cd "$work" && PYTHONPATH="$work/site" "$pyenv" "$repo/python/tests/wheel_epochs.py" --servers "$server" \
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
packages="python3 python3-venv python3-torch python3-numpy"
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
cp "$repo/python/tests/wheel_epochs.py" "$root$t/" && cp -r "$work/data" "$root$t/data"
tar -C "$root$t" -xzf "$tarball"
info=$(in_root /usr/bin/env python3 -c 'import platform, sys, torch; print(f"Python {sys.version.split()[0]}, glibc {platform.libc_ver()[1]}, torch {torch.__version__}")' 2>/dev/null)
ok "trixie root: $info"
# None of Stoker's build dependencies. (Debian's torch does bring a
# libprotobuf.so.32 of its own, loaded in the same process as the wheel's.)
none=$(in_root sh -c 'for l in libgrpc++.so libopencv_core.so libabsl_base.so libturbojpeg.so libjpeg.so.62 libprometheus-cpp-core.so; do
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
out=$(in_root $t/venv/bin/python $t/wheel_epochs.py --servers "$server" --data-root $t/data --expect-site "$tsite" 2>&1) \
  && ok "trixie: local mode and this host's server, torch and numpy: $(echo "$out" | grep -c '^ok') checks; $(echo "$out" | sed -n 's/^ok: \(protobuf copies.*\)/\1/p')" \
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
for tool in stoker-bench stoker-diagnose stoker-materialize stoker-profile stoker-health; do
  # absl's --help exits 1: the output tells that the binary loaded and ran.
  out=$(in_root "$dir/bin/$tool" --help 2>&1)
  echo "$out" | grep -q "Flags from" && helped=$((helped + 1)) || fail "trixie: $tool --help from the tarball" "$out"
done
[ "$helped" -eq 5 ] && ok "trixie: the tarball's five tools load and print their --help"
out=$(in_root sh -c "$dir/bin/stoker-server --host=127.0.0.1 --port=0 --metrics-port=-1 --data-root=$t/data --workers=2 \
        >$t/server.log 2>&1 & for i in \$(seq 1 100); do
        port=\$(sed -n 's/.*listening on [0-9.]*:\([0-9]*\).*/\1/p' $t/server.log | head -1); [ -n \"\$port\" ] && break; sleep 0.1; done
      $t/venv/bin/python $t/wheel_epochs.py --servers 127.0.0.1:\$port --frameworks numpy --expect-site $tsite; rc=\$?
      kill \$!; wait; exit \$rc" 2>&1) \
  && ok "trixie: the tarball's stoker-server served an epoch there ($(echo "$out" | grep -c '^ok') checks)" \
  || fail "trixie: the tarball's stoker-server" "$out$(cat "$root$t/server.log" 2>/dev/null | tail -5)"
rm -rf "${root:?}$t"
finish
