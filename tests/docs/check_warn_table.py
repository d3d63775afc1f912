#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""docs/deploy.md's troubleshooting table must have a row for every WARN the plugin can print.

    check_warn_table.py SRC_DIR DEPLOY_MD          (test warn_table_lists_every_warn, label unit)
    check_warn_table.py --list SRC_DIR             prints every WARN format with its file:line

A WARN is a MESH_WARN(...) call in SRC_DIR (the library's code; src/tools prints no WARN of its
own). Its key is its printf format: the adjacent string literals of the call's first argument,
joined, with runs of white space made one space. A row of the table (section "Troubleshooting")
documents the WARNs named by the `backticked` formats in its first cell:
  * `FORMAT`            exactly that format;
  * `BEGINNING…`        every format that starts with BEGINNING (at least 30 characters, so a
                        short, generic beginning cannot document WARNs added later).
Fails, naming each one, for a WARN without a row (with the text to put in the new row's first
cell) and for a row whose format no WARN has any more (changed or removed WARN: update the row).
"""
import pathlib
import re
import sys

MIN_PREFIX = 30
ELLIPSIS = "\u2026"


def skip_space_and_comments(text, i):
    while i < len(text):
        if text[i].isspace():
            i += 1
        elif text.startswith("//", i):
            i = text.find("\n", i)
            i = len(text) if i < 0 else i
        elif text.startswith("/*", i):
            i = text.find("*/", i)
            i = len(text) if i < 0 else i + 2
        else:
            break
    return i


def read_literal(text, i):
    """The C string literal starting at text[i] == '"': (its characters, index after it)."""
    out = []
    i += 1
    while i < len(text) and text[i] != '"':
        if text[i] == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            out.append({"n": "\n", "t": "\t", '"': '"', "\\": "\\", "'": "'"}.get(nxt, "\\" + nxt))
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out), i + 1


def warn_formats(src_dir):
    """[(path relative to the repo, line, format or None)] for every MESH_WARN call."""
    src = pathlib.Path(src_dir)
    found = []
    for path in sorted(list(src.rglob("*.cc")) + list(src.rglob("*.h"))):
        rel = path.relative_to(src.parent).as_posix()
        if rel.startswith("src/tools/"):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for m in re.finditer(r"\bMESH_WARN\s*\(", text):
            line_start = text.rfind("\n", 0, m.start()) + 1
            if text[line_start:m.start()].lstrip().startswith("#define"):
                continue
            line = text.count("\n", 0, m.start()) + 1
            i = skip_space_and_comments(text, m.end())
            parts = []
            while i < len(text) and text[i] == '"':
                lit, i = read_literal(text, i)
                parts.append(lit)
                i = skip_space_and_comments(text, i)
            fmt = " ".join("".join(parts).split()) if parts else None
            found.append((rel, line, fmt))
    return found


def table_keys(deploy_md):
    """[(row number, key)] from the first cells of the Troubleshooting section's table."""
    text = pathlib.Path(deploy_md).read_text(encoding="utf-8")
    m = re.search(r"^#+ .*Troubleshooting.*$", text, re.M)
    if not m:
        return None
    section = text[m.end():]
    nxt = re.search(r"^#{1,2} ", section, re.M)
    if nxt:
        section = section[:nxt.start()]
    keys = []
    row = 0
    for line in section.splitlines():
        if not line.startswith("|") or re.match(r"^\|\s*-", line):
            continue
        row += 1
        first = line.split("|")[1] if line.count("|") >= 2 else ""
        for key in re.findall(r"`([^`]+)`", first):
            keys.append((row, " ".join(key.split())))
    return keys


def documented(fmt, key):
    if key.endswith(ELLIPSIS):
        return fmt.startswith(key[:-1])
    return fmt == key


def main(argv):
    if len(argv) == 3 and argv[1] == "--list":
        for rel, line, fmt in warn_formats(argv[2]):
            print(f"{rel}:{line}: {fmt}")
        return 0
    if len(argv) != 3:
        print(__doc__)
        return 2
    warns = warn_formats(argv[1])
    keys = table_keys(argv[2])
    problems = []
    if keys is None:
        print(f"FAIL: {argv[2]} has no 'Troubleshooting' section")
        return 1
    if not warns:
        print(f"FAIL: no MESH_WARN call found under {argv[1]}")
        return 1
    for row, key in keys:
        if key.endswith(ELLIPSIS) and len(key) - 1 < MIN_PREFIX:
            problems.append(f"row {row}: `{key}` is a beginning of fewer than {MIN_PREFIX} "
                            "characters: write the whole format, or more of it")
    for rel, line, fmt in warns:
        if fmt is None:
            problems.append(f"{rel}:{line}: MESH_WARN without a string-literal format: give it "
                            "one (\"...: %s\") so the troubleshooting table can name it")
            continue
        if not any(documented(fmt, key) for _, key in keys):
            problems.append(f"{rel}:{line}: the WARN `{fmt}` has no row in the troubleshooting "
                            f"table of docs/deploy.md: add a row whose first cell is `{fmt}` "
                            f"(or its first {MIN_PREFIX}+ characters followed by {ELLIPSIS}), "
                            "saying what it means and what to do")
    for row, key in keys:
        if not any(fmt is not None and documented(fmt, key) for _, _, fmt in warns):
            problems.append(f"row {row}: `{key}` matches no WARN in the code any more "
                            f"(changed or removed): update or delete the row")
    if problems:
        for p in problems:
            print("FAIL: " + p)
        print(f"FAIL: {len(problems)} problem(s); {len(warns)} WARN calls, {len(keys)} documented "
              "formats")
        return 1
    print(f"PASS: all {len(warns)} WARN calls ({len({f for _, _, f in warns})} distinct formats) "
          f"have a row in the troubleshooting table ({len(keys)} formats documented)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
