#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Tenants and transport security end to end (CTest security_integration): certificates made
with the openssl CLI in a temporary folder, `kiln serve` on the demo repository with an auth file
and TLS (docs/security.md). Checked:
  - HTTPS inference with the CA; plain HTTP to the TLS port gets no answer;
  - a missing or unknown key: 401 with WWW-Authenticate and no key echoed; a tenant outside a
    group: 403; an open health group answers without a key;
  - a request rate over the tenant's limit: 429 with Retry-After; a concurrency quota of 1
    refuses a second request while a generation streams; generated tokens over tokens/s refuse
    the next generation; the per-tenant families on /metrics count all of it;
  - gRPC over mutual TLS with a client certificate; without one, or with an expired one, the
    handshake fails; UNAUTHENTICATED without a key, RESOURCE_EXHAUSTED with retry-after metadata;
  - HTTPS with mutual TLS: no client certificate and an expired one are refused, and the server
    keeps serving a good client;
  - `kiln serve` refuses to start (exit 2) naming the file for a missing certificate, naming the
    date for an expired server certificate, and naming line or field for a malformed auth file.
Usage: security_integration_test.py --kiln build/kiln --repo build/demo_models
       [--proto-dir build/python_proto]
"""

import argparse
import http.client
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from http_integration_test import Checks, grpc_modules, start_kiln, stop_kiln  # noqa: E402

KEYS = {"acme": "acme-secret-key-1", "beta": "beta-secret-key-1", "solo": "solo-secret-key-1",
        "gen": "gen-secret-key-1", "grpcer": "grpcer-secret-key-1",
        "tensorgen": "tensorgen-secret-key-1"}


def openssl(work, *args):
    subprocess.run(["openssl", *args], cwd=work, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


def make_certs(work):
    """CA, server (localhost), client, expired client, expired server: PEM files in `work`."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    openssl(work, "req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
            "-subj", "/CN=kiln test CA")
    with open(os.path.join(work, "server.ext"), "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    with open(os.path.join(work, "client.ext"), "w") as f:
        f.write("extendedKeyUsage=clientAuth\n")
    for name, days, ext in (("server", "1", "server.ext"), ("client", "1", "client.ext"),
                            ("old_client", "-1", "client.ext"), ("old_server", "-1", "server.ext")):
        openssl(work, "req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr",
                "-subj", f"/CN={'localhost' if 'server' in name else name}")
        openssl(work, "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-CAcreateserial", "-out", f"{name}.pem", "-days", days, "-extfile", ext)
    return {n: os.path.join(work, n) for n in os.listdir(work)}


def write_auth_file(work):
    doc = {
        "default": "authenticated",
        "tenants": [
            {"name": "acme", "keys": [KEYS["acme"]],
             "limits": {"requests_per_second": 2, "burst": 3}},
            {"name": "beta", "keys": [KEYS["beta"]], "service_class": "best_effort"},
            {"name": "solo", "keys": [KEYS["solo"]], "limits": {"max_concurrency": 1}},
            {"name": "gen", "keys": [KEYS["gen"]],
             "limits": {"tokens_per_second": 5, "token_burst": 5}},
            {"name": "grpcer", "keys": [KEYS["grpcer"]],
             "limits": {"requests_per_second": 0.2, "burst": 1}},
            {"name": "tensorgen", "keys": [KEYS["tensorgen"]],
             "limits": {"tokens_per_second": 5, "token_burst": 5}},
        ],
        "groups": {"health": "open", "metrics": "open",
                   "inference": ["acme", "beta", "solo", "gen", "grpcer", "tensorgen"],
                   "model-repository": ["acme"]},
    }
    path = os.path.join(work, "tenants.json")
    with open(path, "w") as f:
        json.dump(doc, f)
    return path


def tls_context(certs, client=None):
    ctx = ssl.create_default_context(cafile=certs["ca.pem"])
    if client:
        ctx.load_cert_chain(certs[f"{client}.pem"], certs[f"{client}.key"])
    return ctx


def https(port, ctx, method, path, body=None, key=None, timeout=30):
    """(status, headers, body) of one HTTPS request to localhost."""
    conn = http.client.HTTPSConnection("localhost", port, context=ctx, timeout=timeout)
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    data = json.dumps(body).encode() if body is not None else None
    try:
        conn.request(method, path, body=data, headers=headers)
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def add_sub():
    return {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 16],
                        "data": [float(i) for i in range(16)]},
                       {"name": "INPUT1", "datatype": "FP32", "shape": [1, 16],
                        "data": [1.0] * 16}]}


def refused_to_start(args, extra):
    """(exit code, output) of a kiln serve expected to exit at once."""
    r = subprocess.run([args.kiln, "serve", "--model-repository", args.repo, "--http-port", "0",
                        "--grpc-port", "0", "--metrics-port", "0"] + extra,
                       capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout + r.stderr


def metric(text, name, labels):
    pat = re.escape(name) + r"\{" + re.escape(labels) + r"\} ([0-9.e+-]+)"
    m = re.search(pat, text)
    return float(m.group(1)) if m else None


def check_tenants_over_https(t, certs, port, metrics_port):
    ctx = tls_context(certs)
    s, _, _ = https(port, ctx, "GET", "/v2/health/ready")
    t.check("HTTPS: open health group answers without a key", s == 200, s)
    s, _, body = https(port, ctx, "POST", "/v2/models/add_sub/infer", add_sub(), KEYS["acme"])
    out = json.loads(body)["outputs"][0]["data"] if s == 200 else None
    t.check("HTTPS inference with the CA and acme's key", s == 200 and out[0] == 1.0, (s, body))

    plain = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        plain.request("GET", "/v2/health/ready")
        got = plain.getresponse().status
    except (OSError, http.client.HTTPException) as e:
        got = type(e).__name__
    finally:
        plain.close()
    t.check("plain HTTP to the TLS port gets no HTTP answer", not isinstance(got, int), got)

    s, h, body = https(port, ctx, "POST", "/v2/models/add_sub/infer", add_sub())
    t.check("no key: 401 with WWW-Authenticate and a message",
            s == 401 and h.get("www-authenticate", "").startswith("Bearer")
            and b"Authorization: Bearer" in body, (s, h, body))
    bad = "not-a-real-key-42"
    s, h, body = https(port, ctx, "POST", "/v2/models/add_sub/infer", add_sub(), bad)
    t.check("unknown key: 401, the key not echoed",
            s == 401 and bad.encode() not in body and b"not valid" in body, (s, body))
    s, _, body = https(port, ctx, "GET", "/v2", key=KEYS["acme"][:-1] + "2")
    t.check("another tenant's key with one letter changed: 401 saying nothing of tenants",
            s == 401 and b"acme" not in body, (s, body))
    s, _, body = https(port, ctx, "POST", "/v2/repository/index", {}, KEYS["beta"])
    t.check("tenant outside model-repository: 403 naming the API",
            s == 403 and b"model-repository" in body and KEYS["beta"].encode() not in body,
            (s, body))
    s, _, _ = https(port, ctx, "POST", "/v2/repository/index", {}, KEYS["acme"])
    t.check("tenant inside model-repository: 200", s == 200, s)
    s, _, _ = https(port, ctx, "GET", "/v2/models/add_sub/config", key=KEYS["beta"])
    t.check("model-config (default 'authenticated'): any tenant's key passes", s == 200, s)

    # acme: 2 requests/s, burst 3 (one used above): a quick burst runs over.
    statuses = []
    retry = None
    for _ in range(6):
        s, h, _ = https(port, ctx, "POST", "/v2/models/add_sub/infer", add_sub(), KEYS["acme"])
        statuses.append(s)
        if s == 429:
            retry = h.get("retry-after")
    t.check("over the request rate: 429 with Retry-After in whole seconds",
            429 in statuses and statuses[0] == 200 and retry is not None and retry.isdigit()
            and int(retry) >= 1, (statuses, retry))

    # solo: one request at a time. A streaming generation holds the slot while it runs.
    gen_body = {"model": "tiny_lm", "prompt": "Once upon a time", "max_tokens": 2000,
                "ignore_eos": True, "stream": True}
    conn = http.client.HTTPSConnection("localhost", port, context=ctx, timeout=30)
    conn.request("POST", "/v1/completions", body=json.dumps(gen_body).encode(),
                 headers={"Content-Type": "application/json",
                          "Authorization": f"Bearer {KEYS['solo']}"})
    stream = conn.getresponse()
    first = stream.readline()
    s, h, body = https(port, ctx, "POST", "/v2/models/add_sub/infer", add_sub(), KEYS["solo"])
    t.check("concurrency quota 1: a second request while a generation streams gets 429",
            stream.status == 200 and first and s == 429 and b"in flight" in body
            and h.get("retry-after") == "1", (stream.status, first[:80], s, body))
    inflight = metric(http_get_metrics(metrics_port), "kiln_tenant_inflight", 'tenant="solo"')
    t.check("kiln_tenant_inflight{tenant=solo} is 1 while it streams", inflight == 1, inflight)
    conn.close()

    # gen: 5 tokens/s, bucket 5. One generation of 30 tokens drives it far below zero.
    body = {"model": "tiny_lm", "prompt": "Hello", "max_tokens": 30, "ignore_eos": True}
    s1, _, b1 = https(port, ctx, "POST", "/v1/completions", body, KEYS["gen"])
    s2, h2, b2 = https(port, ctx, "POST", "/v1/completions", body, KEYS["gen"])
    t.check("generated tokens over tokens/s: the next generation gets 429 with Retry-After >= 2",
            s1 == 200 and s2 == 429 and int(h2.get("retry-after", "0")) >= 2
            and b"generated-token" in b2, (s1, b1[:100], s2, h2.get("retry-after"), b2))

    # tensorgen: the same limit through the KServe v2 tensor path of the generative model
    # (text_input / sampling_parameters): its 30 tokens are charged, and it is a generation.
    v2 = {"inputs": [{"name": "text_input", "datatype": "BYTES", "shape": [1], "data": ["Hello"]},
                     {"name": "sampling_parameters", "datatype": "BYTES", "shape": [1],
                      "data": [json.dumps({"max_tokens": 30, "ignore_eos": True})]}]}
    s1, _, b1 = https(port, ctx, "POST", "/v2/models/tiny_lm/infer", v2, KEYS["tensorgen"])
    s2, h2, b2 = https(port, ctx, "POST", "/v2/models/tiny_lm/infer", v2, KEYS["tensorgen"])
    t.check("v2 infer of a generative model: tokens charged, the next one gets 429",
            s1 == 200 and s2 == 429 and int(h2.get("retry-after", "0")) >= 2,
            (s1, b1[:100], s2, h2.get("retry-after"), b2))

    text = http_get_metrics(metrics_port)
    checks = {
        ("kiln_tenant_requests_total", 'tenant="acme",outcome="rate_limited"'): lambda v: v >= 1,
        ("kiln_tenant_requests_total", 'tenant="acme",outcome="ok"'): lambda v: v >= 4,
        ("kiln_tenant_requests_total", 'tenant="beta",outcome="forbidden"'): lambda v: v == 1,
        ("kiln_tenant_requests_total", 'tenant="anonymous",outcome="unauthenticated"'):
            lambda v: v >= 3,
        ("kiln_tenant_requests_total", 'tenant="solo",outcome="rate_limited"'): lambda v: v == 1,
        ("kiln_tenant_generated_tokens_total", 'tenant="gen"'): lambda v: v >= 30,
        ("kiln_tenant_generated_tokens_total", 'tenant="tensorgen"'): lambda v: v == 30,
    }
    for (name, labels), ok in checks.items():
        v = metric(text, name, labels)
        t.check(f"/metrics {name}{{{labels}}}", v is not None and ok(v), v)


def http_get_metrics(port):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", "/metrics")
        return conn.getresponse().read().decode()
    finally:
        conn.close()


def check_grpc(t, args, certs, grpc_port):
    modules = grpc_modules(args.proto_dir, "gRPC over TLS")
    if modules is None:
        return
    grpc, pb = modules
    ca = open(certs["ca.pem"], "rb").read()

    def channel(client):
        kw = {}
        if client:
            kw = {"private_key": open(certs[f"{client}.key"], "rb").read(),
                  "certificate_chain": open(certs[f"{client}.pem"], "rb").read()}
        creds = grpc.ssl_channel_credentials(root_certificates=ca, **kw)
        return grpc.secure_channel(f"localhost:{grpc_port}", creds)

    def infer(ch, key):
        stub = ch.unary_unary("/inference.GRPCInferenceService/ModelInfer",
                              request_serializer=pb.ModelInferRequest.SerializeToString,
                              response_deserializer=pb.ModelInferResponse.FromString)
        req = pb.ModelInferRequest(model_name="add_sub")
        for name in ("INPUT0", "INPUT1"):
            i = req.inputs.add(name=name, datatype="FP32", shape=[1, 16])
            i.contents.fp32_contents.extend([1.0] * 16)
        md = (("authorization", f"Bearer {key}"),) if key else ()
        return stub.with_call(req, metadata=md, timeout=10)

    def error_of(fn):
        try:
            fn()
            return None
        except grpc.RpcError as e:
            return e

    ch = channel("client")
    resp, _ = infer(ch, KEYS["grpcer"])
    t.check("gRPC over mutual TLS with a client certificate and a key", len(resp.outputs) == 2)
    e = error_of(lambda: infer(ch, KEYS["grpcer"]))
    retry = dict(e.trailing_metadata() or ()).get("retry-after") if e else None
    t.check("gRPC over the rate: RESOURCE_EXHAUSTED with retry-after trailing metadata",
            e is not None and e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            and retry is not None and int(retry) >= 1, (e and e.code(), retry))
    e = error_of(lambda: infer(ch, None))
    t.check("gRPC without a key: UNAUTHENTICATED",
            e is not None and e.code() == grpc.StatusCode.UNAUTHENTICATED, e and e.code())
    e = error_of(lambda: infer(ch, "wrong-key-wrong"))
    t.check("gRPC with a wrong key: UNAUTHENTICATED, the key not echoed",
            e is not None and e.code() == grpc.StatusCode.UNAUTHENTICATED
            and "wrong-key" not in (e.details() or ""), e and (e.code(), e.details()))
    ch.close()
    for who, label in ((None, "without a client certificate"),
                       ("old_client", "with an expired client certificate")):
        c = channel(who)
        e = error_of(lambda: infer(c, KEYS["acme"]))
        t.check(f"gRPC mutual TLS {label}: refused",
                e is not None and e.code() == grpc.StatusCode.UNAVAILABLE, e and e.code())
        c.close()


def check_https_mutual(t, args, certs, work):
    ok = tls_context(certs, "client")
    proc, (port, _, _), _ = start_kiln(
        args, work,
        ["--allow-grpc", "false", "--allow-metrics", "false", "--http-use-ssl", "true",
         "--http-server-cert", certs["server.pem"], "--http-server-key", certs["server.key"],
         "--http-root-cert", certs["ca.pem"], "--http-use-ssl-mutual", "true"],
        lambda p: https(p, ok, "GET", "/v2/health/ready")[0] == 200)
    try:
        for who, label in ((None, "without a client certificate"),
                           ("old_client", "with an expired client certificate")):
            try:
                got = https(port, tls_context(certs, who), "GET", "/v2/health/live")[0]
            except (OSError, ssl.SSLError, http.client.HTTPException) as e:
                got = type(e).__name__
            t.check(f"HTTPS mutual TLS {label}: handshake refused", not isinstance(got, int), got)
        s, _, _ = https(port, ok, "POST", "/v2/models/add_sub/infer", add_sub())
        t.check("HTTPS mutual TLS: a client with a valid certificate is still served", s == 200, s)
    finally:
        stop_kiln(proc)


def check_refusals(t, args, certs, work):
    missing = os.path.join(work, "missing-cert.pem")
    code, out = refused_to_start(args, ["--http-use-ssl", "true", "--http-server-cert", missing,
                                        "--http-server-key", certs["server.key"]])
    t.check("missing certificate file: exit 2 naming the flag and file",
            code == 2 and f"--http-server-cert '{missing}'" in out, (code, out[-500:]))
    code, out = refused_to_start(args, ["--grpc-use-ssl", "true",
                                        "--grpc-server-cert", certs["old_server.pem"],
                                        "--grpc-server-key", certs["old_server.key"]])
    t.check("expired server certificate: exit 2 naming the expiry date",
            code == 2 and re.search(r"expired on \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", out)
            is not None, (code, out[-500:]))
    bad = os.path.join(work, "bad.json")
    with open(bad, "w") as f:
        f.write('{\n  "tenants": [\n    {"name": "a", "keys": ["abcdefgh"]},\n  ]\n}\n')
    code, out = refused_to_start(args, ["--auth-file", bad])
    t.check("malformed auth file: exit 2 naming the file and line",
            code == 2 and bad in out and "line 4" in out, (code, out[-500:]))
    with open(bad, "w") as f:
        json.dump({"tenants": [{"name": "a", "keys": ["abcdefgh"],
                                "limits": {"requests_per_second": "fast"}}]}, f)
    code, out = refused_to_start(args, ["--auth-file", bad])
    t.check("auth file with a bad field: exit 2 naming the field",
            code == 2 and "tenants[0].limits.requests_per_second" in out, (code, out[-500:]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--repo", required=True)
    ap.add_argument("--proto-dir", default="")
    args = ap.parse_args()
    if shutil.which("openssl") is None:
        print("SKIP  no openssl CLI (scripts/install-deps installs it)")
        return 0
    t = Checks()
    work = tempfile.mkdtemp(prefix="kiln-security-test-")
    try:
        certs = make_certs(work)
        auth = write_auth_file(work)
        ctx = tls_context(certs)
        proc, (port, grpc_port, metrics_port), _ = start_kiln(
            args, work,
            ["--auth-file", auth, "--http-use-ssl", "true",
             "--http-server-cert", certs["server.pem"], "--http-server-key", certs["server.key"],
             "--grpc-use-ssl", "true", "--grpc-server-cert", certs["server.pem"],
             "--grpc-server-key", certs["server.key"], "--grpc-root-cert", certs["ca.pem"],
             "--grpc-use-ssl-mutual", "true"],
            lambda p: https(p, ctx, "GET", "/v2/health/ready")[0] == 200)
        try:
            t.run("tenants over HTTPS",
                  lambda: check_tenants_over_https(t, certs, port, metrics_port))
            t.run("gRPC over TLS", lambda: check_grpc(t, args, certs, grpc_port))
        finally:
            stop_kiln(proc)
        t.run("HTTPS mutual TLS", lambda: check_https_mutual(t, args, certs, work))
        t.run("refusals at start", lambda: check_refusals(t, args, certs, work))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if t.summary() else 1


if __name__ == "__main__":
    sys.exit(main())
