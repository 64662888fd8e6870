#!/usr/bin/env python3
"""Packs the Python package and the extension a CMake build made into a wheel.

`make wheel` runs this on the build tree (no second compile), then
`auditwheel repair` copies the shared libraries the extension loads into the
wheel under their own names and gives it a manylinux tag. What goes in:

  stoker/*.py                         python/stoker
  stoker/_stoker_ext.<suffix>.so      the extension (stripped)
  stoker/libstoker_spm.so             SentencePiece's module, loaded beside it
  stoker/libstoker_media_ffmpegN.so   the audio and video modules, one per FFmpeg
                                      major version, each loading the host's
                                      FFmpeg (never bundled: Debian's is GPL)
  stoker/stoker-server, ...           the programs (stoker/_programs.py starts
                                      them as the console commands of the same
                                      names), sharing the extension's libraries
  stoker/libstoker_client.so.1        the C ABI for C and C++ training jobs,
                                      repaired here so that `make dist` carries
                                      it with its libraries
  stoker-<version>.dist-info/         METADATA, WHEEL, top_level.txt,
                                      entry_points.txt, RECORD

Usage: make_wheel.py --extension PATH [--spm-module PATH] [--program PATH ...] [--library PATH=NAME ...]
                     [--media-module PATH=NAME ...] --out DIR
                     [--python-tag cp311 --abi-tag cp311]
The tags default to those of the extension's file name (an abi3 extension,
built for Python 3.12+, gives cp312-abi3).
"""

import argparse
import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))


def project():
    with open(os.path.join(HERE, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]


def tags_of(extension):
    """(python tag, abi tag) from the extension's name:
    _stoker_ext.cpython-311-x86_64-linux-gnu.so -> (cp311, cp311);
    _stoker_ext.abi3.so -> (cp312, abi3), the oldest Python nanobind's stable ABI serves."""
    name = os.path.basename(extension)
    m = re.match(r"_stoker_ext\.cpython-(\d+)-", name)
    if m:
        return f"cp{m.group(1)}", f"cp{m.group(1)}"
    if name == "_stoker_ext.abi3.so":
        return "cp312", "abi3"
    raise SystemExit(f"make_wheel: cannot tell the Python version from {name}")


def record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def metadata(meta):
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {meta['name']}",
        f"Version: {meta['version']}",
        f"Summary: {meta['description']}",
        f"Requires-Python: {meta['requires-python']}",
        f"License: {meta['license']['text']}",
        "Description-Content-Type: text/markdown",
    ]
    lines += [f"Requires-Dist: {d}" for d in meta.get("dependencies", [])]
    for extra, deps in sorted(meta.get("optional-dependencies", {}).items()):
        lines.append(f"Provides-Extra: {extra}")
        lines += [f"Requires-Dist: {d}; extra == \"{extra}\"" for d in deps]
    lines.append("")
    with open(os.path.join(HERE, "README.md")) as f:
        lines.append(f.read())
    return "\n".join(lines)


def stripped(path, tmp):
    out = os.path.join(tmp, os.path.basename(path))
    shutil.copy2(path, out)
    subprocess.run(["strip", "--strip-unneeded", out], check=True)
    with open(out, "rb") as f:
        return f.read()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--extension", required=True, help="the built _stoker_ext*.so")
    parser.add_argument("--spm-module", help="the built libstoker_spm.so (caption tokenisation)")
    parser.add_argument("--program", action="append", default=[],
                        help="a built program (stoker-server, ...), a console command of the package")
    parser.add_argument("--media-module", action="append", default=[], metavar="PATH=NAME",
                        help="a built media module and the name it takes in the package (libstoker_media_ffmpeg5.so)")
    parser.add_argument("--library", action="append", default=[], metavar="PATH=NAME",
                        help="a built shared library and its name in the package (libstoker_client.so.1)")
    parser.add_argument("--out", required=True, help="folder the wheel is written to")
    parser.add_argument("--python-tag")
    parser.add_argument("--abi-tag")
    parser.add_argument("--platform", default="linux_x86_64", help="before auditwheel repair: linux_x86_64")
    args = parser.parse_args()

    meta = project()
    python_tag, abi_tag = tags_of(args.extension)
    python_tag, abi_tag = args.python_tag or python_tag, args.abi_tag or abi_tag
    name, version = meta["name"], meta["version"]
    dist_info = f"{name}-{version}.dist-info"
    wheel_name = f"{name}-{version}-{python_tag}-{abi_tag}-{args.platform}.whl"
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, wheel_name)

    files = []
    package = os.path.join(HERE, "stoker")
    for source in sorted(os.listdir(package)):
        if source.endswith(".py"):
            with open(os.path.join(package, source), "rb") as f:
                files.append((f"stoker/{source}", f.read()))
    with tempfile.TemporaryDirectory() as tmp:
        files.append((f"stoker/{os.path.basename(args.extension)}", stripped(args.extension, tmp)))
        if args.spm_module:
            files.append(("stoker/libstoker_spm.so", stripped(args.spm_module, tmp)))
        for spec in args.media_module:
            source, _, target = spec.partition("=")
            files.append((f"stoker/{target or os.path.basename(source)}", stripped(source, tmp)))
        for program in args.program:
            files.append((f"stoker/{os.path.basename(program)}", stripped(program, tmp)))
        for spec in args.library:
            source, _, target = spec.partition("=")
            files.append((f"stoker/{target or os.path.basename(source)}", stripped(source, tmp)))
    programs = [os.path.basename(p) for p in args.program]
    files.append((f"{dist_info}/METADATA", metadata(meta).encode()))
    files.append((f"{dist_info}/WHEEL", (
        "Wheel-Version: 1.0\n"
        "Generator: stoker make_wheel.py\n"
        "Root-Is-Purelib: false\n"
        f"Tag: {python_tag}-{abi_tag}-{args.platform}\n").encode()))
    files.append((f"{dist_info}/top_level.txt", b"stoker\n"))
    if programs:
        # stoker-server = stoker._programs:stoker_server, ...
        scripts = "".join(f"{p} = stoker._programs:{p.replace('-', '_')}\n" for p in programs)
        files.append((f"{dist_info}/entry_points.txt", f"[console_scripts]\n{scripts}".encode()))
    record = [record_line(arcname, data) for arcname, data in files] + [f"{dist_info}/RECORD,,"]
    files.append((f"{dist_info}/RECORD", ("\n".join(record) + "\n").encode()))

    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as whl:
        for arcname, data in files:
            info = zipfile.ZipInfo(arcname, date_time=(2020, 1, 1, 0, 0, 0))
            executable = re.search(r"\.so(\.\d+)*$", arcname) is not None or os.path.basename(arcname) in programs
            info.external_attr = (0o755 if executable else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            whl.writestr(info, data)
    print(path)


if __name__ == "__main__":
    sys.exit(main())
