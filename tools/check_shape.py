#!/usr/bin/python3
"""Checks the size of what a reader must hold: source files and functions.

- a source file (.cc, .h, .cu; a header and its .cc counted apart) has at
  most --max-file-lines lines (600);
- a function has at most --max-function-lines lines (120), but for the
  functions tools/shape_exceptions.txt names: tables of data (a family's
  registry entries, the metric declarations, the binding's table) that may
  stay long, and, marked `split-pending`, those still to be split, each with
  the length it may not grow past.

A function is found as Google style writes it: a definition that starts at
the line's first column (not a declaration, not inside a class body) and
ends at the first later line that is `}` alone at the first column; lambdas
and local classes count in the function that holds them.

Usage:
  check_shape.py [--root DIR]      check the tree; exit 1 on a file or function too long
  check_shape.py --list [--root]   print every function over the limit, longest first
  check_shape.py --self-test       show the finder on made-up sources
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

SUFFIXES = ('.cc', '.h', '.cu', '.cuh')
# A definition's first line: at column 0, a name and '(' ... not a statement or a preprocessor line.
START = re.compile(r'^(?![#/ \t}{])(?!(namespace|class|struct|enum|union|using|typedef|template|extern|static_assert|return|ABSL_[A-Z_]+)\b)'
                   r'[^;=]*?\b([A-Za-z_][\w:~<>,\s*&]*?)\s*\(')
NAME = re.compile(r'([~A-Za-z_][\w]*(?:::[~A-Za-z_]\w*)*)\s*\((?!\*)')


def tracked_sources(root):
    try:
        out = subprocess.run(['git', '-C', root, 'ls-files'], check=True, capture_output=True, text=True).stdout
        files = out.split()
    except (OSError, subprocess.CalledProcessError):
        files = []
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames if not d.startswith('.') and not d.startswith('build')]
            files += [os.path.relpath(os.path.join(dirpath, n), root) for n in filenames]
    return sorted(f for f in files if f.endswith(SUFFIXES) and os.path.isfile(os.path.join(root, f)))


def functions(lines):
    """Yields (name, first line number, length) of each function defined at column 0."""
    i = 0
    while i < len(lines):
        line = lines[i]
        if START.match(line) and not line.rstrip().endswith(';'):
            # The signature runs to the line that opens the body (or ends a declaration).
            j = i
            while j < len(lines) and '{' not in lines[j] and not lines[j].rstrip().endswith(';'):
                j += 1
            if j < len(lines) and '{' in lines[j] and not lines[j].rstrip().endswith(';'):
                body_is_one_line = lines[j].rstrip().endswith('}') and lines[j].count('{') == lines[j].count('}')
                end = j
                if not body_is_one_line:
                    end = j + 1
                    while end < len(lines) and not lines[end].startswith('}'):
                        end += 1
                m = NAME.search(' '.join(lines[i:j + 1]))
                name = m.group(1) if m else lines[i].strip()[:40]
                yield name, i + 1, end - i + 1
                i = end + 1
                continue
        i += 1


def parse_exceptions(path):
    """{(file, function): (kind, max lines)} from the exceptions file."""
    allowed = {}
    if not os.path.exists(path):
        return allowed
    with open(path, encoding='utf-8') as f:
        for number, raw in enumerate(f, 1):
            line = raw.split('#', 1)[0].strip()
            if not line:
                continue
            fields = line.split()
            if len(fields) != 4 or fields[2] not in ('table', 'split-pending'):
                raise ValueError(f'{path}:{number}: write FILE FUNCTION table|split-pending MAX_LINES: {raw!r}')
            allowed[(fields[0], fields[1])] = (fields[2], int(fields[3]))
    return allowed


def check(root, max_file, max_function, allowed):
    problems, long_functions = [], []
    seen = set()
    for rel in tracked_sources(root):
        with open(os.path.join(root, rel), encoding='utf-8', errors='replace') as f:
            lines = f.read().split('\n')
        if lines and lines[-1] == '':
            lines.pop()
        if len(lines) > max_file:
            problems.append(f'{rel}: {len(lines)} lines; at most {max_file} (split it by what its parts do)')
        for name, first, length in functions(lines):
            if length <= max_function:
                continue
            long_functions.append((length, rel, name, first))
            key = (rel, name)
            if key in allowed:
                seen.add(key)
                kind, limit = allowed[key]
                if length > limit:
                    problems.append(f'{rel}:{first}: {name} has {length} lines, past the {limit} '
                                    f'tools/shape_exceptions.txt allows it ({kind})')
                continue
            problems.append(f'{rel}:{first}: {name} has {length} lines; at most {max_function} '
                            f'(split it, or name a table of data in tools/shape_exceptions.txt)')
    for key in sorted(set(allowed) - seen):
        problems.append(f'tools/shape_exceptions.txt: {key[0]} {key[1]} is no longer over {max_function} lines '
                        f'(or is gone): take it off the list')
    return problems, sorted(long_functions, reverse=True)


def self_test():
    source = '\n'.join([
        '#include "x.h"', 'namespace a {', 'int Short(int x) {', '  return x;', '}', '',
        'absl::Status Thing::Long(', '    int y) {'] + ['  ++y;'] * 10 + ['  auto f = [] {', '    return 1;', '  };', '}', '',
        'int Declared(int);', 'ABSL_FLAG(int, f, 0,', '          "help {with braces}");', 'inline int OneLine() { return 1; }', 'struct S {', '  int Member() {', '    return 2;', '  }', '};',
        '}  // namespace a', ''])
    found = list(functions(source.split('\n')))
    expected = [('Short', 3, 3), ('Thing::Long', 7, 16), ('OneLine', 27, 1)]
    ok = found == expected
    print(f'self-test functions: {"ok" if ok else "FAILED"} (found {found}, expected {expected})')
    with tempfile.TemporaryDirectory() as root:
        with open(os.path.join(root, 'big.cc'), 'w') as f:
            f.write('\n'.join(['int Big() {'] + ['  ;'] * 130 + ['}']) + '\n')
        problems, _ = check(root, 600, 120, {})
        caught = len(problems) == 1 and 'Big has 132 lines' in problems[0]
        print(f'self-test limit: {"ok" if caught else "FAILED"} ({problems})')
        problems, _ = check(root, 600, 120, {('big.cc', 'Big'): ('table', 140)})
        allowed = problems == []
        print(f'self-test exception: {"ok" if allowed else "FAILED"} ({problems})')
        problems, _ = check(root, 100, 200, {})
        too_big = len(problems) == 1 and 'big.cc: 132 lines' in problems[0]
        print(f'self-test file: {"ok" if too_big else "FAILED"} ({problems})')
    return 0 if ok and caught and allowed and too_big else 1


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--root', default=os.path.dirname(here), help='the source tree (default: this checkout)')
    parser.add_argument('--max-file-lines', type=int, default=600, help='lines a source file may have (600)')
    parser.add_argument('--max-function-lines', type=int, default=120, help='lines a function may have (120)')
    parser.add_argument('--list', action='store_true', help='print every function over the limit, longest first')
    parser.add_argument('--self-test', action='store_true', help='check the checker on made-up sources')
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    allowed = parse_exceptions(os.path.join(args.root, 'tools', 'shape_exceptions.txt'))
    problems, long_functions = check(args.root, args.max_file_lines, args.max_function_lines, allowed)
    if args.list:
        for length, rel, name, first in long_functions:
            print(f'{length:5d}  {rel}:{first}  {name}')
        return 0
    for p in problems:
        print(p)
    if problems:
        print(f'{len(problems)} problem(s) of shape')
        return 1
    print(f'shape ok: no file over {args.max_file_lines} lines, no function over {args.max_function_lines} '
          f'but the {len(allowed)} tools/shape_exceptions.txt names')
    return 0


if __name__ == '__main__':
    sys.exit(main())
