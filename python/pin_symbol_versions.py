#!/usr/bin/env python3
"""Copies a shared library and rebinds named C++ runtime symbols to an older
symbol version that the same libstdc++ also exports, so that the copy needs
no newer libstdc++ than the packages promise (manylinux_2_34: GLIBCXX_3.4.29).

Debian bookworm's GCC 12 gives std::condition_variable::wait(unique_lock&)
a new default version (GLIBCXX_3.4.30) and keeps the same function under
GLIBCXX_3.4.11; OpenCV's core library is the one library the programs load
that needs 3.4.30, for that symbol alone. The copy's version-needed entry is
renamed to GLIBCXX_3.4.11 (name and hash; the name is already in .dynstr)
after checking that no other symbol uses it; anything else is refused.

Usage: pin_symbol_versions.py LIBRARY OUT_DIR
Writes OUT_DIR/<basename of LIBRARY> and prints what it rebound.
"""

import os
import shutil
import struct
import sys

from elftools.elf.elffile import ELFFile

# symbol -> (version it needs, version it is rebound to)
PINS = {
    "_ZNSt18condition_variable4waitERSt11unique_lockISt5mutexE": ("GLIBCXX_3.4.30", "GLIBCXX_3.4.11"),
}


def elf_hash(name):
    h = 0
    for c in name.encode():
        h = ((h << 4) + c) & 0xFFFFFFFF
        g = h & 0xF0000000
        if g:
            h ^= g >> 24
        h &= ~g & 0xFFFFFFFF
    return h


def main():
    source, out_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    target = os.path.join(out_dir, os.path.basename(source))
    shutil.copy(os.path.realpath(source), target)
    with open(target, "r+b") as f:
        elf = ELFFile(f)
        dynsym = elf.get_section_by_name(".dynsym")
        versym = elf.get_section_by_name(".gnu.version")
        verneed = elf.get_section_by_name(".gnu.version_r")
        dynstr = elf.get_section_by_name(".dynstr")
        if not (dynsym and versym and verneed and dynstr) or elf.elfclass != 64 or not elf.little_endian:
            raise SystemExit(f"pin_symbol_versions: {source}: not a 64-bit little-endian library with versions")
        strtab = dynstr.data()
        # Version index -> the symbols that use it.
        users = {}
        for i, sym in enumerate(dynsym.iter_symbols()):
            users.setdefault(versym.get_symbol(i)["ndx"], []).append(sym.name)
        # Walk the version-needed entries: (file offset of the aux entry, index, name).
        base = verneed["sh_offset"]
        data = verneed.data()
        at, rebound = 0, []
        for _ in range(verneed["sh_info"]):
            _, count, _, aux, nxt = struct.unpack_from("<HHIII", data, at)
            a = at + aux
            for _ in range(count):
                _, flags, other, name_off, anext = struct.unpack_from("<IHHII", data, a)
                name = strtab[name_off:strtab.index(b"\0", name_off)].decode()
                pinned = {s for s, (old, _) in PINS.items() if old == name}
                if pinned:
                    syms = set(users.get(other, []))
                    if not syms <= pinned:
                        raise SystemExit(f"pin_symbol_versions: {source}: {name} is needed by other symbols too: "
                                         f"{sorted(syms - pinned)[:5]}")
                    new = PINS[next(iter(pinned))][1]
                    key = b"\0" + new.encode() + b"\0"
                    pos = strtab.find(key)
                    if pos < 0:
                        raise SystemExit(f"pin_symbol_versions: {source}: {new} is not in .dynstr")
                    f.seek(base + a)
                    f.write(struct.pack("<IHHI", elf_hash(new), flags, other, pos + 1))
                    rebound.append(f"{', '.join(sorted(syms))}: {name} -> {new}")
                if anext == 0:
                    break
                a += anext
            if nxt == 0:
                break
            at += nxt
    print(f"pin_symbol_versions: {os.path.basename(source)}: " + ("; ".join(rebound) or "nothing to rebind"))


if __name__ == "__main__":
    sys.exit(main())
