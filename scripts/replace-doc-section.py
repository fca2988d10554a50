#!/usr/bin/env python3
"""Replaces the text between `<!-- NAME:begin -->` and `<!-- NAME:end -->` in a document.

    replace-doc-section.py NAME DOCUMENT CONTENT_FILE WHAT

The benchmark scripts (bench.sh, soak.sh) rewrite their own sections of docs/BENCHMARKS.md
with it; WHAT names the section in the message on stderr.
"""
import sys

name, path, content_path, what = sys.argv[1:5]
content = open(content_path).read()
doc = open(path).read()
begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
if begin not in doc or end not in doc:
    sys.exit(f"{path} has no {name}:begin/{name}:end markers; not rewritten")
head, rest = doc.split(begin, 1)
_, tail = rest.split(end, 1)
open(path, "w").write(head + begin + "\n" + content.rstrip() + "\n" + end + tail)
print(f"rewrote {what} in {path}", file=sys.stderr)
