"""`python -m stoker PROGRAM [ARGS...]`: runs one of the package's programs
(stoker-server, stoker-bench, ...), as its console command does."""

import sys

from ._programs import PROGRAMS, run


def main():
    names = {p: p for p in PROGRAMS} | {p.removeprefix("stoker-"): p for p in PROGRAMS}
    if len(sys.argv) < 2 or sys.argv[1] not in names:
        print("usage: python -m stoker PROGRAM [ARGS...]\nprograms: " + ", ".join(PROGRAMS) +
              "\n(each takes --help)", file=sys.stderr)
        return 2
    run(names[sys.argv[1]], sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
