#!/usr/bin/env python3
"""After `auditwheel repair`: bundles the libraries the manylinux policy lets
a wheel take from the system (zlib, ...) but a minimal container may lack, in
the way auditwheel bundles the others: copied into stoker.libs under a name
with a hash of their content, with their SONAME and every NEEDED entry that
named them rewritten (patchelf), so that only glibc, the C++ runtime and the
loader are left to the host. The wheel's RECORD is rewritten.

Usage: bundle_system_libs.py WHEEL [SONAME...]
Without SONAMEs: every library an ELF file of the wheel needs that the wheel
does not carry, but glibc's, the C++ runtime's and the loader.
"""

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import re
import zipfile

# What the host provides: glibc's libraries, the C++ runtime and the loader;
# and FFmpeg, which the media modules load from the host (Debian's is GPL).
HOST = re.compile(r"^(libc|libm|libpthread|libdl|librt|libresolv|libutil|libstdc\+\+|libgcc_s)\.so\.[0-9]+$|^ld-linux"
                  r"|^lib(avformat|avcodec|avutil|swresample|swscale|avdevice|avfilter|postproc)\.so\.[0-9]+$")


def resolve(soname):
    """The path the dynamic loader would use for `soname` (ldconfig's cache)."""
    out = subprocess.run(["/sbin/ldconfig", "-p"], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        parts = line.strip().split(" => ")
        if len(parts) == 2 and parts[0].split(" ")[0] == soname and "x86-64" in parts[0]:
            return parts[1]
    raise SystemExit(f"bundle_system_libs: {soname} is not in ldconfig's cache")


def is_elf(path):
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def needed(path):
    out = subprocess.run(["patchelf", "--print-needed", path], capture_output=True, text=True)
    return out.stdout.split() if out.returncode == 0 else []


def record_line(root, arcname):
    with open(os.path.join(root, arcname), "rb") as f:
        data = f.read()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def main():
    wheel, sonames = sys.argv[1], sys.argv[2:]
    with tempfile.TemporaryDirectory() as tmp:
        with zipfile.ZipFile(wheel) as z:
            names = z.namelist()
            z.extractall(tmp)
            modes = {i.filename: i.external_attr for i in z.infolist()}
        libs_dir = next(n.split("/")[0] for n in names if n.split("/")[0].endswith(".libs"))
        elfs = [n for n in names if not n.endswith("/") and is_elf(os.path.join(tmp, n))]  # modules and programs
        explicit = bool(sonames)
        done = set()
        while True:
            # Until nothing is left: a bundled library's own needs are bundled too.
            if not explicit:
                carried = {os.path.basename(n) for n in elfs}
                sonames = sorted({lib for n in elfs for lib in needed(os.path.join(tmp, n))
                                  if lib not in carried and not HOST.match(lib)} - done)
            if not sonames:
                break
            for soname in sonames:
                done.add(soname)
                users = [n for n in elfs if soname in needed(os.path.join(tmp, n))]
                if not users:
                    continue
                source = resolve(soname)
                with open(source, "rb") as f:
                    digest = hashlib.sha256(f.read()).hexdigest()[:8]
                stem, ext = soname.split(".so", 1)
                new = f"{stem}-{digest}.so{ext}"
                arcname = f"{libs_dir}/{new}"
                shutil.copy(source, os.path.join(tmp, arcname))
                subprocess.run(["patchelf", "--set-soname", new, os.path.join(tmp, arcname)], check=True)
                subprocess.run(["patchelf", "--set-rpath", "$ORIGIN", os.path.join(tmp, arcname)], check=True)
                for user in users:
                    subprocess.run(["patchelf", "--replace-needed", soname, new, os.path.join(tmp, user)], check=True)
                names.append(arcname)
                elfs.append(arcname)
                modes[arcname] = 0o755 << 16
                print(f"bundle_system_libs: {soname} -> {arcname} (for {len(users)} libraries)")
            if explicit:
                break
        record = next(n for n in names if n.endswith(".dist-info/RECORD"))
        lines = [record_line(tmp, n) for n in names if n != record and not n.endswith("/")] + [f"{record},,"]
        with open(os.path.join(tmp, record), "w") as f:
            f.write("\n".join(lines) + "\n")
        out = wheel + ".tmp"
        with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as z:
            for n in names:
                if n.endswith("/"):
                    continue
                info = zipfile.ZipInfo(n, date_time=(2020, 1, 1, 0, 0, 0))
                info.external_attr = modes.get(n, 0o644 << 16)
                info.compress_type = zipfile.ZIP_DEFLATED
                with open(os.path.join(tmp, n), "rb") as f:
                    z.writestr(info, f.read())
        os.replace(out, wheel)


if __name__ == "__main__":
    sys.exit(main())
