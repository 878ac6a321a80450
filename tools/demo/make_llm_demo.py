# SPDX-License-Identifier: Apache-2.0
"""Writes the demo repository's generative model: a bigram language model of English licence
text, trained by counting at build time and encoded exactly in the weights of a 1-layer llama.

    /usr/bin/python3 tools/demo/make_llm_demo.py OUT.gguf [--corpus-dir DIR] [--vocab N]
    build/kiln generate OUT.gguf --prompt "This program is" --max-tokens 40 --temperature 0.7

It writes words, not noise ("This program is not the work, the notices that you want to the
library is a "copyright" a) Accompany the ordinary General Public License."), but it knows only
the previous token: sentences wander, greedy decoding loops, and about 2% of sampled words are
made up where it strings word pieces. It exists so that `make run` serves a model whose output
can be read, with no download: the corpus is a Debian package's text. Built in about a second;
6.5 MB.

Corpus: CORPUS_FILES, the GNU licences in /usr/share/common-licenses (package base-files,
Priority: required, so on every Debian system; about 80 kB of ASCII English). Paragraphs are
the blocks between blank lines, with rules ("-----", "*****") removed and whitespace runs (line
breaks, tabs, indentation) collapsed to one space; paragraphs of fewer than MIN_WORDS words
(headings) or mostly in capitals (headings, disclaimers) are dropped.

Tokenizer (GGUF "llama": SentencePiece-style BPE with scores and byte fallback, what kiln's
Tokenizer calls kSpm): spaces are U+2581 "▁", and a "▁" starts each paragraph. BPE merges are
learned by frequency over the corpus' units (a run of letters or of digits with its leading "▁",
or one other character with its leading "▁"; so no piece mixes letters, digits and punctuation,
and "▁" only starts a piece), the most frequent adjacent pair first (ties: the smaller pair in
code point order), until the vocabulary has --vocab entries. Ids:
  0 <unk>, 1 <s> (BOS, added to prompts), 2 </s> (EOS: ends a paragraph), 3 <|im_start|>,
  4 <|im_end|> (ChatML control tokens, for the chat template), 5..260 <0x00>..<0xFF> (byte
  fallback: any text can be encoded), then the merged pieces in merge order (score -rank), then
  the corpus' characters (lower scores; they only start the merging).
A SentencePiece-style encoder (kiln's, llama.cpp's) merges the adjacent pair whose concatenation
is a piece with the highest score, which need not retrace the training merges; spm_encode below
is kiln's EncodeSpm (src/llm/tokenizer.cc) in Python, and the counts are made with it, so the
model is trained on exactly the tokens kiln feeds it. A piece that this encoder cannot produce
from its own text is dropped (none is, for this corpus) and the check repeated.

Model: P(next | current token) from the counts of the tokenized paragraphs, each read as
<s> tokens... </s>, smoothed towards the unigram distribution of successors:
  P(j | i) = (c(i, j) + ALPHA * u(j)) / (c(i) + ALPHA),   u(j) = c(., j) / c(., .)
and log P clamped below at LOG_FLOOR (tokens never seen as successors: bytes, <s>, <unk>, ...).
A token never seen as a predecessor (byte tokens, </s>, the ChatML tokens) gets the row of <s>:
after it the model starts a paragraph (so a chat reply, whose prompt ends in "\\n", does).
The llama (llama.cpp / kiln tensor names; shapes [rows, columns], GGUF lists them reversed):
  hidden H = the number of contexts C (<s> and every token seen as a predecessor), rounded up to
  a multiple of 32; context k has the residual dimension k (0 is <s>);
  token_embd [V, H]: row t = e_ctx(t), one-hot;
  blk.0: RMSNorm weights 1; attn_q / attn_k / attn_v [32, H], attn_output [H, 32], ffn_gate /
  ffn_up [32, H], ffn_down [H, 32] all zero (1 head of 32, FFN 32): the layer adds exactly 0;
  output_norm 1: the final state is e_k / sqrt(1/H + eps), so logit[j] = output[j, k] / sqrt(1/H
  + eps) and output[j, k] = log P(j | k) * sqrt(1/H + eps) (untied).
Matrices are Q8_0 (zero blocks are exact, one-hot rows up to the f16 block scale, which the
RMSNorm cancels; a log probability moves by at most about |LOG_FLOOR| / 254), norms F32. Chat
template: ChatML. Same corpus, same bytes.
"""

import argparse
import collections
import heapq
import os
import re
import sys

import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(_HERE, "..", "..", "tests", "llm"))
import gguf_writer as gw  # noqa: E402
import quants  # noqa: E402

CORPUS_DIR = "/usr/share/common-licenses"
# The GNU licences: one vocabulary, so more of its words become whole tokens (adding Apache-2.0,
# MPL-2.0, GFDL-1.3, ... doubles the text but raises the share of made-up words in samples from
# about 2% to 4%).
CORPUS_FILES = ("GPL-3", "GPL-2", "LGPL-3", "LGPL-2.1")
MIN_WORDS = 6      # shorter paragraphs (headings) are dropped
VOCAB_SIZE = 2048
ALPHA = 1.0        # weight of the unigram prior in each row
LOG_FLOOR = -16.0  # log P below this is stored as this
RMS_EPS = 1e-5
CONTEXT = 2048
HEAD_DIM = 32
FFN = 32
NAME = "tiny_lm"

SPACE = "\u2581"
UNK, BOS, EOS, IM_START, IM_END = 0, 1, 2, 3, 4
SPECIALS = ("<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>")
FIRST_BYTE = len(SPECIALS)
FIRST_PIECE = FIRST_BYTE + 256
# GGUF token types (llama.cpp's llama_token_type).
NORMAL, UNKNOWN, CONTROL, BYTE = 1, 2, 3, 6

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")

_RULE = re.compile(r"[-=_*]{3,}")  # rules under headings, box borders
_UNIT = re.compile(SPACE + "?[A-Za-z]+|" + SPACE + "?[0-9]+|" + SPACE + "?[^A-Za-z0-9" + SPACE
                   + "]")


# --- corpus -------------------------------------------------------------------------------------

def read_corpus(corpus_dir=CORPUS_DIR):
    """The corpus' paragraphs, in file order (see the module docstring)."""
    paragraphs = []
    for name in CORPUS_FILES:
        path = os.path.join(corpus_dir, name)
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise SystemExit(f"make_llm_demo: cannot read the corpus file {path} ({e.strerror}); "
                             "it comes with Debian's base-files package")
        # MPL-2.0's boxed section: "*  text  *" lines.
        text = re.sub(r"(?m)^[ \t]*\*(.*)\*[ \t]*$", r"\1", text)
        for block in re.split(r"\n\s*\n", text):
            p = " ".join(_RULE.sub(" ", block).split())
            letters = sum(c.isalpha() for c in p)
            if (len(p.split()) >= MIN_WORDS and letters
                    and sum(c.isupper() for c in p) * 2 <= letters):
                paragraphs.append(p)
    return paragraphs


def escape(paragraph):
    """The text kiln's encoder works on: a leading "▁", spaces as "▁"."""
    return SPACE + paragraph.replace(" ", SPACE)


def units(escaped):
    """Training units (no piece crosses one); they concatenate to `escaped`."""
    out = _UNIT.findall(escaped)
    assert "".join(out) == escaped, escaped
    return out


# --- tokenizer ----------------------------------------------------------------------------------

def train_bpe(paragraphs, n_merges):
    """(characters by frequency, merged pieces in merge order)."""
    freq = collections.Counter()
    for p in paragraphs:
        freq.update(units(escape(p)))
    words = sorted(freq)
    counts = [freq[w] for w in words]
    symbols = [list(w) for w in words]
    chars = collections.Counter()
    pairs = collections.Counter()
    where = collections.defaultdict(set)  # pair -> indices of words holding it
    for i, s in enumerate(symbols):
        for ch in s:
            chars[ch] += counts[i]
        for a, b in zip(s, s[1:]):
            pairs[a, b] += counts[i]
            where[a, b].add(i)
    merges = []
    while len(merges) < n_merges and pairs:
        (a, b), n = min(pairs.items(), key=lambda kv: (-kv[1], kv[0]))
        if n < 2:
            break
        merges.append(a + b)
        for i in sorted(where.pop((a, b))):
            s, c = symbols[i], counts[i]
            for x, y in zip(s, s[1:]):
                pairs[x, y] -= c
                if pairs[x, y] == 0:
                    del pairs[x, y]
                if (x, y) in where:
                    where[x, y].discard(i)
            merged, k = [], 0
            while k < len(s):
                if k + 1 < len(s) and s[k] == a and s[k + 1] == b:
                    merged.append(a + b)
                    k += 2
                else:
                    merged.append(s[k])
                    k += 1
            symbols[i] = merged
            for x, y in zip(merged, merged[1:]):
                pairs[x, y] += c
                where[x, y].add(i)
    return sorted(chars, key=lambda ch: (-chars[ch], ch)), merges


def spm_encode(text, score):
    """kiln's Tokenizer::EncodeSpm on escaped `text` over pieces {piece: score}: the pieces, with
    None for a character that is no piece (kiln: its bytes as byte tokens). Repeatedly merges
    the adjacent pair whose concatenation is a piece with the highest score (ties: leftmost)."""
    if not text:
        return []
    # [prev, next, start, length] per symbol; symbols are characters at first.
    sym = [[i - 1, i + 1, i, 1] for i in range(len(text))]
    sym[-1][1] = -1
    heap = []

    def try_add(left, right):
        if left < 0 or right < 0:
            return
        length = sym[left][3] + sym[right][3]
        piece = text[sym[left][2]:sym[left][2] + length]
        if piece in score:
            heapq.heappush(heap, (-score[piece], left, right, length))

    for i in range(1, len(text)):
        try_add(i - 1, i)
    while heap:
        _, left, right, length = heapq.heappop(heap)
        lsym, rsym = sym[left], sym[right]
        if lsym[3] == 0 or rsym[3] == 0 or lsym[3] + rsym[3] != length:
            continue  # stale
        lsym[3] += rsym[3]
        rsym[3] = 0
        lsym[1] = rsym[1]
        if rsym[1] >= 0:
            sym[rsym[1]][0] = left
        try_add(lsym[0], left)
        try_add(left, lsym[1])
    out, i = [], 0
    while i >= 0:
        piece = text[sym[i][2]:sym[i][2] + sym[i][3]]
        out.append(piece if piece in score else None)
        i = sym[i][1]
    return out


class Vocabulary:
    """The token list (ids as in the module docstring), scores and types, and the encoder."""

    def __init__(self, chars, merges):
        self.merges = list(merges)
        self.chars = list(chars)
        self._build()

    def _build(self):
        byte_tokens = [f"<0x{b:02X}>" for b in range(256)]
        self.tokens = list(SPECIALS) + byte_tokens + self.merges + self.chars
        n_merges = len(self.merges)
        self.scores = ([0.0] * FIRST_PIECE + [-float(r) for r in range(n_merges)]
                       + [-float(n_merges + k) for k in range(len(self.chars))])
        self.types = ([UNKNOWN, CONTROL, CONTROL, CONTROL, CONTROL] + [BYTE] * 256
                      + [NORMAL] * (n_merges + len(self.chars)))
        self.ids = {t: i for i, t in enumerate(self.tokens) if i >= FIRST_PIECE}
        self.score = {t: self.scores[i] for t, i in self.ids.items()}
        self._cache = {}

    def drop(self, pieces):
        pieces = set(pieces)
        self.merges = [m for m in self.merges if m not in pieces]
        self._build()

    def encode_unit(self, unit):
        ids = self._cache.get(unit)
        if ids is None:
            ids = []
            for piece in spm_encode(unit, self.score):
                if piece is None:
                    raise ValueError(f"a character of {unit!r} is not in the vocabulary")
                ids.append(self.ids[piece])
            self._cache[unit] = ids
        return ids

    def encode(self, paragraph):
        """kiln's Encode(paragraph, add_special=false): token ids. No piece crosses a unit, so
        the units are encoded one by one (and cached)."""
        return [t for u in units(escape(paragraph)) for t in self.encode_unit(u)]

    def unreachable(self):
        """Merged pieces the encoder does not produce from their own text."""
        return [m for m in self.merges if spm_encode(m, self.score) != [m]]


def make_vocabulary(paragraphs, size):
    n_chars = len({ch for p in paragraphs for ch in escape(p)})
    chars, merges = train_bpe(paragraphs, size - FIRST_PIECE - n_chars)
    vocab = Vocabulary(chars, merges)
    while True:
        bad = vocab.unreachable()
        if not bad:
            return vocab
        vocab.drop(bad)


# --- model --------------------------------------------------------------------------------------

def bigram_table(sequences, n_vocab):
    """(contexts: token ids with a residual dimension, <s> first; log P [n_vocab, C]).
    sequences: token id lists, each <s> ... </s>."""
    counts = collections.Counter()
    for s in sequences:
        counts.update(zip(s, s[1:]))
    contexts = [BOS] + sorted({i for i, _ in counts} - {BOS})
    dim = {t: k for k, t in enumerate(contexts)}
    c = np.zeros((n_vocab, len(contexts)), dtype=np.float64)  # [next, context]
    for (i, j), n in counts.items():
        c[j, dim[i]] += n
    unigram = c.sum(axis=1) / c.sum()
    p = (c + ALPHA * unigram[:, None]) / (c.sum(axis=0, keepdims=True) + ALPHA)
    with np.errstate(divide="ignore"):
        logp = np.maximum(np.log(p), LOG_FLOOR)
    return contexts, logp


def build(corpus_dir=CORPUS_DIR, vocab_size=VOCAB_SIZE):
    """(GGUFWriter, Vocabulary, stats dict)."""
    paragraphs = read_corpus(corpus_dir)
    vocab = make_vocabulary(paragraphs, vocab_size)
    n_vocab = len(vocab.tokens)
    sequences = [[BOS] + vocab.encode(p) + [EOS] for p in paragraphs]
    contexts, logp = bigram_table(sequences, n_vocab)
    n_ctx = len(contexts)
    hidden = -(-n_ctx // 32) * 32

    embd = np.zeros((n_vocab, hidden), dtype=np.float32)
    ctx_dim = np.zeros(n_vocab, dtype=np.int64)  # unseen contexts -> 0 (<s>)
    ctx_dim[contexts] = np.arange(n_ctx)
    embd[np.arange(n_vocab), ctx_dim] = 1.0
    out = np.zeros((n_vocab, hidden), dtype=np.float32)
    out[:, :n_ctx] = logp * np.sqrt(1.0 / hidden + RMS_EPS)

    w = gw.GGUFWriter()
    a = "llama"
    w.add_string("general.architecture", a)
    w.add_string("general.name", NAME)
    w.add_string("general.description",
                 "A token bigram model of the English licence texts in Debian's "
                 "/usr/share/common-licenses, encoded exactly in a 1-layer llama "
                 "(kiln tools/demo/make_llm_demo.py)")
    w.add_uint32("general.file_type", 7)  # MOSTLY_Q8_0
    w.add_uint32("general.quantization_version", 2)
    w.add_uint32(f"{a}.context_length", CONTEXT)
    w.add_uint32(f"{a}.embedding_length", hidden)
    w.add_uint32(f"{a}.block_count", 1)
    w.add_uint32(f"{a}.feed_forward_length", FFN)
    w.add_uint32(f"{a}.attention.head_count", 1)
    w.add_uint32(f"{a}.attention.head_count_kv", 1)
    w.add_uint32(f"{a}.attention.key_length", HEAD_DIM)
    w.add_uint32(f"{a}.attention.value_length", HEAD_DIM)
    w.add_float32(f"{a}.attention.layer_norm_rms_epsilon", RMS_EPS)
    w.add_float32(f"{a}.rope.freq_base", 10000.0)
    w.add_uint32(f"{a}.rope.dimension_count", HEAD_DIM)
    w.add_uint32(f"{a}.vocab_size", n_vocab)
    w.add_string("tokenizer.ggml.model", "llama")
    w.add_string("tokenizer.ggml.pre", "default")
    w.add_array("tokenizer.ggml.tokens", gw.STRING, vocab.tokens)
    w.add_array("tokenizer.ggml.scores", gw.FLOAT32, np.asarray(vocab.scores, dtype=np.float32))
    w.add_array("tokenizer.ggml.token_type", gw.INT32, np.asarray(vocab.types, dtype=np.int32))
    w.add_uint32("tokenizer.ggml.bos_token_id", BOS)
    w.add_uint32("tokenizer.ggml.eos_token_id", EOS)
    w.add_uint32("tokenizer.ggml.unknown_token_id", UNK)
    w.add_bool("tokenizer.ggml.add_bos_token", True)
    w.add_bool("tokenizer.ggml.add_eos_token", False)
    w.add_bool("tokenizer.ggml.add_space_prefix", True)
    w.add_string("tokenizer.chat_template", CHAT_TEMPLATE)

    def q8(x):
        return quants.quantize(x, "Q8_0")

    def tensor(name, rows, cols, data=None):
        x = np.zeros((rows, cols), dtype=np.float32) if data is None else data
        w.add_tensor(name, (cols, rows), "Q8_0", lambda: q8(x))

    def ones(name, n):
        w.add_tensor(name, (n,), "F32", np.ones(n, dtype=np.float32))

    tensor("token_embd.weight", n_vocab, hidden, embd)
    ones("blk.0.attn_norm.weight", hidden)
    tensor("blk.0.attn_q.weight", HEAD_DIM, hidden)
    tensor("blk.0.attn_k.weight", HEAD_DIM, hidden)
    tensor("blk.0.attn_v.weight", HEAD_DIM, hidden)
    tensor("blk.0.attn_output.weight", hidden, HEAD_DIM)
    ones("blk.0.ffn_norm.weight", hidden)
    tensor("blk.0.ffn_gate.weight", FFN, hidden)
    tensor("blk.0.ffn_up.weight", FFN, hidden)
    tensor("blk.0.ffn_down.weight", hidden, FFN)
    ones("output_norm.weight", hidden)
    tensor("output.weight", n_vocab, hidden, out)

    n_tokens = sum(len(s) - 2 for s in sequences)
    stats = {"paragraphs": len(paragraphs), "characters": sum(len(p) for p in paragraphs),
             "tokens": n_tokens, "vocab": n_vocab, "merges": len(vocab.merges),
             "contexts": n_ctx, "hidden": hidden}
    return w, vocab, stats


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="the GGUF file to write (its folder is created)")
    parser.add_argument("--corpus-dir", default=CORPUS_DIR,
                        help=f"where the corpus files are (default {CORPUS_DIR})")
    parser.add_argument("--vocab", type=int, default=VOCAB_SIZE,
                        help=f"vocabulary size (default {VOCAB_SIZE})")
    args = parser.parse_args()
    writer, _, s = build(args.corpus_dir, args.vocab)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    size = writer.write(args.out)
    print(f"{NAME}: {s['paragraphs']} paragraphs, {s['characters']} characters -> {s['tokens']} "
          f"tokens ({s['characters'] / s['tokens']:.2f} characters each); vocabulary "
          f"{s['vocab']} ({s['merges']} merges); {s['contexts']} contexts, hidden {s['hidden']}; "
          f"{size / 1e6:.1f} MB -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
