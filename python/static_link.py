#!/usr/bin/env python3
"""Link launcher for the extension (CMake's RULE_LAUNCH_LINK): runs the link
command CMake wrote, with Debian's shared libraries replaced by their static
archives for the dependencies listed below, inside one group.

Linked this way, gRPC, OpenSSL, OpenCV and the codecs become part of
_stoker_ext's own code, and its version script (src/exports.map, with
--exclude-libs,ALL) keeps every one of their symbols local: a process that
has loaded another gRPC (PyPI's grpcio), OpenSSL or OpenCV sees none of ours,
and the OpenCV archives bring no GUI, GL or codec libraries with them.

What stays shared is what Debian builds without position-independent code
in its archives (Abseil, protobuf, RE2, libjpeg, libpng, libtiff, gflags: the
linker refuses them in a shared object), prometheus-cpp, which has no
archive, and glog: a static glog would register its flags in the shared
gflags that Debian's torch also loads with its own glog, and gflags aborts
on the second registration. `auditwheel repair` bundles those under their own names; Debian's
Abseil also carries its own inline namespace (absl::debian3), so it cannot
meet another Abseil's symbols either.
"""

import os
import re
import subprocess
import sys

LIBDIR = "/usr/lib/x86_64-linux-gnu"
STATIC = (
    "opencv_core", "opencv_imgproc", "grpc++", "grpc", "gpr", "upb", "address_sorting", "cares",
    "ssl", "crypto", "z", "xxhash", "zstd", "lz4", "webp",
)

# What the archives need that their shared builds named as NEEDED: TBB and
# LAPACK/BLAS (OpenCV's core). Shared, bundled by auditwheel.
ARCHIVES_NEED = ("-Wl,--push-state,--as-needed", "-ltbb", "-llapack", "-lblas", "-ldl", "-lpthread", "-Wl,--pop-state")


def main():
    command = sys.argv[1:]
    kept, archives, at = [], [], None
    for arg in command:
        m = re.fullmatch(re.escape(LIBDIR) + r"/lib(.+?)\.so(\.[0-9.]+)?", arg) or re.fullmatch(r"-l(.+)", arg)
        archive = f"{LIBDIR}/lib{m.group(1)}.a" if m else None
        if m and m.group(1) in STATIC and os.path.exists(archive):
            if archive not in archives:
                archives.append(archive)
            at = len(kept) if at is None else at
            continue
        kept.append(arg)
    if archives:
        # The group where the first of them was, so that the shared libraries
        # after it (Abseil, protobuf) still serve its references when the
        # linker drops unneeded ones (--as-needed).
        kept[at:at] = ["-Wl,--start-group", *archives, "-Wl,--end-group", *ARCHIVES_NEED]
    return subprocess.call(kept)


if __name__ == "__main__":
    sys.exit(main())
