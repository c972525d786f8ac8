"""texts.py — the scenarios' texts, from Debian packages: Jane Austen's novels, the King James
Bible and the Go standard library's sources (read without R or Go).

A scenario is a list of documents (title, text); window sets (windowsets.py) never let a window
cross from one document into the next:

    austen   Pride & Prejudice and Emma (the evaluation novels; the lightning indexer is trained
             on the other four, never evaluated: TRAINING_NOVELS)
    kjv      the King James Bible
    go       the Go 1.19 standard library: every non-test, hand-written .go file of its packages,
             in path order, each after a line '// file: src/PATH' (one document, like a
             repository read front to back: the structured, hierarchical scenario)

Jane Austen's six novels come from Debian's r-cran-janeaustenr: R's lazy-load database
(data/Rdata.rdx, an index, and data/Rdata.rdb, the zlib-compressed serialised objects). This file
reads that format (R's XDR serialisation, version 2 or 3, as documented in R's "R Internals",
section 1.8 "Serialization formats") far enough for character vectors, lists and pairlists.

Where the package comes from (first found wins):
  $ATTN_QUALITY_TEXTS/<pkg>/usr/...   the project's cache (quality/install.sh: apt-get download +
                                      dpkg -x, no R needed; default quality/.cache/debian)
  /usr/...                            the package installed with apt-get (only when
                                      ATTN_QUALITY_TEXTS is not set; not for golang-1.19-src,
                                      whose files under /usr/share/go-1.19 may be another build)
A missing package raises TextMissing with one line saying how to install it.
"""
import gzip
import os
import subprocess
import struct
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = os.environ.get("ATTN_QUALITY_TEXTS", os.path.join(HERE, ".cache", "debian"))
SYSTEM = "ATTN_QUALITY_TEXTS" not in os.environ  # an explicit cache is the only place looked at

# The novels of janeaustenr (name of the R object, title), in publication order.
AUSTEN = [("sensesensibility", "Sense & Sensibility"), ("prideprejudice", "Pride & Prejudice"),
          ("mansfieldpark", "Mansfield Park"), ("emma", "Emma"),
          ("northangerabbey", "Northanger Abbey"), ("persuasion", "Persuasion")]


class TextMissing(RuntimeError):
    """A text package is not installed (the message is one line)."""


def package_root(pkg, probe, system=True):
    """The root under which Debian package pkg's file `probe` (an absolute path) lies (the
    installed package counts only with system=True)."""
    for root in (os.path.join(CACHE, pkg),) + (("/",) if SYSTEM and system else ()):
        if os.path.exists(os.path.join(root, probe.lstrip("/"))):
            return root
    raise TextMissing(f"Debian package {pkg} not found (run scripts/setup.sh --quality, or: apt-get "
                      f"download {pkg} && dpkg -x {pkg}_*.deb {os.path.join(CACHE, pkg)})")


# ----------------------------------------------------------------------------------------------
# R's serialisation format (XDR: big-endian)
# ----------------------------------------------------------------------------------------------

NILVALUE, REF, GLOBALENV, EMPTYENV, BASEENV, BASENS, MISSARG, UNBOUND = \
    254, 255, 253, 242, 241, 247, 251, 252
SYM, LIST, CLO, ENV, LANG, CHAR, LGL, INT, REAL, CPLX, STR, VEC = \
    1, 2, 3, 4, 6, 9, 10, 13, 14, 15, 16, 19


class RReader:
    def __init__(self, data):
        self.b, self.p, self.refs = data, 0, []

    def int(self):
        (v,) = struct.unpack_from(">i", self.b, self.p)
        self.p += 4
        return v

    def header(self):
        assert self.b[:2] == b"X\n", "only R's XDR serialisation is read"
        self.p = 2
        version = self.int()
        self.int(), self.int()  # R version that wrote it, oldest R that reads it
        if version == 3:
            n = self.int()  # native encoding name
            self.p += n
        return self

    def item(self):
        flags = self.int()
        kind, has_attr, has_tag = flags & 0xFF, flags & (1 << 9), flags & (1 << 10)
        if kind in (NILVALUE, GLOBALENV, EMPTYENV, BASEENV, BASENS, MISSARG, UNBOUND):
            return None
        if kind == REF:
            return self.refs[(flags >> 8) - 1]
        if kind == SYM:
            name = self.item()
            self.refs.append(name)
            return name
        if kind == CHAR:
            n = self.int()
            if n == -1:
                return None  # NA_character_
            s = self.b[self.p:self.p + n].decode("utf-8", "replace")
            self.p += n
            return s
        if kind in (LIST, LANG, CLO):  # pairlist: attributes, tag, car, cdr
            out = {}
            while True:
                if has_attr:
                    self.item()
                tag = self.item() if has_tag else None
                out[tag if tag is not None else len(out)] = self.item()
                flags = self.int()
                kind, has_attr, has_tag = flags & 0xFF, flags & (1 << 9), flags & (1 << 10)
                if kind == NILVALUE:
                    return out
                if kind not in (LIST, LANG, CLO):
                    raise ValueError(f"unsupported pairlist tail (R type {kind})")
        if kind == ENV:
            env = {}
            self.refs.append(env)
            self.int()  # locked
            for part in ("enclos", "frame", "hashtab", "attrib"):
                env[part] = self.item()
            return env
        if kind in (LGL, INT, REAL, CPLX, STR, VEC):
            n = self.int()
            if kind in (LGL, INT):
                value = list(struct.unpack_from(f">{n}i", self.b, self.p))
                self.p += 4 * n
            elif kind in (REAL, CPLX):
                m = n * (2 if kind == CPLX else 1)
                value = list(struct.unpack_from(f">{m}d", self.b, self.p))
                self.p += 8 * m
            else:
                value = [self.item() for _ in range(n)]
            attrs = self.item() if has_attr else None
            if kind == VEC and attrs and attrs.get("names"):  # a named list: a dict
                return dict(zip(attrs["names"], value))
            return value
        raise ValueError(f"unsupported R object type {kind}")


def unserialize(data):
    return RReader(data).header().item()


def lazyload(prefix):
    """{name: object} of an R lazy-load database (prefix.rdx, prefix.rdb)."""
    with gzip.open(prefix + ".rdx") as f:  # the index: gzip-compressed serialised list
        index = unserialize(f.read())
    names = index["variables"]
    with open(prefix + ".rdb", "rb") as f:
        rdb = f.read()
    out = {}
    for name, (offset, length) in names.items():
        blob = rdb[int(offset):int(offset) + int(length)]
        out[name] = unserialize(zlib.decompress(blob[4:]))  # 4 bytes: uncompressed length
    return out


# ----------------------------------------------------------------------------------------------
# The texts
# ----------------------------------------------------------------------------------------------

def austen_novels():
    """[(title, text)] of the six novels; text is the lines joined by newlines."""
    probe = "/usr/lib/R/site-library/janeaustenr/data/Rdata.rdx"
    root = package_root("r-cran-janeaustenr", probe)
    data = lazyload(os.path.join(root, probe.lstrip("/"))[: -len(".rdx")])
    return [(title, "\n".join(line or "" for line in data[name])) for name, title in AUSTEN]


def austen(title="Pride & Prejudice"):
    """One novel's text."""
    return dict(austen_novels())[title]


def kjv_bible():
    """The King James Bible (public domain outside the UK) from Debian's bible-kjv-text, printed
    by the `bible` program of bible-kjv (the data file is in its own compressed format): chapter
    headings ("Genesis 1") and numbered verses wrapped at 80 columns."""
    root = package_root("bible-kjv", "/usr/bin/bible")
    lib = os.path.join(package_root("bible-kjv-text", "/usr/lib/bible.data"), "usr", "lib")
    return subprocess.run([os.path.join(root, "usr", "bin", "bible"), "-p", lib,
                          "Gen1:1-Rev22:21"], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, check=True).stdout


GO_PACKAGE, GO_VERSION = "golang-1.19-src", "1.19.8-2"
GO_SRC = "/usr/share/go-1.19/src"
GO_SKIP = ("cmd", "vendor", "internal", "runtime", "syscall")  # tools, copies, low-level


def go_files():
    """[(path under src/, text)] of the Go corpus: the .go files of the standard library's
    packages, without tests (*_test.go), test data, generated files ('Code generated ... DO NOT
    EDIT.'), and the trees in GO_SKIP or under an internal/ directory; sorted by path."""
    root = os.path.join(package_root(GO_PACKAGE, GO_SRC + "/go.mod", system=False),
                        GO_SRC.lstrip("/"))
    out = []
    for d, dirs, files in os.walk(root):
        rel = os.path.relpath(d, root)
        parts = rel.split(os.sep)
        if parts[0] in GO_SKIP or "testdata" in parts or "internal" in parts:
            dirs[:] = []
            continue
        for f in files:
            if f.endswith(".go") and not f.endswith("_test.go"):
                with open(os.path.join(d, f), encoding="utf-8") as fh:
                    s = fh.read()
                if not ("Code generated" in s and "DO NOT EDIT" in s):
                    out.append((os.path.normpath(os.path.join(rel, f)), s))
    return sorted(out)


def go_stdlib():
    """The Go corpus as one text: each file after a line '// file: src/PATH'."""
    return "".join(f"// file: src/{path}\n{src}" for path, src in go_files())


EVALUATION_NOVELS = ("Pride & Prejudice", "Emma")
TRAINING_NOVELS = ("Sense & Sensibility", "Mansfield Park", "Northanger Abbey", "Persuasion")


def documents(name):
    """A scenario's documents [(title, text)] by name: 'austen', 'kjv', 'go' (module docstring)."""
    if name == "austen":
        novels = dict(austen_novels())
        return [(t, novels[t]) for t in EVALUATION_NOVELS]
    if name == "kjv":
        return [("King James Bible", kjv_bible())]
    if name == "go":
        return [(f"Go standard library ({GO_PACKAGE} {GO_VERSION})", go_stdlib())]
    raise ValueError(f"unknown text '{name}' (texts: {', '.join(SCENARIOS)})")


SCENARIOS = ("austen", "kjv", "go")


def text(name):
    """A scenario's first document (austen: Pride & Prejudice; kjv: the Bible; go: the Go
    corpus), for ad-hoc runs and the short tests."""
    if name not in SCENARIOS:
        raise ValueError(f"unknown text '{name}' (texts: {', '.join(SCENARIOS)})")
    if name == "austen":
        return austen("Pride & Prejudice")
    return documents(name)[0][1]
