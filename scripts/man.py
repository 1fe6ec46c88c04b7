#!/usr/bin/env python3
"""scripts/man.py: the manual's Markdown pages (docs/*.md) to one man page, in roff.

    man.py --name drover --section 8 --summary "..." [--see-also "..."] PAGE.md... > drover.8

Just the Markdown the pages use: headings (a page's `#` title becomes a section, `##` a
subsection, deeper ones a bold line), paragraphs, `-` and `1.` lists (nested by indent),
fenced code, tables (each row a tagged paragraph: the first cell, then the others), inline
code, bold, italics and links (a link keeps its text; another site's address follows it).
Python's standard library only, so that neither CI nor a package build needs pandoc.
Called by scripts/man.sh, which says which pages make which man page.
"""

import argparse
import re
import sys

FENCE = re.compile(r"^(\s*)```")
HEADING = re.compile(r"^(#{1,6}) (.*)$")
ITEM = re.compile(r"^(\s*)([-*]|\d+\.) (.*)$")
LINK = re.compile(r"\[((?:[^\[\]]|\[[^\]]*\])*)\]\(([^)\s]+)\)")
CODE = re.compile(r"(`+)(.+?)\1")
EMPHASIS = re.compile(r"(?<![\w*])\*(?!\s)([^*]+?)(?<!\s)\*(?![\w*])")


def escape(text):
    """Text safe from roff: backslashes, and non-ASCII as groff's \\[uXXXX] glyphs."""
    text = text.replace("\\", "\\e")
    return "".join(c if ord(c) < 128 else "\\[u%04X]" % ord(c) for c in text)


def inline(text):
    """One paragraph's Markdown, joined on one line, as roff text."""
    text = re.sub(r"<a (?:id|name)=\"[^\"]*\"></a>", "", text)
    text = LINK.sub(
        lambda m: m.group(1) + (" <%s>" % m.group(2) if "://" in m.group(2) else ""), text
    )
    out, bold, at = [], False, 0
    for m in CODE.finditer(text):
        out.append(prose(text[at : m.start()], bold))
        bold = out[-1][1]
        code = escape(m.group(2).strip()).replace("-", "\\-")
        out.append((code if bold else "\\fB%s\\fR" % code, bold))
        at = m.end()
    out.append(prose(text[at:], bold))
    line = "".join(part for part, _ in out)
    if out[-1][1]:
        line += "\\fR"
    return "\\&" + line if line[:1] in (".", "'") else line


def prose(text, bold):
    """Text outside code spans: `**` toggles bold, `*x*` is italics; returns (roff, bold)."""
    text = text.replace("\\|", "|").replace("\\*", "*").replace("\\_", "_")
    parts = text.split("**")
    out = []
    for index, part in enumerate(parts):
        if index:
            bold = not bold
            out.append("\\fB" if bold else "\\fR")
        part = escape(part)
        if not bold:
            part = EMPHASIS.sub(lambda m: "\\fI%s\\fR" % m.group(1), part)
        out.append(part)
    return "".join(out), bold


def quoted(text):
    return '"%s"' % text.replace('"', "\\(dq")


class Page:
    """The roff being written, and the lists open at this point (their indents)."""

    def __init__(self):
        self.out = []
        self.lists = []

    def emit(self, *lines):
        self.out.extend(lines)

    def close_lists(self, indent=-1):
        """Ends the lists nested deeper than `indent` (every list for -1)."""
        while self.lists and self.lists[-1] > indent:
            self.lists.pop()
            if self.lists:
                self.emit(".RE")

    def in_item(self, indent):
        """Whether a line indented so continues the open list's item."""
        return bool(self.lists) and indent > self.lists[-1]


def convert(page, text):
    lines = text.split("\n")
    at = 0
    while at < len(lines):
        line = lines[at]
        indent = len(line) - len(line.lstrip())
        if not line.strip():
            at += 1
        elif FENCE.match(line):
            at = code(page, lines, at, indent)
        elif HEADING.match(line):
            page.close_lists()
            level, title = HEADING.match(line).groups()
            title = inline(title.strip())
            if len(level) == 1:
                page.emit(".SH " + quoted(title.upper()))
            elif len(level) == 2:
                page.emit(".SS " + quoted(title))
            else:
                page.emit(".PP", "\\fB%s\\fR" % title)
            at += 1
        elif line.lstrip().startswith("|"):
            at = table(page, lines, at, indent)
        elif ITEM.match(line):
            at = item(page, lines, at)
        else:
            at = paragraph(page, lines, at, indent)
    page.close_lists()


def starts_block(line):
    return bool(FENCE.match(line) or HEADING.match(line) or ITEM.match(line)) or line.lstrip().startswith("|")


def gather(lines, at):
    """The lines of a paragraph from `at` to the next blank line or block, and where it ends."""
    text = []
    while at < len(lines) and lines[at].strip() and not (text and starts_block(lines[at])):
        text.append(lines[at].strip())
        at += 1
    return " ".join(text), at


def paragraph(page, lines, at, indent):
    if page.in_item(indent):
        page.emit(".IP")
    else:
        page.close_lists()
        page.emit(".PP")
    text, at = gather(lines, at)
    page.emit(inline(text))
    return at


def item(page, lines, at):
    indent, marker, first = ITEM.match(lines[at]).groups()
    indent = len(indent)
    page.close_lists(indent)
    if not page.lists or page.lists[-1] < indent:
        if page.lists:
            page.emit(".RS")
        page.lists.append(indent)
    text = [first.strip()]
    at += 1
    while at < len(lines) and lines[at].strip() and not starts_block(lines[at]):
        text.append(lines[at].strip())
        at += 1
    tag = "\\(bu" if marker in "-*" else marker
    page.emit(".IP %s %d" % (tag, 2 if tag == "\\(bu" else 4), inline(" ".join(text)))
    return at


def code(page, lines, at, indent):
    if page.in_item(indent):
        page.emit(".IP", ".nf")
    else:
        page.close_lists()
        page.emit(".PP", ".RS 4", ".nf")
    at += 1
    while at < len(lines) and not FENCE.match(lines[at]):
        line = lines[at]
        body = escape(line[indent:] if not line[:indent].strip() else line.lstrip())
        page.emit("\\&" + body)
        at += 1
    page.emit(".fi")
    if not page.in_item(indent):
        page.emit(".RE")
    return at + 1


def cells(line):
    line = line.strip().strip("|")
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)]


def table(page, lines, at, indent):
    if not page.in_item(indent):
        page.close_lists()
    header = [h.lower() for h in cells(lines[at])]
    # The tag names the row: its first cell, or its table and key in a table of keys.
    tagged = 2 if header[:2] == ["table", "key"] else 1
    at += 2  # the header and its |---| line
    while at < len(lines) and lines[at].lstrip().startswith("|"):
        row = cells(lines[at])
        middle = [
            "%s: %s" % (name, value)
            for name, value in zip(header[tagged:-1], row[tagged:-1])
            if value
        ]
        tag = " ".join(row[:tagged])
        if middle:
            tag += " (%s)" % "; ".join(middle)
        page.emit(".TP", inline(tag))
        if len(row) > tagged:
            page.emit(inline(row[-1]))
        at += 1
    return at


def main():
    args = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    args.add_argument("--name", required=True)
    args.add_argument("--section", required=True)
    args.add_argument("--summary", required=True)
    args.add_argument("--version", default="")
    args.add_argument("--see-also", default="")
    args.add_argument("pages", nargs="+")
    opts = args.parse_args()

    page = Page()
    page.emit(
        ".\\\" -*- coding: UTF-8 -*-",
        ".\\\" Built by scripts/man.sh from %s: edit those, not this." % " ".join(opts.pages),
        ".TH %s %s \"\" %s \"drover manual\""
        % (quoted(opts.name.upper()), opts.section, quoted(opts.version)),
        ".SH NAME",
        "%s \\- %s" % (escape(opts.name), escape(opts.summary)),
        ".nh",
    )
    for path in opts.pages:
        with open(path, encoding="utf-8") as f:
            convert(page, f.read())
    if opts.see_also:
        page.emit(".SH \"SEE ALSO\"", inline(opts.see_also))
    sys.stdout.write("\n".join(page.out) + "\n")


if __name__ == "__main__":
    main()
