"""libstoker_client.so exports the C ABI and nothing else: `nm -D
--defined-only` lists exactly the functions include/stoker/c_api.h declares
(each at the version node STOKER_CLIENT_1) and the node itself; the header
compiles alone as C99 and as C++17 with no include path but its own folder.

Usage: c_api_exports_test.py LIBRARY HEADER"""

import re
import subprocess
import sys
import tempfile


def declared(header_text):
    text = re.sub(r"/\*.*?\*/", " ", header_text, flags=re.S)  # comments name functions too
    text = re.sub(r"^\s*#.*$", " ", text, flags=re.M)
    return set(re.findall(r"\b(stoker_[a-z0-9_]+)\s*\(", text))


def exported(library):
    out = subprocess.run(["nm", "-D", "--defined-only", library], check=True, capture_output=True, text=True).stdout
    symbols = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3:
            name, _, version = parts[2].partition("@")
            symbols[name] = version.lstrip("@")
    return symbols


def main():
    library, header = sys.argv[1], sys.argv[2]
    functions = declared(open(header).read())
    symbols = exported(library)
    problems = []
    if len(functions) < 25:
        problems.append(f"only {len(functions)} functions read from {header}")
    extra = sorted(set(symbols) - functions - {"STOKER_CLIENT_1"})
    missing = sorted(functions - set(symbols))
    if extra:
        problems.append(f"exported but not in the ABI: {extra[:20]} ({len(extra)})")
    if missing:
        problems.append(f"declared but not exported: {missing}")
    unversioned = sorted(n for n, v in symbols.items() if n in functions and v != "STOKER_CLIENT_1")
    if unversioned:
        problems.append(f"not at version STOKER_CLIENT_1: {unversioned}")
    include = header.rsplit("/stoker/", 1)[0]
    with tempfile.TemporaryDirectory() as tmp:
        for compiler, flags, source in (("cc", ["-std=c99", "-x", "c"], "a.c"), ("c++", ["-std=c++17", "-x", "c++"], "a.cc")):
            path = f"{tmp}/{source}"
            with open(path, "w") as f:
                f.write('#include "stoker/c_api.h"\nint check(void) { return STOKER_ABI_VERSION; }\n')
            r = subprocess.run([compiler, *flags, "-Wall", "-Wextra", "-Werror", "-pedantic", "-fsyntax-only",
                                "-I" + include, path],
                               capture_output=True, text=True)
            if r.returncode != 0:
                problems.append(f"{compiler} {' '.join(flags)}: the header does not compile alone:\n{r.stderr}")
    if problems:
        print("\n".join(problems))
        return 1
    print(f"ok: {len(functions)} ABI functions exported at STOKER_CLIENT_1, nothing else; the header compiles alone")
    return 0


if __name__ == "__main__":
    sys.exit(main())
