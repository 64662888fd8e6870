#!/usr/bin/python3
"""Checks the include order the folders declare (tools/layers.txt).

The file lists, section by section, the folders of one level of the tree
from the bottom up: `[.]` the repository's top-level folders, `[dataplane]`
the parts of dataplane/. A line is one level; folders on one line are
siblings. A source file (.h, .cc, .cu) may include headers of its own folder
and of folders on lower lines, never of its own line's siblings or of a line
above it. An include of a folder the section does not list, a source file in
a folder the section does not list, or a source directly in a sectioned
folder's root (every file belongs to a part) is an error too.

Usage:
  check_layers.py [--root DIR] [--layers FILE]   check the tree; exit 1 on a violation
  check_layers.py --self-test                    show that a back-edge and a cycle fail

Tests beside the code (`*_test.cc`) are held to the order too, except for
what a section's `tests may use:` line names: folders (or `*`, any folder of
the section) their includes may reach whatever the order says. A test drives
its subject through whatever it needs (a fixture, a session).
"""
import argparse
import os
import re
import sys
import tempfile

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SOURCE_SUFFIXES = ('.h', '.cc', '.cu', '.cuh', '.c')
TESTS_MAY_USE = 'tests may use:'
TESTS = ' tests'  # not a folder name


def parse_layers(text):
    """Returns {section: {folder: level}} from the layers file's text; a
    section's `tests may use:` list is kept under the key TESTS."""
    sections = {}
    current = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split('#', 1)[0].strip()
        if not line:
            continue
        if line.startswith('['):
            if not line.endswith(']'):
                raise ValueError(f'line {number}: a section is written [folder]: {raw!r}')
            current = line[1:-1].strip()
            if current in sections:
                raise ValueError(f'line {number}: section [{current}] twice')
            sections[current] = {}
            continue
        if current is None:
            raise ValueError(f'line {number}: folders before the first [section]')
        levels = sections[current]
        if line.startswith(TESTS_MAY_USE):
            levels[TESTS] = line[len(TESTS_MAY_USE):].split()
            continue
        level = len(set(levels.values()))
        for folder in line.split():
            if folder in levels:
                raise ValueError(f'line {number}: {folder} listed twice in [{current}]')
            levels[folder] = level
    return sections


def source_files(root, section):
    base = os.path.join(root, section) if section != '.' else root
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = [d for d in dirnames if not d.startswith('.') and not d.startswith('build')]
        for name in filenames:
            if name.endswith(SOURCE_SUFFIXES):
                yield os.path.relpath(os.path.join(dirpath, name), base)


def check(root, sections):
    """Returns the list of violations, each a line naming the file and the include."""
    problems = []
    for section, levels in sections.items():
        test_reach = levels.get(TESTS, [])
        levels = {k: v for k, v in levels.items() if k != TESTS}
        prefix = '' if section == '.' else section + '/'
        for rel in sorted(source_files(root, section)):
            parts = rel.split(os.sep)
            if len(parts) == 1:
                if section != '.':
                    problems.append(f'{prefix}{rel}: in no part of {section}/ (move it into one of {sorted(levels)})')
                continue
            folder = parts[0]
            if folder not in levels:
                if section != '.':
                    problems.append(f'{prefix}{rel}: folder {prefix}{folder}/ is not declared in [{section}]')
                continue
            with open(os.path.join(root, prefix + rel), encoding='utf-8', errors='replace') as f:
                text = f.read()
            is_test = parts[-1].endswith('_test.cc')
            for match in INCLUDE.finditer(text):
                include = match.group(1)
                if is_test and ('*' in test_reach or any(include.startswith(prefix + t + '/') for t in test_reach)):
                    continue
                if section != '.':
                    if not include.startswith(prefix):
                        continue
                    rest = include[len(prefix):].split('/')
                    if len(rest) == 1:
                        problems.append(f'{prefix}{rel}: includes "{include}", which is in no part of {section}/')
                        continue
                    target = rest[0]
                else:
                    target = include.split('/')[0]
                    if '/' not in include or target not in levels:
                        continue  # a library's header (absl/, grpcpp/, ...) or a file of the folder itself
                if target == folder:
                    continue
                if target not in levels:
                    problems.append(f'{prefix}{rel}: includes "{include}" of {prefix}{target}/, '
                                    f'which [{section}] does not declare')
                elif levels[target] >= levels[folder]:
                    how = 'a sibling' if levels[target] == levels[folder] else 'a folder above it'
                    problems.append(f'{prefix}{rel}: includes "{include}": {prefix}{target}/ is {how} of '
                                    f'{prefix}{folder}/ in tools/layers.txt')
    return problems


def self_test():
    """A tree with a back-edge, one with a sibling include and one with a cycle must fail; a clean one passes."""
    layers = parse_layers('[.]\nlow\nmid\nhigh\ntests may use: high/fixture\n[mid]\na\nb c\n')
    cases = {
        'clean': ({'low/x.h': '', 'mid/a/y.h': '#include "low/x.h"\n', 'mid/b/z.cc': '#include "mid/a/y.h"\n',
                   'high/w.cc': '#include "mid/b/z.h"\n#include "absl/status/status.h"\n'}, 0),
        'back-edge': ({'low/x.h': '#include "high/w.h"\n', 'high/w.h': ''}, 1),
        'sibling': ({'mid/b/z.cc': '#include "mid/c/q.h"\n', 'mid/c/q.h': ''}, 1),
        'cycle': ({'mid/a/y.h': '#include "mid/b/z.h"\n', 'mid/b/z.h': '#include "mid/a/y.h"\n'}, 1),
        'undeclared part': ({'mid/d/u.h': ''}, 1),
        'loose file': ({'mid/loose.cc': ''}, 1),
        'test fixture': ({'low/x_test.cc': '#include "high/fixture/f.h"\n', 'low/y_test.cc': '#include "high/w.h"\n'}, 1),
    }
    failed = False
    for name, (files, expected) in cases.items():
        with tempfile.TemporaryDirectory() as root:
            for path, text in files.items():
                os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
                with open(os.path.join(root, path), 'w') as f:
                    f.write(text)
            found = check(root, layers)
        if len(found) != expected:
            print(f'self-test {name}: expected {expected} violation(s), found {found}')
            failed = True
        else:
            print(f'self-test {name}: ok ({found[0] if found else "no violation"})')
    return 1 if failed else 0


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--root', default=os.path.dirname(here), help='the source tree (default: this checkout)')
    parser.add_argument('--layers', default=None, help='the declaration (default: ROOT/tools/layers.txt)')
    parser.add_argument('--self-test', action='store_true', help='check the checker on small made-up trees')
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    layers_path = args.layers or os.path.join(args.root, 'tools', 'layers.txt')
    with open(layers_path, encoding='utf-8') as f:
        sections = parse_layers(f.read())
    problems = check(args.root, sections)
    for p in problems:
        print(p)
    counted = {s: len([k for k in v if k != TESTS]) for s, v in sections.items()}
    if problems:
        print(f'{len(problems)} include(s) against the declared order ({layers_path})')
        return 1
    print(f'layering ok: {counted} folders per section, every include downward')
    return 0


if __name__ == '__main__':
    sys.exit(main())
