"""The C and C++ client API reference (docs/reference/cpp-api.md), generated
from the public headers include/stoker/c_api.h and include/stoker/client.h:
each declaration a user calls, in the header's order, with the comment above
it. docs/gen_reference.py writes and checks the page with the others."""

import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
INCLUDE = os.path.join(HERE, "..", "include", "stoker")


def _comment_text(lines):
    """A comment block's prose: markers and leading stars gone."""
    out = []
    for line in lines:
        line = line.strip()
        line = re.sub(r"^/\*+\s?|\s?\*+/$|^\*\s?|^//\s?", "", line)
        out.append(line)
    return " ".join(l for l in out if l).strip()


def _c_items(text):
    """(kind, payload) in order: ("section", title), ("doc", prose), ("code", declaration); a
    typedef'd enum or struct whole."""
    lines = text.splitlines()
    items, comment, i = [], [], 0
    first = True
    while i < len(lines):
        s = lines[i].strip()
        if s.startswith("/*"):
            block = [lines[i]]
            while "*/" not in lines[i]:
                i += 1
                block.append(lines[i])
            comment = [] if first else block  # the file's own comment is the page's job
            first = False
        elif not s or s.startswith("#") or s.startswith("extern") or s.startswith("}"):
            if s.startswith("#define STOKER_ABI_VERSION") or s.startswith("#define STOKER_MAX_DIMS"):
                items.append(("code", s))
            comment = [] if not s else comment
        else:
            decl = [lines[i].rstrip()]
            if s.endswith("{"):  # an enum's or a struct's body, to its closing line
                while not lines[i].startswith("}"):
                    i += 1
                    decl.append(lines[i].rstrip())
            else:
                while not decl[-1].rstrip().endswith(";"):
                    i += 1
                    decl.append(lines[i].strip())
            prose = _comment_text(comment)
            comment = []
            if prose.startswith("---"):
                title, _, prose = prose.strip("- ").partition(" ---")
                items.append(("section", title.strip()))
                prose = prose.strip()
            if prose:
                items.append(("doc", prose))
            items.append(("code", "\n".join(decl) if s.endswith("{") else " ".join(d.strip() for d in decl)))
        i += 1
    return items


def _cpp_items(text):
    """The same for client.h, read by its layout (clang-format's): a class at
    column 0, its access labels at 1, its members at 2 (public ones shown,
    their bodies left out)."""
    lines = text.splitlines()
    items, comment, public, template, i = [], [], False, "", 0
    while i < len(lines):
        line = lines[i].rstrip()
        s = line.strip()
        indent = len(line) - len(line.lstrip())
        if line.startswith("#") or line.endswith("\\") or not s:
            while lines[i].rstrip().endswith("\\"):
                i += 1
            comment = [] if not s else comment
        elif indent == 0 and s.startswith("//"):
            comment.append(line)
        elif indent == 0 and s.startswith("template"):
            template = s + " "
        elif indent == 0 and re.match(r"(class|struct) \w+.*\{$", s):
            name = re.match(r"((class|struct) \w+)", s).group(1)
            items.append(("section", template + name))
            if comment:
                items.append(("doc", _comment_text(comment)))
            comment, template, public = [], "", s.startswith("struct")
        elif indent == 1 and s in ("public:", "private:", "protected:"):
            public, comment = s == "public:", []
        elif indent == 2 and s.startswith("//"):
            comment.append(line)
        elif indent == 2 and not s.startswith("}"):
            decl = [re.sub(r"\s*//.*$", "", s)]
            while not re.search(r"[;{}]$", decl[-1]):
                i += 1
                decl.append(re.sub(r"\s*//.*$", "", lines[i].strip()))
            head = re.sub(r"\s*\{(.*\})?$", "", " ".join(decl))  # an inline body, or a body's start
            head = re.sub(r"\s*:\s*\w+_\(.*$", "", head)  # a constructor's initialisers
            if public and not head.startswith(("template <typename S", "#")):
                if comment:
                    items.append(("doc", _comment_text(comment)))
                items.append(("code", head if head.endswith(";") else head + ";"))
            comment = []
            if decl[-1].endswith("{"):  # skip the body
                while lines[i + 1].rstrip() != "  }":
                    i += 1
                i += 1
        else:
            comment = []
        i += 1
    return items


def _render(items):
    out, code = [], []
    for kind, payload in items + [("end", "")]:
        if kind == "code":
            code.append(payload)
            continue
        if code:
            out.append("```cpp\n" + "\n".join(code) + "\n```\n")
            code = []
        if kind == "section":
            out.append(f"### `{payload}`\n")
        elif kind == "doc":
            out.append(payload + "\n")
    return "\n".join(out)


def page(generated_note):
    c_api = open(os.path.join(INCLUDE, "c_api.h")).read()
    client = open(os.path.join(INCLUDE, "client.h")).read()
    parts = [generated_note, "# C and C++ client API\n",
             "From the public headers, in their order: `stoker/client.h` (the header-only C++17 API) and "
             "`stoker/c_api.h` (the C ABI `libstoker_client.so` exports). How to use them: "
             "[Use from C++](../how-to/use-from-cpp.md), [Use from C](../how-to/use-from-c.md). The options are the "
             "loader's, listed with units and defaults in the [Python reference](python.md).\n",
             "## stoker/client.h\n", _render(_cpp_items(client)),
             "## stoker/c_api.h\n", _render(_c_items(c_api))]
    return "\n".join(parts)
