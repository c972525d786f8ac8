"""readme_tables.py — the one writer of the tables that the chapter's documents quote from result
files. A table sits between two marker lines of a Markdown file,

    <!-- KIND:NAME -->
    ...the body, generated...
    <!-- /KIND:NAME -->

and a generator (benchmarks/update_tables.py, an example's make_tables.py) maps each KIND:NAME to
the body it computes. fill() puts the bodies in, update() writes the file or, with check, only
says whether it is stale; the caller prints its own line and picks its exit status.
"""
import re


def fill(text, blocks):
    """text with the body between the markers of each key of blocks replaced by blocks[key] (a
    string, or a function called only when the markers are there), and the keys whose markers
    text lacks. The body is put in as given: it ends with the newline before the closing marker."""
    missing = []
    for key, body in blocks.items():
        pat = re.compile(rf"(<!-- {re.escape(key)} -->\n)(.*?)(<!-- /{re.escape(key)} -->)", re.S)
        m = pat.search(text)
        if m is None:
            missing.append(key)
            continue
        new = body() if callable(body) else body
        text = text[:m.start(2)] + new + text[m.end(2):]
    return text, missing


def update(path, blocks, check, rewrite=None):
    """fill() on the file at path (then rewrite(text), if given, for what is not a marked table);
    unless check, writes the file when it changed. Returns (changed, missing keys)."""
    with open(path) as f:
        text = f.read()
    new, missing = fill(text, blocks)
    if rewrite is not None:
        new = rewrite(new)
    changed = new != text
    if changed and not check:
        with open(path, "w") as f:
            f.write(new)
    return changed, missing
