#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks the Dockerfile and .dockerignore without docker (there is none on the build machines).

  * Stages: a Debian 12 build stage that installs with scripts/install-deps, configures with the
    Makefile's own rule and builds targets that exist; a Debian 12 run stage that installs only
    `scripts/install-deps runtime`, copies the binary and the demo models from the build stage,
    runs as a numeric non-root user, exposes 8000 8001 8002, has a HEALTHCHECK and starts
    `kiln serve --model-repository /models`. No package is named in the Dockerfile itself
    (scripts/install-deps is the one list).
  * The runtime package list covers the binary: every shared library `ldd build/kiln` resolves
    outside the build tree belongs (dpkg -S) to a package of the `runtime` group, and every
    package of the group owns one of them (no strays, no misspelt names). Libraries of the CUDA
    toolkit, which is not a Debian package and not in the image's build stage, are listed and
    left out.
  * The HEALTHCHECK command itself, run here against a live `kiln serve` started with the
    image's CMD (the demo repository and free ports substituted): 0 while ready, non-zero when
    the server is up but not ready (a model that fails to load) and when nothing listens.
  * .dockerignore keeps build output and .git out of the context and no tracked file.

    /usr/bin/python3 tests/deploy/check_dockerfile.py --kiln build/kiln --repo build/demo_models
"""

import argparse
import fnmatch
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "server"))
import http_integration_test as h  # noqa: E402  (Checks, Client, free_port)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_manifests import Kiln  # noqa: E402  (a kiln serve child process)

# Where a CUDA toolkit's libraries live (not Debian packages; the image has none).
CUDA_DIRS = ("/usr/local/cuda",)


# ---------------------------------------------------------------------------------------------
# The Dockerfile, read as docker reads it: comments, line continuations, ARGs before FROM.

def instructions(text):
    """[(INSTRUCTION, argument text)] in order."""
    out, buf = [], ""
    for line in text.splitlines():
        stripped = line.strip()
        if not buf and (not stripped or stripped.startswith("#")):
            continue
        if buf and stripped.startswith("#"):
            continue  # a comment inside a continued instruction
        if line.rstrip().endswith("\\"):
            buf += line.rstrip()[:-1] + " "
            continue
        buf += line
        word, _, rest = buf.strip().partition(" ")
        out.append((word.upper(), rest.strip()))
        buf = ""
    if buf.strip():
        word, _, rest = buf.strip().partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def stages(instrs):
    """(global ARG defaults, [{"from": image, "name": name, "instrs": [...]}])."""
    args, out = {}, []
    for ins, rest in instrs:
        if ins == "ARG" and not out:
            name, _, default = rest.partition("=")
            args[name.strip()] = default.strip()
        elif ins == "FROM":
            m = re.match(r"(\S+)(?:\s+AS\s+(\S+))?$", rest, re.I)
            image = re.sub(r"\$\{(\w+)\}|\$(\w+)",
                           lambda x: args.get(x.group(1) or x.group(2), ""), m.group(1))
            out.append({"from": image, "name": m.group(2), "instrs": []})
        elif out:
            out[-1]["instrs"].append((ins, rest))
    return args, out


def exec_form(rest):
    """The JSON (exec) form of CMD/ENTRYPOINT/HEALTHCHECK CMD, or the shell form split."""
    rest = rest.strip()
    if rest.startswith("["):
        return json.loads(rest)
    return ["/bin/sh", "-c", rest]


def healthcheck_command(rest):
    """HEALTHCHECK [--options] CMD ... -> (options, command list)."""
    m = re.match(r"((?:--\S+\s+)*)CMD\s+(.*)$", rest, re.S)
    if not m:
        return None, None
    return m.group(1).split(), exec_form(m.group(2))


# ---------------------------------------------------------------------------------------------
# Libraries and packages.

def ldd(binary):
    """[(soname, resolved path or None)]."""
    r = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True)
    out = []
    for line in r.stdout.splitlines():
        m = re.match(r"\s*(\S+)\s+=>\s+(\S+)?", line)
        if m:
            path = m.group(2)
            out.append((m.group(1), None if path in (None, "not") else path))
    return out


def spellings(path):
    """`path`, its real path, and their /usr-merged twins (dpkg knows one of them)."""
    real = os.path.realpath(path)
    out = [path, real]
    for p in (path, real):
        if p.startswith("/usr/"):
            out.append(p[4:])
        elif p.startswith(("/lib", "/bin", "/sbin")):
            out.append("/usr" + p)
    return list(dict.fromkeys(out))


def owners(paths):
    """{path: the Debian package that ships it, or None}, with one dpkg-query call."""
    every = sorted({s for p in paths for s in spellings(p)})
    r = subprocess.run(["dpkg-query", "-S"] + every, capture_output=True, text=True)
    found = {}
    for line in r.stdout.splitlines():
        # "pkg:arch: /path" (or "pkg1, pkg2: /path" for shared directories)
        pkgs, sep, where = line.rpartition(": ")
        if sep and where in every:
            found[where] = pkgs.split(",")[0].strip().split(":")[0]
    return {p: next((found[s] for s in spellings(p) if s in found), None) for p in paths}


def installed(pkgs):
    """The packages of `pkgs` installed on this machine."""
    r = subprocess.run(["dpkg-query", "-W", "-f=${Package} ${Status}\n"] + list(pkgs),
                       capture_output=True, text=True)
    return {line.split()[0] for line in r.stdout.splitlines()
            if line.endswith("install ok installed")}


def runtime_packages():
    r = subprocess.run([os.path.join(ROOT, "scripts", "install-deps"), "--list", "runtime"],
                       capture_output=True, text=True, check=True)
    return [p for p in r.stdout.split() if p]


def within(path, directory):
    d = os.path.realpath(directory)
    return os.path.realpath(path) == d or os.path.realpath(path).startswith(d.rstrip("/") + "/")


# ---------------------------------------------------------------------------------------------
# .dockerignore, as docker matches it (closely enough for these patterns): each pattern is
# relative to the context root, `**` matches any number of folders, a folder that matches
# excludes everything under it, and `!pattern` re-includes.

def ignore_patterns(path):
    out = []
    for line in open(path, encoding="utf-8"):
        line = line.strip()
        if line and not line.startswith("#"):
            out.append(line)
    return out


def pattern_matches(pattern, path):
    pat = pattern.strip("/")
    parts = path.split("/")
    for i in range(1, len(parts) + 1):  # the path or a folder above it
        prefix = "/".join(parts[:i])
        if fnmatch.fnmatchcase(prefix, pat):
            return True
        if pat.startswith("**/") and any(fnmatch.fnmatchcase("/".join(parts[j:i]), pat[3:])
                                         for j in range(i)):
            return True
    return False


def ignored(patterns, path):
    result = False
    for p in patterns:
        if p.startswith("!"):
            if pattern_matches(p[1:], path):
                result = False
        elif pattern_matches(p, path):
            result = True
    return result


# ---------------------------------------------------------------------------------------------

def run_healthcheck(cmd, port):
    """The HEALTHCHECK command with its port 8000 replaced by `port`; its exit status."""
    cmd = [re.sub(r"\b8000\b", str(port), a) for a in cmd]
    if cmd[0] == "bash" and not shutil.which("bash"):
        raise RuntimeError("bash is not installed")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
    return r.returncode


def check_healthcheck(t, kiln, repo, image_cmd, hc_cmd):
    repo_flag = image_cmd.index("--model-repository") if "--model-repository" in image_cmd else -1
    if not t.check("image CMD is `kiln serve --model-repository /models`",
                   image_cmd[:2] == ["kiln", "serve"] and repo_flag > 0 and
                   image_cmd[repo_flag + 1:repo_flag + 2] == ["/models"], f"{image_cmd}"):
        return
    ports = [h.free_port() for _ in range(3)]

    def argv(repository):
        a = [kiln] + image_cmd[1:]
        a[a.index("--model-repository") + 1] = repository
        return a + ["--http-port", str(ports[0]), "--grpc-port", str(ports[1]),
                    "--metrics-port", str(ports[2])]

    server = Kiln(argv(repo))
    try:
        if t.check("live: kiln serve with the image's CMD becomes ready",
                   server.wait(ports[0], True), server.output()[-2000:]):
            rc = run_healthcheck(hc_cmd, ports[0])
            t.check("live: HEALTHCHECK passes while ready", rc == 0, f"exit {rc}")
    finally:
        t.check("live: it exits 0 on SIGTERM", server.stop() == 0)
    rc = run_healthcheck(hc_cmd, ports[0])
    t.check("live: HEALTHCHECK fails when nothing listens", rc != 0, f"exit {rc}")

    # Up but not ready: a repository whose only model does not load.
    with tempfile.TemporaryDirectory() as broken:
        os.makedirs(os.path.join(broken, "broken", "1"))
        with open(os.path.join(broken, "broken", "1", "model.onnx"), "wb") as f:
            f.write(b"not an ONNX model")
        server = Kiln(argv(broken))
        try:
            if t.check("live: kiln serve answers with a model that failed to load",
                       server.wait(ports[0], False), server.output()[-2000:]):
                c = h.Client(ports[0])
                status = c.get("/v2/health/ready").status
                c.close()
                rc = run_healthcheck(hc_cmd, ports[0])
                t.check("live: HEALTHCHECK fails while not ready", status != 200 and rc != 0,
                        f"ready answered {status}, health check exit {rc}")
        finally:
            server.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kiln", required=True, help="the built kiln executable")
    ap.add_argument("--repo", required=True, help="demo model repository")
    ap.add_argument("--build-dir", help="the build tree (default: the kiln binary's folder)")
    ap.add_argument("--dockerfile", default=os.path.join(ROOT, "Dockerfile"))
    ap.add_argument("--no-live", action="store_true")
    args = ap.parse_args()
    build_dir = args.build_dir or os.path.dirname(os.path.abspath(args.kiln))
    t = h.Checks()

    text = open(args.dockerfile, encoding="utf-8").read()
    instrs = instructions(text)
    _, st = stages(instrs)
    if not t.check("two stages: build and run", len(st) == 2 and st[0]["name"] == "build",
                   f"{[(s['from'], s['name']) for s in st]}"):
        return 0 if t.summary() else 1
    build, run = st
    t.check(f"build stage on Debian 12 ({build['from']})",
            re.fullmatch(r"debian:(12|bookworm)(\.\d+)?", build["from"]) is not None)
    t.check(f"run stage on Debian 12 ({run['from']})",
            re.fullmatch(r"debian:(12|bookworm)(\.\d+)?(-slim)?", run["from"]) is not None)
    t.check("no package is named in the Dockerfile (apt only through scripts/install-deps)",
            not re.search(r"\bapt(-get)?\s+(-\S+\s+)*install\b", text))

    build_runs = " && ".join(r for i, r in build["instrs"] if i == "RUN")
    steps = [s.strip() for s in re.split(r"&&|;", build_runs)]
    deps = [s for s in steps if s.split()[:1] == ["scripts/install-deps"]]
    t.check("build stage: scripts/install-deps (build groups only)",
            len(deps) == 1 and "runtime" not in deps[0].split(), f"{deps}")
    makefile = open(os.path.join(ROOT, "Makefile"), encoding="utf-8").read()
    m = re.search(r"^\$\(BUILD_DIR\)/build\.ninja:\s*\n\t(.+)$", makefile, re.M)
    configure = [s for s in steps if s.startswith("make ") and "build.ninja" in s]
    t.check("build stage: configures with the Makefile's build.ninja rule (as `make`)",
            m is not None and len(configure) == 1 and
            re.search(r"\bbuild/build\.ninja\b", configure[0]) is not None, f"{configure}")
    builds = [s for s in steps if s.startswith("cmake --build")]
    targets = []
    if builds:
        words = shlex.split(builds[0])
        if "--target" in words:
            targets = words[words.index("--target") + 1:]
    cmake_text = ""
    for dirpath, dirnames, files in os.walk(ROOT):
        dirnames[:] = [d for d in dirnames if not d.startswith(("build", "."))]
        if "CMakeLists.txt" in files:
            cmake_text += open(os.path.join(dirpath, "CMakeLists.txt"), encoding="utf-8").read()
    for tgt in targets:
        defined = re.search(r"add_(executable|custom_target)\(\s*" + re.escape(tgt) + r"\b",
                            cmake_text)
        t.check(f"build stage: target '{tgt}' exists", defined is not None)
    t.check("build stage: builds kiln and the demo models", {"kiln", "demo_models"} <= set(targets),
            f"{targets}")

    run_ins = run["instrs"]
    run_runs = [r for i, r in run_ins if i == "RUN"]
    calls = [shlex.split(c) for r in run_runs for c in re.split(r"&&|;", r) if c.strip()]
    calls = [c for c in calls if c and os.path.basename(c[0]) == "install-deps"]
    t.check("run stage: installs `scripts/install-deps runtime` and nothing else",
            len(calls) == 1 and calls[0][1:] == ["runtime"] and
            any(re.match(r"scripts/install-deps\s+" + re.escape(calls[0][0]) + "$", r)
                for i, r in run_ins if i == "COPY"), f"{calls}")
    copies = [r for i, r in run_ins if i == "COPY"]
    t.check("run stage: the kiln binary from the build stage",
            any(re.match(r"--from=build\s+\S*build/kiln\s+\S+", c) for c in copies), f"{copies}")
    t.check("run stage: the demo models at /models",
            any(re.match(r"--from=build\s+\S*build/demo_models\s+/models/?$", c) for c in copies),
            f"{copies}")
    users = [r for i, r in run_ins if i == "USER"]
    t.check("run stage: a numeric non-root USER", len(users) == 1 and
            re.fullmatch(r"[1-9]\d*(:\d+)?", users[0]) is not None, f"{users}")
    if users:
        uid = users[0].split(":")[0]
        created = re.search(r"useradd\b[^&]*--uid\s+" + uid + r"\b", " ".join(run_runs))
        t.check(f"run stage: user {uid} is created", created is not None)
    exposes = " ".join(r for i, r in run_ins if i == "EXPOSE").split()
    t.check("run stage: EXPOSE 8000 8001 8002", sorted(exposes) == ["8000", "8001", "8002"],
            f"{exposes}")
    hcs = [r for i, r in run_ins if i == "HEALTHCHECK"]
    hc_opts, hc_cmd = healthcheck_command(hcs[0]) if len(hcs) == 1 else (None, None)
    t.check("run stage: one HEALTHCHECK with a command", bool(hc_cmd), f"{hcs}")
    t.check("HEALTHCHECK asks /v2/health/ready on 8000",
            bool(hc_cmd) and "/v2/health/ready" in " ".join(hc_cmd) and "8000" in " ".join(hc_cmd))
    entry = [exec_form(r) for i, r in run_ins if i == "ENTRYPOINT"]
    cmd = [exec_form(r) for i, r in run_ins if i == "CMD"]
    image_cmd = (entry[-1] if entry else []) + (cmd[-1] if cmd else [])

    # Runtime packages against ldd.
    pkgs = runtime_packages()
    t.check("scripts/install-deps --list runtime lists packages", len(pkgs) > 0)
    here = installed(pkgs)
    for p in pkgs:
        t.check(f"runtime package {p} is a real package (installed here)", p in here)
    used = set()
    libs = ldd(args.kiln)
    pkg_of = owners([p for _, p in libs if p is not None])
    for soname, path in libs:
        if path is None:
            t.check(f"ldd: {soname} resolves", False, "not found")
            continue
        if within(path, build_dir) or within(path, ROOT):
            continue
        pkg = pkg_of[path]
        if pkg is None and any(within(path, d) or os.path.realpath(path).startswith(d)
                               for d in CUDA_DIRS):
            print(f"NOTE  {soname} ({path}) is the CUDA toolkit's, not a Debian package: the image "
                  "builds without CUDA and does not link it")
            continue
        if not t.check(f"ldd: {soname} comes from a Debian package", pkg is not None, path):
            continue
        used.add(pkg)
        t.check(f"ldd: {soname} -> {pkg} is in the runtime group", pkg in pkgs)
    for p in pkgs:
        t.check(f"runtime package {p} provides a library kiln loads", p in used)

    # .dockerignore
    ign_path = os.path.join(os.path.dirname(args.dockerfile), ".dockerignore")
    if t.check(".dockerignore exists", os.path.isfile(ign_path)):
        pats = ignore_patterns(ign_path)
        for p in ("build/kiln", "build/CMakeCache.txt", "build-asan/kiln", ".git/HEAD"):
            t.check(f".dockerignore leaves out {p}", ignored(pats, p))
        r = subprocess.run(["git", "-C", ROOT, "ls-files"], capture_output=True, text=True)
        if r.returncode == 0:
            dropped = [f for f in r.stdout.splitlines() if ignored(pats, f)]
            t.check(".dockerignore keeps every tracked file", not dropped, f"{dropped[:10]}")

    if not args.no_live and hc_cmd:
        t.run("HEALTHCHECK against kiln",
              lambda: check_healthcheck(t, args.kiln, args.repo, image_cmd, hc_cmd))

    return 0 if t.summary() else 1


if __name__ == "__main__":
    sys.exit(main())
