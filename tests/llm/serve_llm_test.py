#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Black-box test of generation serving: `kiln serve` with a generative model (standard library
only, plus tests/llm/gguf_writer.py's GGUF reader for the vocabulary).

Builds a temporary model repository from the random-weight test model llama-small-q8_0.gguf
(written by the CTest fixture llm_test_models: a 4-layer llama with the llama2 vocabulary, a
chat template and a 2048-token context):
    <tmp>/tiny/1/model.gguf     symlink, no config.pbtxt (the defaults)
    <tmp>/tiny_q/config.pbtxt   backend "kiln_llm", 2 running sequences, a small KV cache and a
    <tmp>/tiny_q/1/model.gguf   waiting queue of 2 (the back-pressure checks)
starts `kiln serve` on free ports and checks, one PASS/FAIL line each:
  - /v1/models and /v1/models/{id}, 404 in OpenAI's error shape;
  - greedy /v1/completions of token-id prompts against `kiln generate` (the engine alone, no
    scheduler): the same text, and the same tokens (logprobs tokens against the vocabulary);
  - batch invariance: concurrent requests of mixed lengths give what each gives alone (greedy,
    and seeded sampling);
  - streaming (completions and chat): SSE framing, strict UTF-8 per event, the concatenation
    equals the non-streamed text, usage chunk, finish_reason, [DONE];
  - stop strings (whole and streamed), n with seed, logprobs, min_tokens / stop_token_ids,
    max_tokens;
  - bad requests: status and OpenAI error shape naming the problem, each followed by a good
    request on the same connection;
  - a client that leaves mid-stream: the sequence is cancelled and its KV blocks freed
    (/metrics);
  - back-pressure: a burst against the small queue gets 429 with Retry-After and the rest
    completes;
  - Triton's generate extension and the KServe v2 text_input / text_output convention give the
    same text; gRPC ModelStreamInfer streams it (when python3-grpcio and --proto-dir are there);
  - the generation metrics against the requests sent;
  - the official `openai` npm client (tests/llm/openai_client_test.mjs; skipped when the package
    is not installed: scripts/install-deps llm);
  - SIGTERM: exit status 0 within 10 s.
Exits 0 when every check passes, 1 otherwise, 77 (skip) when the test model is missing.

    python3 tests/llm/serve_llm_test.py --kiln build/kiln --models build/llm-test-models \
        [--proto-dir build/python_proto]
"""

import argparse
import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "server"))

import prometheus_text as prom  # noqa: E402  (tests/server: a strict exposition parser)

MODEL_FILE = "llama-small-q8_0.gguf"
CONTEXT = 2048  # the test model's context length (make_models.py)
VOCAB = 32000
FIRST_PLAIN_ID = 3  # ids 0..2 are <unk>, <s>, </s>
READY_TIMEOUT_S = 60.0
EXIT_TIMEOUT_S = 10.0
TINY_Q_CONFIG = """backend: "kiln_llm"
parameters { key: "max_num_seqs" value { string_value: "2" } }
parameters { key: "kv_cache_bytes" value { string_value: "4194304" } }
dynamic_batching { default_queue_policy { max_queue_size: 2 } }
"""


class Checks:
    """Collects named pass/fail results and prints them as they happen."""

    def __init__(self):
        self.passed = 0
        self.failed = []
        self.skipped = []

    def check(self, name, ok, detail=""):
        if ok:
            self.passed += 1
            print(f"PASS  {name}", flush=True)
        else:
            self.failed.append(name)
            print(f"FAIL  {name}" + (f": {detail}" if detail else ""), flush=True)
        return ok

    def skip(self, name, why):
        self.skipped.append(name)
        print(f"SKIP  {name}: {why}", flush=True)

    def run(self, name, fn, *args):
        """Runs fn(*args); an exception counts as a failure of `name` (later checks still run)."""
        try:
            fn(*args)
        except Exception as e:  # noqa: BLE001 - report anything and go on
            import traceback
            traceback.print_exc()
            self.check(name, False, f"{type(e).__name__}: {e}")

    def summary(self):
        total = self.passed + len(self.failed)
        print(f"\n{self.passed}/{total} checks passed"
              + (f", {len(self.skipped)} skipped" if self.skipped else ""), flush=True)
        if self.failed:
            print("failed: " + ", ".join(self.failed), flush=True)
        return not self.failed


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------------------------------------
# HTTP helpers.

class Reply:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    def json(self):
        return json.loads(self.body.decode("utf-8"))

    def __repr__(self):
        return f"HTTP {self.status} {self.body[:400]!r}"


class Client:
    """One keep-alive connection."""

    def __init__(self, port, timeout=60):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)

    def request(self, method, path, body=None, headers=None):
        hdrs = dict(headers or {})
        if body is not None:
            if not isinstance(body, (bytes, bytearray)):
                body = body.encode("utf-8") if isinstance(body, str) else json.dumps(body).encode()
            hdrs.setdefault("Content-Type", "application/json")
        self.conn.request(method, path, body=body, headers=hdrs)
        resp = self.conn.getresponse()
        data = resp.read()
        return Reply(resp.status, resp.headers, data)

    def get(self, path):
        return self.request("GET", path)

    def post(self, path, body):
        return self.request("POST", path, body=body)

    def close(self):
        self.conn.close()


def post(port, path, body, timeout=60):
    c = Client(port, timeout)
    try:
        return c.post(path, body)
    finally:
        c.close()


def get(port, path, timeout=30):
    c = Client(port, timeout)
    try:
        return c.get(path)
    finally:
        c.close()


def sse_events(reply):
    """The data payloads of a text/event-stream body: [bytes], each decoded later. Raises
    ValueError when the framing is not "data: ...\\n\\n" throughout."""
    body = reply.body
    if not body.endswith(b"\n\n"):
        raise ValueError(f"stream does not end with a blank line: {body[-80:]!r}")
    out = []
    for event in body[:-2].split(b"\n\n"):
        if not event.startswith(b"data: ") or b"\n" in event:
            raise ValueError(f"event is not one 'data: ' line: {event[:120]!r}")
        out.append(event[len(b"data: "):])
    return out


def sse_json(reply):
    """(objects, ended_with_done): every event but a final [DONE] parsed as JSON after a strict
    UTF-8 decode (a chunk cut inside a character fails here)."""
    events = sse_events(reply)
    done = bool(events) and events[-1] == b"[DONE]"
    if done:
        events = events[:-1]
    objs = [json.loads(e.decode("utf-8", "strict")) for e in events]
    return objs, done


def openai_error(reply, status, type_name, *words):
    """'' when reply is an OpenAI error of that status whose message contains every word
    (case-insensitive), else what is wrong."""
    if reply.status != status:
        return f"status {reply.status}, want {status}: {reply!r}"
    try:
        doc = reply.json()
    except ValueError as e:
        return f"body is not JSON ({e}): {reply!r}"
    err = doc.get("error") if isinstance(doc, dict) else None
    if not isinstance(doc, dict) or set(doc) != {"error"} or not isinstance(err, dict):
        return f"not an OpenAI error body: {doc!r}"
    if set(err) != {"message", "type", "param", "code"}:
        return f"error keys {sorted(err)}, want message/type/param/code: {doc!r}"
    if not isinstance(err["message"], str) or not err["message"]:
        return f"empty message: {doc!r}"
    if err["type"] != type_name or err["code"] != status:
        return f"type/code {err['type']!r}/{err['code']!r}, want {type_name!r}/{status}"
    if err["param"] is not None and not isinstance(err["param"], str):
        return f"param is neither null nor a string: {doc!r}"
    msg = err["message"].lower()
    missing = [w for w in words if w.lower() not in msg]
    if missing:
        return f"message does not name {missing}: {err['message']!r}"
    return ""


def random_ids(rng, n):
    return [rng.randrange(FIRST_PLAIN_ID, VOCAB) for _ in range(n)]


# ---------------------------------------------------------------------------------------------
# Independent references: `kiln generate` (engine alone) and the vocabulary.

def kiln_generate(kiln, model, ids, n):
    """(generated ids, text) of `kiln generate --temperature 0` for a token-id prompt."""
    base = [kiln, "generate", model, "--tokens", ",".join(map(str, ids)), "--max-tokens", str(n),
            "--temperature", "0"]
    p = subprocess.run(base + ["--print-ids"], capture_output=True, timeout=120, check=True)
    doc = json.loads(p.stdout.decode())
    if doc["prompt_tokens"] != ids:
        raise RuntimeError(f"kiln generate changed the prompt: {doc['prompt_tokens']} vs {ids}")
    p = subprocess.run(base, capture_output=True, timeout=120, check=True)
    text = p.stdout
    if not text.endswith(b"\n"):
        raise RuntimeError(f"kiln generate output does not end in a newline: {text[-40:]!r}")
    return doc["tokens"], text[:-1].decode("utf-8", "replace")


def token_texts(model_path):
    """id -> the token's text as the API reports it (SentencePiece '▁' as a space, byte pieces
    <0xNN> as that byte; invalid UTF-8 replaced by U+FFFD), from the GGUF vocabulary."""
    import gguf_writer  # noqa: E402  (numpy; only here)
    pieces = gguf_writer.GGUFReader(model_path).kv["tokenizer.ggml.tokens"]
    out = []
    for p in pieces:
        m = re.fullmatch(r"<0x([0-9A-Fa-f]{2})>", p)
        raw = bytes([int(m.group(1), 16)]) if m else p.replace("\u2581", " ").encode()
        out.append(raw.decode("utf-8", "replace"))
    return out


# ---------------------------------------------------------------------------------------------
# The checks.

class Ctx:
    """What the checks share."""

    def __init__(self, t, port, metrics_port, grpc_port, kiln, model_path, server):
        self.t = t
        self.port = port
        self.metrics_port = metrics_port
        self.grpc_port = grpc_port
        self.kiln = kiln
        self.model_path = model_path
        self.server = server
        self.lock = threading.Lock()

    def completion(self, body, model="tiny", chat=False):
        doc = dict(body)
        doc.setdefault("model", model)
        return post(self.port, "/v1/chat/completions" if chat else "/v1/completions", doc)


def check_models(c):
    t = c.t
    r = get(c.port, "/v1/models")
    ok = r.status == 200
    doc = r.json() if ok else {}
    ids = sorted(m.get("id") for m in doc.get("data", []))
    t.check("GET /v1/models lists tiny and tiny_q (object list)",
            ok and doc.get("object") == "list" and ids == ["tiny", "tiny_q"]
            and all(m.get("object") == "model" and m.get("owned_by") for m in doc["data"]),
            repr(r))
    r = get(c.port, "/v1/models/tiny")
    t.check("GET /v1/models/tiny is 200 with id tiny",
            r.status == 200 and r.json().get("id") == "tiny"
            and r.json().get("object") == "model", repr(r))
    r = get(c.port, "/v1/models/nope")
    err = openai_error(r, 404, "NotFoundError", "nope")
    t.check("GET /v1/models/nope is 404 in OpenAI's error shape", not err, err)
    r = get(c.port, "/v1/nothing-here")
    err = openai_error(r, 404, "NotFoundError")
    t.check("an unknown /v1/ path is 404 in OpenAI's error shape", not err, err)


def check_reference(c):
    """Greedy /v1/completions of token-id prompts == `kiln generate` (text and tokens)."""
    t = c.t
    rng = random.Random(11)
    vocab = token_texts(c.model_path)
    prompts = [[1, 450, 4996], [1] + random_ids(rng, 20), random_ids(rng, 90)]
    n = 24
    for i, ids in enumerate(prompts):
        want_ids, want_text = kiln_generate(c.kiln, c.model_path, ids, n)
        r = c.completion({"prompt": ids, "max_tokens": n, "temperature": 0, "logprobs": 0})
        if not t.check(f"reference {i} ({len(ids)} prompt tokens): 200", r.status == 200, repr(r)):
            continue
        doc = r.json()
        ch = doc["choices"][0]
        t.check(f"reference {i}: text == kiln generate's", ch["text"] == want_text,
                f"server {ch['text']!r}\n      generate {want_text!r}")
        got_tokens = ch["logprobs"]["tokens"]
        want_tokens = [vocab[x] for x in want_ids]
        t.check(f"reference {i}: logprobs tokens == kiln generate's ids ({len(want_ids)})",
                got_tokens == want_tokens, f"server {got_tokens}\n      generate {want_tokens}")
        want_finish = "length" if len(want_ids) == n else "stop"
        t.check(f"reference {i}: finish_reason {want_finish}, usage",
                ch["finish_reason"] == want_finish
                and doc["usage"]["prompt_tokens"] == len(ids)
                and doc["usage"]["completion_tokens"] == len(want_ids)
                and doc["usage"]["total_tokens"] == len(ids) + len(want_ids),
                f"{ch['finish_reason']} {doc['usage']}")
        t.check(f"reference {i}: object text_completion, model tiny, id cmpl-",
                doc.get("object") == "text_completion" and doc.get("model") == "tiny"
                and str(doc.get("id", "")).startswith("cmpl-"), repr(doc)[:300])


def run_concurrently(fns):
    """Calls every fn at once (threads released together); returns their results in order."""
    results = [None] * len(fns)
    barrier = threading.Barrier(len(fns))

    def worker(i):
        barrier.wait()
        try:
            results[i] = fns[i]()
        except Exception as e:  # noqa: BLE001
            results[i] = e

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(fns))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return results


def check_batch_invariance(c):
    t = c.t
    rng = random.Random(5)
    lengths = [5, 300, 17, 140, 9, 64, 256, 33, 7, 200, 100, 12, 80, 290]
    bodies = [{"prompt": random_ids(rng, n), "max_tokens": 24, "temperature": 0,
               "ignore_eos": True} for n in lengths]

    def text_of(r):
        if isinstance(r, Exception) or r.status != 200:
            return f"<{r!r}>"
        return r.json()["choices"][0]["text"]

    alone = [text_of(c.completion(b)) for b in bodies]
    together = run_concurrently([lambda b=b: c.completion(b) for b in bodies])
    together = [text_of(r) for r in together]
    bad = [i for i in range(len(bodies)) if alone[i] != together[i]]
    t.check(f"batch invariance: {len(bodies)} concurrent greedy requests (prompts 5..300 tokens) "
            "== each alone", not bad and all(not a.startswith("<") for a in alone),
            "; ".join(f"#{i} ({lengths[i]} tokens): alone {alone[i]!r} together {together[i]!r}"
                      for i in bad[:3]) or repr(alone[:2]))
    # Seeded sampling.
    bodies = [{"prompt": random_ids(rng, n), "max_tokens": 20, "temperature": 0.8,
               "seed": 1000 + i, "ignore_eos": True} for i, n in enumerate(lengths[:10])]
    alone = [text_of(c.completion(b)) for b in bodies]
    together = [text_of(r) for r in run_concurrently([lambda b=b: c.completion(b)
                                                      for b in bodies])]
    bad = [i for i in range(len(bodies)) if alone[i] != together[i]]
    t.check("batch invariance: 10 concurrent seeded samples (temperature 0.8) == each alone",
            not bad and all(not a.startswith("<") for a in alone),
            "; ".join(f"#{i}: alone {alone[i]!r} together {together[i]!r}" for i in bad[:3]))
    again = text_of(c.completion(bodies[0]))
    t.check("seeded sampling: the same request twice gives the same text", again == alone[0],
            f"{again!r} vs {alone[0]!r}")


def check_streaming(c):
    t = c.t
    prompt = [1, 910, 338, 263, 1243]
    base = {"prompt": prompt, "max_tokens": 40, "temperature": 0, "ignore_eos": True}
    whole = c.completion(base)
    if not t.check("stream baseline: 200", whole.status == 200, repr(whole)):
        return
    want = whole.json()["choices"][0]["text"]
    r = c.completion({**base, "stream": True, "stream_options": {"include_usage": True}})
    t.check("completions stream: 200 text/event-stream",
            r.status == 200 and r.headers.get("Content-Type", "").startswith("text/event-stream"),
            f"{r!r} {r.headers.get('Content-Type')}")
    objs, done = sse_json(r)
    t.check("completions stream: ends with data: [DONE]", done, repr(r.body[-60:]))
    usage = [o for o in objs if o.get("choices") == []]
    chunks = [o for o in objs if o.get("choices")]
    t.check("completions stream: chunks are text_completion objects with one choice 0",
            chunks and all(o.get("object") == "text_completion" and len(o["choices"]) == 1
                           and o["choices"][0]["index"] == 0 for o in chunks),
            repr(objs[:2]))
    text = "".join(o["choices"][0]["text"] for o in chunks)
    t.check("completions stream: the chunks' texts concatenate to the non-streamed text",
            text == want, f"{text!r} vs {want!r}")
    t.check("completions stream: several chunks", len(chunks) > 1, f"{len(chunks)} chunks")
    finishes = [o["choices"][0].get("finish_reason") for o in chunks]
    t.check("completions stream: finish_reason 'length' on the last chunk only",
            finishes[-1] == "length" and all(f is None for f in finishes[:-1]), repr(finishes))
    t.check("completions stream: include_usage -> one last usage chunk, choices [], before [DONE]",
            len(usage) == 1 and objs[-1] is usage[0]
            and usage[0]["usage"]["completion_tokens"] == 40
            and usage[0]["usage"]["prompt_tokens"] == len(prompt), repr(usage))
    t.check("completions stream: other chunks carry usage null (include_usage)",
            all("usage" in o and o["usage"] is None for o in chunks), repr(chunks[0]))
    ids = {o.get("id") for o in objs}
    t.check("completions stream: one id across chunks", len(ids) == 1, repr(ids))
    # Without stream_options: no usage chunk.
    r = c.completion({**base, "stream": True})
    objs, done = sse_json(r)
    t.check("completions stream without include_usage: no usage chunk, same text",
            done and all(o.get("choices") for o in objs)
            and "".join(o["choices"][0]["text"] for o in objs) == want, repr(r)[:300])

    # Chat.
    messages = [{"role": "user", "content": "Write a haiku about the sea."}]
    cbase = {"messages": messages, "max_tokens": 30, "temperature": 0, "ignore_eos": True}
    whole = c.completion(cbase, chat=True)
    if not t.check("chat baseline: 200 chat.completion, assistant message",
                   whole.status == 200 and whole.json().get("object") == "chat.completion"
                   and whole.json()["choices"][0]["message"]["role"] == "assistant"
                   and whole.json()["choices"][0]["finish_reason"] == "length"
                   and whole.json()["usage"]["completion_tokens"] == 30, repr(whole)):
        return
    want = whole.json()["choices"][0]["message"]["content"]
    r = c.completion({**cbase, "stream": True, "stream_options": {"include_usage": True}},
                     chat=True)
    t.check("chat stream: 200 text/event-stream",
            r.status == 200 and r.headers.get("Content-Type", "").startswith("text/event-stream"),
            repr(r))
    objs, done = sse_json(r)
    chunks = [o for o in objs if o.get("choices")]
    usage = [o for o in objs if o.get("choices") == []]
    t.check("chat stream: ends with [DONE], chunks are chat.completion.chunk",
            done and chunks and all(o.get("object") == "chat.completion.chunk" for o in objs),
            repr(objs[:2]))
    deltas = [o["choices"][0].get("delta", {}) for o in chunks]
    t.check("chat stream: the first delta has role assistant", deltas[0].get("role") == "assistant",
            repr(deltas[:2]))
    text = "".join(d.get("content") or "" for d in deltas)
    t.check("chat stream: the deltas concatenate to the non-streamed content", text == want,
            f"{text!r} vs {want!r}")
    finishes = [o["choices"][0].get("finish_reason") for o in chunks]
    t.check("chat stream: finish_reason 'length' on the last chunk only",
            finishes[-1] == "length" and all(f is None for f in finishes[:-1]), repr(finishes))
    t.check("chat stream: a usage chunk last (30 completion tokens)",
            len(usage) == 1 and objs[-1] is usage[0]
            and usage[0]["usage"]["completion_tokens"] == 30, repr(usage))


def pick_stop(text):
    """A 3-character substring from the middle of `text` with no U+FFFD (bytes the server
    could not show), or None."""
    for start in range(len(text) // 2, len(text) - 3):
        s = text[start:start + 3]
        if "\ufffd" not in s and s.strip():
            return s
    return None


def check_stop_strings(c):
    t = c.t
    base = {"prompt": [1, 450, 4996, 17354, 1701], "max_tokens": 40, "temperature": 0,
            "ignore_eos": True}
    r = c.completion(base)
    if not t.check("stop baseline: 200", r.status == 200, repr(r)):
        return
    full = r.json()["choices"][0]["text"]
    stop = pick_stop(full)
    if not t.check("stop: the greedy text has a usable middle substring", stop is not None,
                   repr(full)):
        return
    want = full[:full.find(stop)]
    r = c.completion({**base, "stop": [stop]})
    ch = r.json()["choices"][0] if r.status == 200 else {}
    t.check(f"stop {stop!r}: text is the prefix before its first occurrence, finish stop",
            ch.get("text") == want and ch.get("finish_reason") == "stop",
            f"{r!r}\n      want {want!r}")
    t.check("stop: stop_reason names the stop string", ch.get("stop_reason") == stop, repr(ch))
    # As a plain string, with another stop string that never occurs.
    r = c.completion({**base, "stop": stop})
    t.check("stop as a string: same prefix",
            r.status == 200 and r.json()["choices"][0]["text"] == want, repr(r))
    r = c.completion({**base, "stream": True, "stop": ["\x01never", stop]})
    objs, done = sse_json(r)
    texts = [o["choices"][0]["text"] for o in objs if o.get("choices")]
    t.check("stop streamed: the chunks concatenate to the prefix, none holds the stop string",
            done and "".join(texts) == want and not any(stop in x for x in texts),
            f"{texts!r} want {want!r}")
    t.check("stop streamed: finish_reason stop on the last chunk",
            objs and objs[-1]["choices"][0].get("finish_reason") == "stop", repr(objs[-1:]))
    # Chat with the same idea.
    cbase = {"messages": [{"role": "user", "content": "Tell me a story."}], "max_tokens": 40,
             "temperature": 0, "ignore_eos": True}
    r = c.completion(cbase, chat=True)
    full = r.json()["choices"][0]["message"]["content"] if r.status == 200 else ""
    stop = pick_stop(full)
    if stop is not None:
        want = full[:full.find(stop)]
        r = c.completion({**cbase, "stop": stop}, chat=True)
        ch = r.json()["choices"][0] if r.status == 200 else {}
        t.check(f"chat stop {stop!r}: content is the prefix, finish stop",
                ch.get("message", {}).get("content") == want
                and ch.get("finish_reason") == "stop", f"{r!r} want {want!r}")
        r = c.completion({**cbase, "stop": stop, "stream": True}, chat=True)
        objs, done = sse_json(r)
        parts = [o["choices"][0]["delta"].get("content") or "" for o in objs]
        t.check("chat stop streamed: deltas concatenate to the prefix, none holds the stop",
                done and "".join(parts) == want and not any(stop in p for p in parts),
                f"{parts!r} want {want!r}")


def check_n_and_logprobs(c):
    t = c.t
    body = {"prompt": [1, 1724, 338], "max_tokens": 12, "temperature": 0.8, "seed": 42, "n": 3,
            "ignore_eos": True}
    r1, r2 = c.completion(body), c.completion(body)
    if not t.check("n=3: 200", r1.status == 200 and r2.status == 200, f"{r1!r} {r2!r}"):
        return
    d1, d2 = r1.json(), r2.json()
    t.check("n=3: three choices with indices 0, 1, 2",
            sorted(ch["index"] for ch in d1["choices"]) == [0, 1, 2], repr(d1)[:300])
    texts1 = [ch["text"] for ch in sorted(d1["choices"], key=lambda ch: ch["index"])]
    texts2 = [ch["text"] for ch in sorted(d2["choices"], key=lambda ch: ch["index"])]
    t.check("n=3 with seed: the same request again gives the same three texts", texts1 == texts2,
            f"{texts1!r} vs {texts2!r}")
    t.check("n=3: the choices differ (sampling at temperature 0.8)", len(set(texts1)) > 1,
            repr(texts1))
    t.check("n=3: usage.completion_tokens sums the choices (3 x 12)",
            d1["usage"]["completion_tokens"] == 36
            and all(ch["finish_reason"] == "length" for ch in d1["choices"]), repr(d1["usage"]))
    r = c.completion({**body, "stream": True})
    objs, done = sse_json(r)
    streamed = {}
    for o in objs:
        for ch in o["choices"]:
            streamed[ch["index"]] = streamed.get(ch["index"], "") + ch["text"]
    t.check("n=3 streamed: each choice's chunks concatenate to its text",
            done and [streamed.get(i) for i in range(3)] == texts1, repr(streamed))

    # Completions logprobs: 2 (greedy: the chosen token is the most likely one).
    def pairs_hook(pairs):
        return {"__pairs__": pairs} if pairs and all(isinstance(v, float) for _, v in pairs) \
            else dict(pairs)

    r = c.completion({"prompt": [1, 450, 4996], "max_tokens": 10, "temperature": 0,
                      "logprobs": 2, "ignore_eos": True})
    lp = json.loads(r.body.decode(), object_pairs_hook=pairs_hook)["choices"][0]["logprobs"] \
        if r.status == 200 else None
    if t.check("completions logprobs 2: 200 with logprobs", lp is not None, repr(r)):
        tops = [x["__pairs__"] for x in lp["top_logprobs"]]
        t.check("completions logprobs 2: 10 tokens, 10 token_logprobs, 10 top_logprobs",
                len(lp["tokens"]) == len(lp["token_logprobs"]) == len(tops) == 10
                and len(lp["text_offset"]) == 10, repr(lp)[:300])
        t.check("completions logprobs 2: every top_logprobs dict has 2 entries",
                all(len(d) == 2 for d in tops), repr(tops[:3]))
        t.check("completions logprobs 2: token_logprobs <= 0, top values sorted, <= 0",
                all(v <= 0 for v in lp["token_logprobs"])
                and all(d[0][1] >= d[1][1] and d[0][1] <= 0 for d in tops), repr(tops[:3]))
        t.check("completions logprobs 2 (greedy): each token is its top entry, same logprob",
                all(d[0][0] == tok and abs(d[0][1] - v) < 1e-4
                    for d, tok, v in zip(tops, lp["tokens"], lp["token_logprobs"])),
                repr(list(zip(lp["tokens"], tops))[:3]))
        text = r.json()["choices"][0]["text"]
        t.check("completions logprobs: the tokens concatenate to the text",
                "".join(lp["tokens"]) == text, f"{lp['tokens']!r} vs {text!r}")
        offs = [len("".join(lp["tokens"][:i])) for i in range(len(lp["tokens"]))]
        t.check("completions logprobs: text_offset counts characters before each token",
                lp["text_offset"] == offs, f"{lp['text_offset']} want {offs}")

    # Chat logprobs: true, top_logprobs: 3.
    r = c.completion({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8,
                      "temperature": 0, "logprobs": True, "top_logprobs": 3,
                      "ignore_eos": True}, chat=True)
    if t.check("chat logprobs: 200", r.status == 200, repr(r)):
        ch = r.json()["choices"][0]
        content = (ch.get("logprobs") or {}).get("content")
        ok = isinstance(content, list) and len(content) == 8
        t.check("chat logprobs: 8 content entries with token, logprob <= 0, bytes, 3 top_logprobs",
                ok and all(set(e) >= {"token", "logprob", "bytes", "top_logprobs"}
                           and e["logprob"] <= 0 and len(e["top_logprobs"]) == 3
                           and all(x["logprob"] <= 0 and isinstance(x["bytes"], list)
                                   for x in e["top_logprobs"])
                           for e in content), repr(ch)[:400])
        if ok:
            t.check("chat logprobs: bytes are the token's UTF-8 where it is whole text",
                    all(bytes(e["bytes"]) == e["token"].encode() for e in content
                        if "\ufffd" not in e["token"]), repr(content[:2]))
            joined = b"".join(bytes(e["bytes"]) for e in content)
            t.check("chat logprobs: the tokens' bytes concatenate to the content",
                    joined.decode("utf-8", "replace") == ch["message"]["content"],
                    f"{joined!r} vs {ch['message']['content']!r}")
    r = c.completion({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4},
                     chat=True)
    t.check("chat without logprobs: logprobs null",
            r.status == 200 and r.json()["choices"][0].get("logprobs") is None, repr(r))


def check_lengths(c):
    t = c.t
    prompt = [1, 3439, 17443, 29892]
    r = c.completion({"prompt": prompt, "max_tokens": 7, "temperature": 0, "ignore_eos": True})
    d = r.json() if r.status == 200 else {}
    t.check("max_tokens 7 with ignore_eos: finish length, usage.completion_tokens == 7",
            d.get("usage", {}).get("completion_tokens") == 7
            and d["choices"][0]["finish_reason"] == "length", repr(r))
    r = c.completion({"prompt": prompt, "max_tokens": 13, "temperature": 0.9, "seed": 3})
    d = r.json() if r.status == 200 else {}
    fin = d.get("choices", [{}])[0].get("finish_reason")
    used = d.get("usage", {}).get("completion_tokens")
    t.check("ignore_eos false: finish length means completion_tokens == max_tokens",
            (fin == "length" and used == 13) or (fin == "stop" and used is not None and used <= 13),
            repr(r))
    # Without max_tokens: the completions default, 16 tokens (OpenAI's legacy default).
    r = c.completion({"prompt": prompt, "temperature": 0, "ignore_eos": True})
    t.check("completions without max_tokens: 16 tokens",
            r.status == 200 and r.json()["usage"]["completion_tokens"] == 16, repr(r))
    # stop_token_ids / min_tokens: make the greedy path's 4th token a stop token.
    greedy = c.completion({"prompt": prompt, "max_tokens": 12, "temperature": 0,
                           "ignore_eos": True, "logprobs": 0})
    ids, text = None, ""
    if greedy.status == 200:
        ch = greedy.json()["choices"][0]
        text = ch["text"]
        ids, _ = kiln_generate(c.kiln, c.model_path, prompt, 12)
    if not t.check("min_tokens baseline: 200 and kiln generate agree", ids is not None,
                   repr(greedy)):
        return
    k = next((i for i in range(2, 8) if ids[i] not in ids[:i]), None)
    if k is None:
        t.skip("stop_token_ids / min_tokens", f"no fresh token in {ids[:8]}")
        return
    body = {"prompt": prompt, "max_tokens": 12, "temperature": 0, "stop_token_ids": [ids[k]]}
    r = c.completion(body)
    d = r.json() if r.status == 200 else {}
    t.check(f"stop_token_ids [{ids[k]}] (greedy token {k}): finish stop after {k} or {k + 1} "
            "tokens, text a prefix of the greedy text",
            d.get("choices", [{}])[0].get("finish_reason") == "stop"
            and d["usage"]["completion_tokens"] in (k, k + 1)
            and text.startswith(d["choices"][0]["text"]), repr(r))
    r = c.completion({**body, "min_tokens": 9})
    d = r.json() if r.status == 200 else {}
    t.check("min_tokens 9 (ignore_eos false): at least 9 tokens despite the stop token",
            d.get("usage", {}).get("completion_tokens", 0) >= 9, repr(r))


def check_errors(c):
    """Every bad request: its status, OpenAI's error shape naming the problem; then a good
    request on the same connection."""
    t = c.t
    conn = Client(c.port)
    good = {"model": "tiny", "prompt": [1, 2000, 3000], "max_tokens": 2}
    good_chat = {"model": "tiny", "messages": [{"role": "user", "content": "x"}], "max_tokens": 2}
    cases = [
        ("malformed JSON", "/v1/completions", b'{"model": "tiny", "prompt": ', 400, ["json"]),
        ("temperature \"hot\"", "/v1/completions",
         {"model": "tiny", "prompt": "a", "temperature": "hot"}, 400, ["temperature"]),
        ("unknown model", "/v1/completions", {"model": "nope", "prompt": "a"}, 404, ["nope"]),
        ("empty prompt", "/v1/completions", {"model": "tiny", "prompt": ""}, 400, ["prompt"]),
        ("empty token prompt", "/v1/completions", {"model": "tiny", "prompt": []}, 400,
         ["prompt"]),
        ("no prompt", "/v1/completions", {"model": "tiny"}, 400, ["prompt"]),
        ("prompt of 2100 tokens", "/v1/completions",
         {"model": "tiny", "prompt": [5] * 2100, "max_tokens": 4}, 400, ["2100", str(CONTEXT)]),
        ("prompt + max_tokens over the context", "/v1/completions",
         {"model": "tiny", "prompt": [5] * 2000, "max_tokens": 100}, 400, ["2100", str(CONTEXT)]),
        ("max_tokens -1", "/v1/completions", {"model": "tiny", "prompt": "a", "max_tokens": -1},
         400, ["max_tokens"]),
        ("max_tokens 0", "/v1/completions", {"model": "tiny", "prompt": "a", "max_tokens": 0},
         400, ["max_tokens"]),
        ("max_tokens 10**12", "/v1/completions",
         {"model": "tiny", "prompt": [1, 2], "max_tokens": 10**12}, 400, ["1000000000000"]),
        ("max_tokens 2.5", "/v1/completions", {"model": "tiny", "prompt": "a", "max_tokens": 2.5},
         400, ["max_tokens"]),
        ("temperature -0.5", "/v1/completions",
         {"model": "tiny", "prompt": "a", "temperature": -0.5}, 400, ["temperature"]),
        ("top_p 0", "/v1/completions", {"model": "tiny", "prompt": "a", "top_p": 0}, 400,
         ["top_p"]),
        ("top_p 1.5", "/v1/completions", {"model": "tiny", "prompt": "a", "top_p": 1.5}, 400,
         ["top_p"]),
        ("n 0", "/v1/completions", {"model": "tiny", "prompt": "a", "n": 0}, 400, ["'n'"]),
        ("n 17", "/v1/completions", {"model": "tiny", "prompt": "a", "n": 17}, 400, ["'n'"]),
        ("17 stop strings", "/v1/completions",
         {"model": "tiny", "prompt": "a", "stop": [f"s{i}" for i in range(17)]}, 400, ["stop"]),
        ("an empty stop string", "/v1/completions",
         {"model": "tiny", "prompt": "a", "stop": [""]}, 400, ["stop"]),
        ("logprobs 6", "/v1/completions", {"model": "tiny", "prompt": "a", "logprobs": 6}, 400,
         ["logprobs"]),
        ("a token id outside the vocabulary", "/v1/completions",
         {"model": "tiny", "prompt": [1, VOCAB + 5]}, 400, [str(VOCAB + 5)]),
        ("invalid UTF-8 in the body", "/v1/completions",
         b'{"model": "tiny", "prompt": "ab\xff\xfe"}', 400, ["utf-8"]),
        ("a JSON array body", "/v1/completions", b'[1, 2]', 400, []),
        ("batched prompts", "/v1/completions", {"model": "tiny", "prompt": ["a", "b"]}, 400,
         ["prompt"]),
        ("messages not a list", "/v1/chat/completions",
         {"model": "tiny", "messages": "hello"}, 400, ["messages"]),
        ("empty messages", "/v1/chat/completions", {"model": "tiny", "messages": []}, 400,
         ["messages"]),
        ("message without role", "/v1/chat/completions",
         {"model": "tiny", "messages": [{"content": "x"}]}, 400, ["role"]),
        ("top_logprobs without logprobs", "/v1/chat/completions",
         {"model": "tiny", "messages": [{"role": "user", "content": "x"}], "top_logprobs": 2},
         400, ["logprobs"]),
        ("chat unknown model", "/v1/chat/completions",
         {"model": "nope", "messages": [{"role": "user", "content": "x"}]}, 404, ["nope"]),
    ]
    params = {"temperature \"hot\"": "temperature", "max_tokens -1": "max_tokens",
              "top_p 1.5": "top_p", "n 17": "n", "messages not a list": "messages",
              "unknown model": "model"}
    for name, path, body, status, words in cases:
        r = conn.request("POST", path, body=body if isinstance(body, bytes) else json.dumps(body),
                         headers={"Content-Type": "application/json"})
        type_name = {400: "BadRequestError", 404: "NotFoundError"}[status]
        err = openai_error(r, status, type_name, *words)
        if not err and name in params and r.json()["error"]["param"] != params[name]:
            err = f"param {r.json()['error']['param']!r}, want {params[name]!r}"
        t.check(f"error: {name} -> {status}", not err, err)
        g = conn.post(path, good_chat if "chat" in path else good)
        t.check(f"error: {name}: a good request on the same connection then succeeds",
                g.status == 200, repr(g))
    conn.close()
    # The longest prompt that fits: the context minus the one token to generate.
    r = c.completion({"prompt": [5] * (CONTEXT - 1), "max_tokens": 1, "temperature": 0})
    t.check(f"a prompt of {CONTEXT - 1} tokens and max_tokens 1 runs (the context is full)",
            r.status == 200 and r.json()["usage"]["completion_tokens"] == 1, repr(r))


def metrics(c):
    r = get(c.metrics_port, "/metrics")
    if r.status != 200:
        raise RuntimeError(f"/metrics answered {r!r}")
    return prom.parse(r.body.decode())


def gen_metric(fams, name, model="tiny", **labels):
    return prom.value(fams, name, model=model, version="1", **labels)


def check_disconnect(c):
    t = c.t
    before = gen_metric(metrics(c), "kiln_gen_cancellations_total")
    body = json.dumps({"model": "tiny", "prompt": [1, 450], "max_tokens": 2000, "stream": True,
                       "ignore_eos": True, "temperature": 0}).encode()
    s = socket.create_connection(("127.0.0.1", c.port), timeout=30)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    got = b""
    while True:  # up to the end of the first event
        _, sep, rest = got.partition(b"\r\n\r\n")
        if sep and b"data: " in rest and b"\n\n" in rest[rest.find(b"data: "):]:
            break
        part = s.recv(4096)
        if not part:
            break
        got += part
    t.check("disconnect: the stream started (200, a first event)",
            got.startswith(b"HTTP/1.1 200") and b"data: {" in got, repr(got[:200]))
    s.close()
    deadline = time.monotonic() + 10
    state = None
    while time.monotonic() < deadline:
        f = metrics(c)
        state = (gen_metric(f, "kiln_gen_running_sequences"),
                 gen_metric(f, "kiln_gen_kv_cache_blocks", state="used"),
                 gen_metric(f, "kiln_gen_cancellations_total"))
        if state[0] == 0 and state[1] == 0 and state[2] >= before + 1:
            break
        time.sleep(0.05)
    t.check("disconnect: the sequence is cancelled and freed (running 0, KV blocks used 0, "
            "cancellations +1)", state is not None and state[0] == 0 and state[1] == 0
            and state[2] >= before + 1,
            f"running {state[0]}, used {state[1]}, cancellations {before} -> {state[2]}")
    r = c.completion({"prompt": [1, 450], "max_tokens": 3})
    t.check("disconnect: the next request succeeds", r.status == 200, repr(r))


def check_back_pressure(c):
    t = c.t
    n = 20
    body = json.dumps({"model": "tiny_q", "prompt": [1, 450, 4996], "max_tokens": 500,
                       "ignore_eos": True, "temperature": 0})
    conns = [http.client.HTTPConnection("127.0.0.1", c.port, timeout=120) for _ in range(n)]
    for conn in conns:
        conn.connect()

    def send(conn):
        conn.request("POST", "/v1/completions", body=body,
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        return Reply(resp.status, resp.headers, resp.read())

    replies = run_concurrently([lambda conn=conn: send(conn) for conn in conns])
    for conn in conns:
        conn.close()
    errors = [r for r in replies if isinstance(r, Exception)]
    ok = [r for r in replies if not isinstance(r, Exception) and r.status == 200]
    busy = [r for r in replies if not isinstance(r, Exception) and r.status == 429]
    other = [r for r in replies if not isinstance(r, Exception) and r.status not in (200, 429)]
    t.check(f"back-pressure: {n} concurrent requests on tiny_q (2 running, queue 2): only 200 "
            "and 429", not errors and not other, repr((errors + other)[:3]))
    print(f"      ({len(ok)} x 200, {len(busy)} x 429)", flush=True)
    t.check("back-pressure: some requests get 429", len(busy) >= 1,
            f"{len(ok)} x 200, {len(busy)} x 429")
    t.check("back-pressure: at least 2 complete", len(ok) >= 2, f"{len(ok)} x 200")
    bad = [openai_error(r, 429, "RateLimitError", "queue") for r in busy]
    bad = [e for e in bad if e]
    t.check("back-pressure: each 429 is an OpenAI RateLimitError naming the queue", not bad,
            bad[0] if bad else "")
    t.check("back-pressure: each 429 has a Retry-After header",
            all(r.headers.get("Retry-After") for r in busy),
            repr([dict(r.headers) for r in busy][:1]))
    t.check("back-pressure: the completed ones have 500 tokens, finish length",
            all(r.json()["usage"]["completion_tokens"] == 500
                and r.json()["choices"][0]["finish_reason"] == "length" for r in ok),
            repr(ok[:1]))
    texts = {r.json()["choices"][0]["text"] for r in ok}
    t.check("back-pressure: the completed (greedy, same prompt) texts are equal", len(texts) == 1,
            f"{len(texts)} different texts")
    t.check("back-pressure: the server is alive and ready",
            c.server.poll() is None and get(c.port, "/v2/health/ready").status == 200)
    r = c.completion({"prompt": [1, 450, 4996], "max_tokens": 5}, model="tiny_q")
    t.check("back-pressure: tiny_q answers again afterwards", r.status == 200, repr(r))


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def check_many_streams(c):
    """500 streams at once on tiny (max_num_seqs 64, the default queue of 256): each is answered
    200 (a whole stream) or 429, the server's memory stays bounded, and it keeps serving."""
    t = c.t
    n = 500
    body = json.dumps({"model": "tiny", "prompt": [1, 450, 4996], "max_tokens": 200,
                       "ignore_eos": True, "temperature": 0, "stream": True}).encode()
    head = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode())
    rss_before = rss_kib(c.server.pid)
    peak = [rss_before]
    done = threading.Event()

    def watch():
        while not done.is_set():
            peak[0] = max(peak[0], rss_kib(c.server.pid))
            time.sleep(0.02)

    def one():
        s = socket.create_connection(("127.0.0.1", c.port), timeout=120)
        try:
            s.sendall(head + body)
            data = b""
            while True:
                part = s.recv(65536)
                if not part:
                    break
                data += part
            return data
        finally:
            s.close()

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        replies = run_concurrently([one] * n)
    finally:
        done.set()
        watcher.join()
    errors = [r for r in replies if isinstance(r, Exception)]
    ok = [r for r in replies if isinstance(r, bytes) and r.startswith(b"HTTP/1.1 200")
          and r.rstrip().endswith(b"0") and b"data: [DONE]" in r]
    busy = [r for r in replies if isinstance(r, bytes) and r.startswith(b"HTTP/1.1 429")]
    other = [r for r in replies if isinstance(r, bytes) and r not in ok and r not in busy]
    print(f"      ({len(ok)} complete streams, {len(busy)} x 429, {len(other)} other, "
          f"{len(errors)} client errors; RSS {rss_before // 1024} -> peak {peak[0] // 1024} MiB)",
          flush=True)
    t.check(f"{n} concurrent streams: each is a whole stream or a 429",
            not errors and not other, repr((errors + [o[:200] for o in other])[:2]))
    t.check(f"{n} concurrent streams: the queue bound answers some 429", len(busy) >= 1,
            f"{len(busy)} x 429")
    t.check(f"{n} concurrent streams: at least 64 complete", len(ok) >= 64, f"{len(ok)}")
    t.check(f"{n} concurrent streams: peak RSS grows by less than 256 MiB",
            peak[0] - rss_before < 256 * 1024, f"{rss_before} -> {peak[0]} KiB")
    t.check(f"{n} concurrent streams: the server is alive and ready",
            c.server.poll() is None and get(c.port, "/v2/health/ready").status == 200)
    r = c.completion({"prompt": [1, 450], "max_tokens": 3})
    t.check(f"{n} concurrent streams: the next request succeeds", r.status == 200, repr(r))


def check_triton_generate(c):
    t = c.t
    prompt = "The quick brown fox"
    params = {"max_tokens": 20, "temperature": 0, "ignore_eos": True}
    r = c.completion({"prompt": prompt, **params})
    if not t.check("text prompt completion: 200", r.status == 200, repr(r)):
        return
    want = r.json()["choices"][0]["text"]
    t.check("text prompt: usage counts BOS + the prompt's tokens (> 1)",
            r.json()["usage"]["prompt_tokens"] > 1, repr(r.json()["usage"]))
    r = post(c.port, "/v2/models/tiny/generate", {"text_input": prompt, "parameters": params})
    d = r.json() if r.status == 200 else {}
    t.check("v2 generate: text_output == the completions text", d.get("text_output") == want,
            f"{r!r} want {want!r}")
    t.check("v2 generate: model_name tiny, model_version \"1\", finish_reason length",
            d.get("model_name") == "tiny" and d.get("model_version") == "1"
            and d.get("finish_reason") == "length", repr(d))
    r = post(c.port, "/v2/models/tiny/versions/1/generate",
             {"text_input": prompt, "parameters": {k: str(v) for k, v in params.items()}})
    t.check("v2 generate (versioned URL, parameters as strings): same text",
            r.status == 200 and r.json().get("text_output") == want, repr(r))
    r = post(c.port, "/v2/models/tiny/generate_stream", {"text_input": prompt,
                                                          "parameters": params})
    t.check("v2 generate_stream: 200 text/event-stream",
            r.status == 200 and r.headers.get("Content-Type", "").startswith("text/event-stream"),
            repr(r))
    objs, done = sse_json(r)
    text = "".join(o.get("text_output", "") for o in objs)
    t.check("v2 generate_stream: the events' text_output concatenate to the same text",
            text == want and len(objs) > 1, f"{text!r} vs {want!r} ({len(objs)} events)")
    t.check("v2 generate_stream: finish_reason length on the last event",
            objs and objs[-1].get("finish_reason") == "length", repr(objs[-1:]))
    r = post(c.port, "/v2/models/tiny/generate",
             {"text_input": prompt, "parameters": {**params, "exclude_input_in_output": False}})
    t.check("v2 generate exclude_input_in_output false: text_output is prompt + text",
            r.status == 200 and r.json().get("text_output") == prompt + want, repr(r))
    r = post(c.port, "/v2/models/tiny/generate", {"text_input": prompt,
                                                   "parameters": {"temperature": 5}})
    t.check("v2 generate: temperature 5 -> 400 {\"error\"} naming it",
            r.status == 400 and "temperature" in r.json().get("error", ""), repr(r))
    r = post(c.port, "/v2/models/tiny/generate", {"parameters": params})
    t.check("v2 generate: no text_input -> 400 naming it",
            r.status == 400 and "text_input" in r.json().get("error", ""), repr(r))
    r = post(c.port, "/v2/models/tiny/generate", {"text_input": prompt,
                                                   "parameters": {"stream": True}})
    t.check("v2 generate: stream true on /generate -> 400", r.status == 400, repr(r))

    # KServe v2 tensors: text_input / sampling_parameters -> text_output.
    def infer(extra_inputs, **top):
        body = {"inputs": [{"name": "text_input", "datatype": "BYTES", "shape": [1],
                            "data": [prompt]},
                           {"name": "sampling_parameters", "datatype": "BYTES", "shape": [1],
                            "data": [json.dumps(params)]}] + extra_inputs}
        body.update(top)
        return post(c.port, "/v2/models/tiny/infer", body)

    r = infer([])
    out = {o["name"]: o for o in r.json().get("outputs", [])} if r.status == 200 else {}
    t.check("v2 infer: text_output BYTES == the completions text",
            out.get("text_output", {}).get("datatype") == "BYTES"
            and out["text_output"]["data"] == [want], f"{r!r} want {want!r}")
    r = infer([{"name": "stream", "datatype": "BOOL", "shape": [1], "data": [True]}])
    t.check("v2 infer: stream true -> 400 naming stream",
            r.status == 400 and "stream" in r.json().get("error", ""), repr(r))
    r = infer([{"name": "exclude_input_in_output", "datatype": "BOOL", "shape": [1],
                "data": [False]}])
    t.check("v2 infer: exclude_input_in_output false -> prompt + text",
            r.status == 200 and r.json()["outputs"][0]["data"] == [prompt + want], repr(r))
    r = post(c.port, "/v2/models/tiny/infer", {"inputs": [
        {"name": "text_input", "datatype": "BYTES", "shape": [1], "data": [prompt]},
        {"name": "sampling_parameters", "datatype": "BYTES", "shape": [1],
         "data": ['{"top_p": 7}']}]})
    t.check("v2 infer: bad sampling_parameters -> 400 naming the field",
            r.status == 400 and "top_p" in r.json().get("error", ""), repr(r))
    r = get(c.port, "/v2/models/tiny")
    d = r.json() if r.status == 200 else {}
    t.check("v2 model metadata: inputs include text_input, outputs text_output",
            "text_input" in [i["name"] for i in d.get("inputs", [])]
            and [o["name"] for o in d.get("outputs", [])] == ["text_output"], repr(r))
    c.generate_text = (prompt, params, want)


def check_grpc(c, proto_dir):
    t = c.t
    if not proto_dir:
        t.skip("gRPC ModelStreamInfer", "no --proto-dir")
        return
    sys.path.insert(0, proto_dir)
    try:
        import grpc
        import grpc_service_pb2 as pb
    except ImportError as e:
        t.skip("gRPC ModelStreamInfer", f"python3-grpcio or the message classes: {e}")
        return
    prompt, params, want = c.generate_text
    channel = grpc.insecure_channel(f"127.0.0.1:{c.grpc_port}")

    def request(stream, rid):
        req = pb.ModelInferRequest(model_name="tiny", id=rid)
        x = req.inputs.add(name="text_input", datatype="BYTES", shape=[1])
        x.contents.bytes_contents.append(prompt.encode())
        x = req.inputs.add(name="sampling_parameters", datatype="BYTES", shape=[1])
        x.contents.bytes_contents.append(json.dumps(params).encode())
        x = req.inputs.add(name="stream", datatype="BOOL", shape=[1])
        x.contents.bool_contents.append(stream)
        return req

    def text_of(resp):
        r = resp.infer_response
        if r.raw_output_contents:
            raw = r.raw_output_contents[0]
            n = int.from_bytes(raw[:4], "little")
            return raw[4:4 + n].decode()
        return r.outputs[0].contents.bytes_contents[0].decode()

    call = channel.stream_stream(
        "/inference.GRPCInferenceService/ModelStreamInfer",
        request_serializer=pb.ModelInferRequest.SerializeToString,
        response_deserializer=pb.ModelStreamInferResponse.FromString)
    resps = list(call(iter([request(True, "s1")]), timeout=60))
    errs = [r.error_message for r in resps if r.error_message]
    t.check("gRPC ModelStreamInfer stream true: several responses, no error",
            len(resps) > 1 and not errs, f"{len(resps)} responses, errors {errs}")
    if errs:
        return
    text = "".join(text_of(r) for r in resps)
    t.check("gRPC stream: the responses' text_output concatenate to the full text",
            text == want, f"{text!r} vs {want!r}")
    finals = [r.infer_response.parameters["triton_final_response"].bool_param for r in resps]
    t.check("gRPC stream: only the last response is triton_final_response",
            finals[-1] and not any(finals[:-1]), repr(finals))
    t.check("gRPC stream: every response names the model and the request id",
            all(r.infer_response.model_name == "tiny" and r.infer_response.id == "s1"
                for r in resps))
    resps = list(call(iter([request(False, "s2")]), timeout=60))
    t.check("gRPC ModelStreamInfer stream false: one final response with the whole text",
            len(resps) == 1 and not resps[0].error_message and text_of(resps[0]) == want,
            repr(resps)[:300])
    channel.close()


def check_metrics(c):
    """Deltas over K known requests, then totals against the whole run."""
    t = c.t
    f0 = metrics(c)
    lengths = [(4, 5), (9, 3), (30, 7), (2, 11)]  # (prompt tokens, max_tokens), ignore_eos
    rng = random.Random(9)
    for n_prompt, n_out in lengths:
        r = c.completion({"prompt": random_ids(rng, n_prompt), "max_tokens": n_out,
                          "ignore_eos": True})
        if r.status != 200:
            t.check("metrics: requests succeed", False, repr(r))
            return
    # The statistics and the KV gauges are updated on the model's scheduler thread, possibly just
    # after the answer went out: wait (briefly) until the last request is counted and idle.
    deadline = time.monotonic() + 5
    while True:
        f1 = metrics(c)
        idle = (gen_metric(f1, "kiln_gen_running_sequences") == 0
                and gen_metric(f1, "kiln_gen_kv_cache_blocks", state="used") == 0)
        counted = (gen_metric(f1, "kiln_gen_e2e_request_latency_seconds_count")
                   - gen_metric(f0, "kiln_gen_e2e_request_latency_seconds_count")) >= len(lengths)
        if (idle and counted) or time.monotonic() > deadline:
            break
        time.sleep(0.05)

    def delta(name, **labels):
        return gen_metric(f1, name, **labels) - gen_metric(f0, name, **labels)

    want_prompt = sum(p for p, _ in lengths)
    want_out = sum(o for _, o in lengths)
    t.check(f"metrics: kiln_gen_prompt_tokens_total grew by {want_prompt}",
            delta("kiln_gen_prompt_tokens_total") == want_prompt,
            str(delta("kiln_gen_prompt_tokens_total")))
    t.check(f"metrics: kiln_gen_generation_tokens_total grew by {want_out}",
            delta("kiln_gen_generation_tokens_total") == want_out,
            str(delta("kiln_gen_generation_tokens_total")))
    for h in ("time_to_first_token_seconds", "e2e_request_latency_seconds", "queue_time_seconds"):
        d = delta(f"kiln_gen_{h}_count")
        t.check(f"metrics: kiln_gen_{h} count grew by {len(lengths)}", d == len(lengths), str(d))
    d = delta("kiln_gen_requests_finished_total", reason="length")
    t.check(f"metrics: kiln_gen_requests_finished_total{{reason=length}} grew by {len(lengths)}",
            d == len(lengths), str(d))
    d = delta("kiln_gen_prompt_tokens_sum")
    t.check(f"metrics: kiln_gen_prompt_tokens histogram sum grew by {want_prompt}",
            d == want_prompt, str(d))
    state = {k: gen_metric(f1, n, **lb) for k, n, lb in [
        ("running", "kiln_gen_running_sequences", {}),
        ("waiting", "kiln_gen_waiting_sequences", {}),
        ("used", "kiln_gen_kv_cache_blocks", {"state": "used"})]}
    t.check("metrics: nothing running, waiting or using KV blocks when idle",
            not any(state.values()), repr(state))
    t.check("metrics: tiny_q has its own series", gen_metric(f1, "kiln_gen_prompt_tokens_total",
                                                              model="tiny_q") > 0)


def check_openai_client(c):
    t = c.t
    import vocab  # noqa: E402  (tests/llm: node_binary, node_dir)
    node = vocab.node_binary()
    if node is None:
        t.skip("openai npm client", "no Node.js (scripts/install-deps llm)")
        return
    env = dict(os.environ, KILN_LLM_NODE_DIR=vocab.node_dir())
    p = subprocess.run([node, os.path.join(HERE, "openai_client_test.mjs"),
                        "--base-url", f"http://127.0.0.1:{c.port}/v1", "--model", "tiny"],
                       capture_output=True, timeout=120, env=env)
    out = (p.stdout + p.stderr).decode("utf-8", "replace")
    print("\n".join("    " + line for line in out.rstrip().splitlines()), flush=True)
    if p.returncode == 77:
        t.skip("openai npm client", "the `openai` package is not installed "
               "(scripts/install-deps llm)")
        return
    t.check("openai npm client: every check passes (openai_client_test.mjs)", p.returncode == 0,
            f"exit status {p.returncode}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--models", required=True, help="folder of the test models (llm_test_models)")
    ap.add_argument("--proto-dir", default="", help="generated *_pb2.py folder (gRPC checks)")
    args = ap.parse_args()
    model_path = os.path.abspath(os.path.join(args.models, MODEL_FILE))
    if not os.path.exists(model_path):
        print(f"SKIP: {model_path} does not exist (run the CTest fixture llm_test_models)")
        return 77
    t = Checks()
    root = tempfile.mkdtemp(prefix="kiln-serve-llm-")
    log = open(os.path.join(root, "serve.log"), "w+b")
    proc = None
    try:
        repo = os.path.join(root, "repo")
        for name in ("tiny", "tiny_q"):
            os.makedirs(os.path.join(repo, name, "1"))
            os.symlink(model_path, os.path.join(repo, name, "1", "model.gguf"))
        with open(os.path.join(repo, "tiny_q", "config.pbtxt"), "w") as f:
            f.write(TINY_Q_CONFIG)
        port, grpc_port, metrics_port = free_port(), free_port(), free_port()
        cmd = [args.kiln, "serve", "--model-repository", repo, "--http-port", str(port),
               "--grpc-port", str(grpc_port), "--metrics-port", str(metrics_port)]
        print("starting: " + " ".join(cmd), flush=True)
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + READY_TIMEOUT_S
        ready = False
        while time.monotonic() < deadline and proc.poll() is None and not ready:
            try:
                ready = get(port, "/v2/health/ready", timeout=2).status == 200
            except OSError:
                pass
            if not ready:
                time.sleep(0.1)
        if not t.check("server ready", ready):
            return 1
        c = Ctx(t, port, metrics_port, grpc_port, args.kiln, model_path, proc)
        c.generate_text = None
        started = time.monotonic()
        for name, fn in [("models", check_models), ("reference", check_reference),
                         ("batch invariance", check_batch_invariance),
                         ("streaming", check_streaming), ("stop strings", check_stop_strings),
                         ("n and logprobs", check_n_and_logprobs), ("lengths", check_lengths),
                         ("errors", check_errors), ("disconnect", check_disconnect),
                         ("back-pressure", check_back_pressure),
                         ("many streams", check_many_streams),
                         ("triton generate", check_triton_generate)]:
            t.run(name, fn, c)
        if c.generate_text is not None:
            t.run("grpc", check_grpc, c, args.proto_dir)
        t.run("metrics", check_metrics, c)
        t.run("openai client", check_openai_client, c)
        t.check("the server is still running", proc.poll() is None, f"exit {proc.returncode}")
        print(f"(checks took {time.monotonic() - started:.1f} s)", flush=True)
        proc.send_signal(signal.SIGTERM)
        t0 = time.monotonic()
        try:
            code = proc.wait(timeout=EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            code = None
        t.check(f"SIGTERM: exit status 0 within {EXIT_TIMEOUT_S:.0f} s", code == 0,
                f"status {code} after {time.monotonic() - t0:.1f} s")
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        if t.failed or proc is None:
            log.seek(0)
            tail = log.read().decode("utf-8", "replace").splitlines()[-40:]
            print("--- server log (last 40 lines) ---\n" + "\n".join(tail), flush=True)
        log.close()
        shutil.rmtree(root, ignore_errors=True)
    return 0 if t.summary() else 1


if __name__ == "__main__":
    sys.exit(main())
