"""libstoker_client.so exports the C ABI and nothing else: `nm -D
--defined-only` lists exactly the functions include/stoker/c_api.h declares
(each at the version node STOKER_CLIENT_1) and the node itself; c_api.h
compiles alone as C99 and C++17, client.h as C++17 with either standard
library ABI, with no include path but their own folder.

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
        cases = (("cc", ["-std=c99", "-x", "c"], "c_api.h"), ("c++", ["-std=c++17", "-x", "c++"], "c_api.h"),
                 ("c++", ["-std=c++17", "-x", "c++"], "client.h"),
                 ("c++", ["-std=c++17", "-x", "c++", "-D_GLIBCXX_USE_CXX11_ABI=0"], "client.h"))
        for n, (compiler, flags, name) in enumerate(cases):
            path = f"{tmp}/a{n}.{'c' if compiler == 'cc' else 'cc'}"
            with open(path, "w") as f:
                f.write(f'#include "stoker/{name}"\nint check(void) {{ return STOKER_ABI_VERSION; }}\n')
            r = subprocess.run([compiler, *flags, "-Wall", "-Wextra", "-Werror", "-pedantic", "-fsyntax-only",
                                "-I" + include, path],
                               capture_output=True, text=True)
            if r.returncode != 0:
                problems.append(f"{compiler} {' '.join(flags)}: stoker/{name} does not compile alone:\n{r.stderr}")
                continue
            # Its include closure: the standard library's and its own folder's only.
            deps = subprocess.run([compiler, *flags, "-M", "-I" + include, path], capture_output=True,
                                  text=True).stdout
            foreign = sorted({w for w in deps.split() if re.search(r"grpc|google/protobuf|/absl/|opencv|nlohmann", w)})
            if foreign:
                problems.append(f"stoker/{name} pulls in {foreign[:5]}")
    if problems:
        print("\n".join(problems))
        return 1
    print(f"ok: {len(functions)} ABI functions exported at STOKER_CLIENT_1, nothing else; c_api.h and client.h compile alone")
    return 0


if __name__ == "__main__":
    sys.exit(main())
