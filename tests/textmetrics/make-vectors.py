#!/usr/bin/env python3
"""make-vectors.py - BLEU and ROUGE-L test vectors for lib/eval/textmetrics.c.

Computes, with implementations independent of cg (sacrebleu for BLEU,
Google's rouge-score for ROUGE-L), for a fixed list of (hypothesis,
reference) pairs: sentence BLEU (add-1 smoothing), ROUGE-L F1 and the
corpus BLEU of the pairs so far, and writes them as tests/textmetrics/
vectors.tsv, which tests/unit/test_textmetrics.c reads.

Tokenisation must be the one cg uses: tokens are the maximal runs of
non-whitespace, whitespace being what Python's str.split() splits on
(Unicode White_Space, plus U+001C..U+001F), no lowercasing, no other
normalisation.  sacrebleu does exactly that with tokenize='none' and
lowercase=False (it calls line.split()); rouge-score's default tokenizer
lowercases and drops non-alphanumerics, so it is given one that calls
str.split().  Pairs are bytes, decoded as UTF-8 with surrogateescape, so
that an invalid byte stays one non-space character, as in cg.

Scale: every score is in [0, 1] (sacrebleu's 0-100 divided by 100).

Usage: python3 make-vectors.py > vectors.tsv
(needs: pip install sacrebleu==2.6.0 rouge-score==0.1.2)
"""
import random
import sys
import unicodedata

import sacrebleu
from sacrebleu.metrics import BLEU
from rouge_score import rouge_scorer
try:
    from importlib.metadata import version
except ImportError:  # Python < 3.8
    from importlib_metadata import version


class SplitTokenizer:
    """rouge-score tokenizer: str.split(), nothing else."""

    def tokenize(self, text):
        return text.split()


def pairs():
    """The fixed test pairs, as bytes."""
    p = [
        # identical, long enough for every n-gram order
        (b"the quick brown fox jumps over the lazy dog",
         b"the quick brown fox jumps over the lazy dog"),
        # Papineni et al. (2002), candidate 1 and reference 1
        (b"It is a guide to action which ensures that the military "
         b"always obeys the commands of the party",
         b"It is a guide to action that ensures that the military will "
         b"forever heed Party commands"),
        # Papineni's clipping example: repeated words
        (b"the the the the the the the", b"the cat is on the mat"),
        (b"the cat the cat the cat", b"the cat is on the mat"),
        # completely disjoint
        (b"alpha beta gamma delta", b"one two three four five"),
        # hypothesis shorter than the reference: brevity penalty
        (b"the cat sat", b"the cat sat on the mat today"),
        # hypothesis longer than the reference: no penalty
        (b"the cat sat on the mat today in the warm sun all day long",
         b"the cat sat on the mat today"),
        # one word, identical; one word, different
        (b"hello", b"hello"),
        (b"hello", b"world"),
        # two and three words: no 4-grams at all
        (b"good morning", b"good morning everyone"),
        (b"see you later", b"see you soon"),
        # empty hypothesis, empty reference, both empty, only spaces
        (b"", b"a reference with words"),
        (b"a hypothesis with words", b""),
        (b"", b""),
        (b" \t \n ", b"not empty"),
        # case and punctuation are kept: "Cat" != "cat", "mat." != "mat"
        (b"The Cat sat on the mat.", b"the cat sat on the mat"),
        # runs of mixed ASCII whitespace are one separator
        (b"  spaced\tout\n\nwords \r\n here  ", b"spaced out words here"),
        # reversed order: ROUGE-L's LCS is 1
        (b"a b c d e", b"e d c b a"),
        (b"a b a b a b", b"b a b a"),
        (b"a a a a", b"a a"),
        # tokens that share a prefix are different tokens
        (b"ab abc abcd ab", b"abc ab abcd abc"),
        # UTF-8 text
        ("Le chat dit « miaou » — naïve café , 猫 🐈 .".encode(),
         "Le chat dit « ouaf » — naïve café , 犬 🐕 .".encode()),
        ("Ünïcödé in a computer file : ½ × π ≈ 1.57".encode(),
         "Ünïcödé in a file : ½ × π ≈ 1.57".encode()),
        # Unicode spaces separate tokens: NO-BREAK SPACE, IDEOGRAPHIC
        # SPACE, THIN SPACE, NEXT LINE, and the ASCII unit separator
        ("one\u00a0two\u3000three\u2009four\u0085five\x1fsix".encode(),
         b"one two three four five six"),
        # ... but zero-width space U+200B and U+180E do not
        ("one\u200btwo three\u180efour".encode(), b"one two three four"),
        # invalid UTF-8 (a stray continuation byte, a truncated sequence
        # before an NBSP) and a NUL byte are token bytes
        (b"caf\xe9 ol\x80\xe2\x80\xc2\xa0d x\x00y",
         b"caf\xe9 ol\x80\xe2\x80 d x\x00y"),
    ]
    # Random pairs over a small vocabulary: many partial n-gram matches.
    r = random.Random(20240611)
    vocab = "a an the cat dog sat on mat and ran to of in it".split()
    for k in range(8):
        ref = [r.choice(vocab) for _ in range(r.randint(3, 25))]
        hyp = list(ref)
        for _ in range(r.randint(0, len(hyp))):
            op = r.randrange(3)
            i = r.randrange(len(hyp) + 1)
            if op == 0:
                hyp.insert(i, r.choice(vocab))
            elif op == 1 and i < len(hyp):
                del hyp[i]
            elif i < len(hyp):
                hyp[i] = r.choice(vocab)
        p.append((" ".join(hyp).encode(), " ".join(ref).encode()))
    # A long pair (about 120 tokens).
    ref = [r.choice(vocab) for _ in range(120)]
    hyp = ref[:40] + [r.choice(vocab) for _ in range(30)] + ref[70:]
    p.append((" ".join(hyp).encode(), " ".join(ref).encode()))
    return p


def escape(b):
    """Bytes as a TSV field: \\\\, \\t, \\n, \\r, and \\xHH for each byte
    of other controls, spaces but ' ', invisible characters and invalid
    UTF-8; other UTF-8 text stays as it is."""
    s = b.decode("utf-8", "surrogateescape")
    out = []
    for ch in s:
        c = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif 0xDC80 <= c <= 0xDCFF:
            out.append("\\x%02x" % (c - 0xDC00))
        elif ch != " " and (ch.isspace() or unicodedata.category(ch) in
                            ("Cc", "Cf", "Zl", "Zp", "Zs")):
            # Controls, spaces other than ' ' and invisible format
            # characters, so that a reader sees where they are.
            out.append("".join("\\x%02x" % x for x in ch.encode()))
        else:
            out.append(ch)
    return "".join(out)


def main():
    # The exact calls; their arguments are repeated in the header.
    corpus = BLEU(tokenize="none", lowercase=False, smooth_method="none",
                  force=True)
    sentence = BLEU(tokenize="none", lowercase=False, smooth_method="add-k",
                    smooth_value=1, effective_order=True, force=True)
    rouge = rouge_scorer.RougeScorer(["rougeL"], tokenizer=SplitTokenizer())

    w = sys.stdout.write
    w("# vectors.tsv - BLEU and ROUGE-L F1 of fixed pairs, for "
      "tests/unit/test_textmetrics.c.\n")
    w("# Made by tests/textmetrics/make-vectors.py with Python %s,\n"
      % sys.version.split()[0])
    w("# sacrebleu %s and rouge-score %s:\n"
      % (sacrebleu.__version__, version("rouge-score")))
    w("#   sentence_bleu = BLEU(tokenize='none', lowercase=False, "
      "smooth_method='add-k',\n"
      "#       smooth_value=1, effective_order=True, force=True)"
      ".sentence_score(hyp, [ref]).score / 100\n")
    w("#   rouge_l = RougeScorer(['rougeL'], tokenizer=<str.split()>)"
      ".score(ref, hyp)['rougeL'].fmeasure\n")
    w("#   corpus_bleu = BLEU(tokenize='none', lowercase=False, "
      "smooth_method='none',\n"
      "#       force=True).corpus_score(hyps[:i+1], [refs[:i+1]]).score "
      "/ 100  (pairs 1..i+1 of this file)\n")
    w("# Fields are UTF-8 with \\\\ \\t \\n \\r and \\xHH (a raw byte) "
      "escaped.\n")
    w("# hypothesis\treference\tsentence_bleu\trouge_l\tcorpus_bleu\n")
    hyps, refs = [], []
    for hb, rb in pairs():
        h = hb.decode("utf-8", "surrogateescape")
        r = rb.decode("utf-8", "surrogateescape")
        hyps.append(h)
        refs.append(r)
        sb = sentence.sentence_score(h, [r]).score / 100
        rl = rouge.score(r, h)["rougeL"].fmeasure
        cb = corpus.corpus_score(hyps, [refs]).score / 100
        w("%s\t%s\t%.17g\t%.17g\t%.17g\n" % (escape(hb), escape(rb), sb, rl, cb))


if __name__ == "__main__":
    main()
