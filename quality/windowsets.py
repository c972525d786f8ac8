"""windowsets.py — the named sets of text windows every quality result is measured on, defined
once here and quoted by name in every table.

A window set is (text, length, count, stride, skip): in each document of the text (texts.py: a
scenario is one or more documents) a window of `length` tokens starts at skip, skip + stride,
skip + 2 stride, ... as long as it fits; the set is the first `count` of these, document after
document. skip = 8,192 tokens leaves out each document's opening (openings are memorised: the
first chapter of Pride & Prejudice and Genesis 1 read at far lower perplexity than the rest);
stride >= length, so no two windows overlap. The stride is one per text, so the windows of every
length start at the same positions (a 512-token window is the beginning of the 8,192-token window
at its position). Each text's token count per document is recorded: a different package version
(another text) is refused rather than silently measured.

    SETS["austen-2k"]            WindowSet(text="austen", length=2048, count=32, ...)
    windows(name, tok)           [(document, start, ids [length])]
    describe(name)               one line for a table: "austen-2k: 32 windows of 2,048 tokens ..."

Ad-hoc sets (evaluate.py --text/--window/--windows) are made with adhoc(); they have no name in
SETS and no document quotes them.
"""
import collections
import hashlib
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../scripts"))
from chapter_script import require  # noqa: E402

torch = require("torch", setup="--quality")

import smollm
import texts

WindowSet = collections.namedtuple("WindowSet", "name text length count stride skip")

SKIP = 8192
COUNT = 32
STRIDES = {"austen": 11600, "kjv": 35900, "go": 94900}
# Tokens per document of each text (SmolLM2's tokenizer): what the sets were laid out on.
TOKENS = {"austen": [167891, 221849], "kjv": [1131897], "go": [2958466]}
LENGTHS = {"512": 512, "2k": 2048, "8k": 8192}
TITLES = {"austen": "Austen (Pride & Prejudice, Emma)", "kjv": "King James Bible",
          "go": "Go standard library"}

SETS = {f"{t}-{tag}": WindowSet(f"{t}-{tag}", t, n, COUNT, STRIDES[t], SKIP)
        for t in texts.SCENARIOS for tag, n in LENGTHS.items()}


def starts(doc_tokens, length, count, stride, skip):
    """[(document index, start)] of a set laid on documents of doc_tokens tokens each."""
    out = []
    for d, n in enumerate(doc_tokens):
        s = skip
        while s + length <= n and len(out) < count:
            out.append((d, s))
            s += stride
    return out


_IDS = {}


def token_ids(text, tok, docs=None):
    """[(title, ids list)] of a text's documents (tokenized once per process, and kept in
    smollm.CACHE/tokens/ under a hash of the documents and the tokenizer: the three texts take
    seconds to tokenize, for every script and test that reads a window set). docs: other
    documents [(title, text)], kept under the name `text` (the indexer's training novels)."""
    if text not in _IDS:
        docs = texts.documents(text) if docs is None else docs
        h = hashlib.sha256(tok.to_str().encode())
        for title, t in docs:
            h.update(title.encode() + b"\0" + t.encode() + b"\0")
        file = os.path.join(smollm.CACHE, "tokens", f"{text}-{h.hexdigest()[:16]}.json")
        try:
            with open(file) as f:
                _IDS[text] = [(title, ids) for title, ids in json.load(f)]
        except (OSError, ValueError):
            _IDS[text] = [(title, tok.encode(t).ids) for title, t in docs]
            try:
                smollm.write_json(file, _IDS[text])
            except OSError:  # a read-only checkout: tokenize each time
                pass
    return _IDS[text]


def windows(name, tok):
    """[(document title, start, ids tensor [length])] of the named set; ValueError (one line) for
    an unknown name or a text that is not the one the set was laid out on."""
    if name not in SETS:
        raise ValueError(f"unknown window set '{name}' (sets: {', '.join(SETS)})")
    ws = SETS[name]
    docs = token_ids(ws.text, tok)
    got = [len(ids) for _, ids in docs]
    if got != TOKENS[ws.text]:
        raise ValueError(f"text '{ws.text}' has {got} tokens per document, the window sets were "
                         f"laid out on {TOKENS[ws.text]} (another package version?)")
    return [(docs[d][0], s, torch.tensor(docs[d][1][s:s + ws.length]))
            for d, s in starts(got, ws.length, ws.count, ws.stride, ws.skip)]


def adhoc(text, length, count, tok, skip=0):
    """An unnamed set for ad-hoc runs: `count` windows evenly spread over the text's first
    document from token `skip` (ValueError when it is too short)."""
    ids = token_ids(text, tok)[0][1]
    span = len(ids) - skip - length
    if span < 0:
        raise ValueError(f"text of {len(ids)} tokens is shorter than a window of {length}")
    step = span // max(count - 1, 1)
    return [(token_ids(text, tok)[0][0], skip + n * step,
             torch.tensor(ids[skip + n * step:skip + n * step + length])) for n in range(count)]


def describe(name):
    """One line naming a set and its definition, for the tables."""
    ws = SETS[name]
    return (f"window set `{name}`: {ws.count} windows of {ws.length:,} tokens of "
            f"{TITLES[ws.text]}, one every {ws.stride:,} tokens of each document from token "
            f"{ws.skip:,} (openings left out)")
