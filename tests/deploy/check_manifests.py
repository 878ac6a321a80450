#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks the Kubernetes manifests of deploy/kubernetes (docs/deployment.md).

  * Every kustomization (base, overlays, kserve, batch, prometheus-adapter) renders with
    Debian 12's kubectl 1.20 (package kubernetes-client; its built-in kustomize v2.0 is the
    oldest the manifests are written for), and with the `kubectl` on the PATH too when that is
    another version.
  * Every rendered object validates against the Kubernetes API schemas of the npm packages
    kubernetes-models and @kubernetes-models/prometheus-operator (validate_k8s.cjs: the
    schemas, plus no field the API does not know). The KServe kinds, which no package
    describes, are checked here: their required structure and known fields, and their
    container against the core/v1 Container schema.
  * What ties the objects together: the Service's ports (http, grpc, metrics) reach the
    container's, which are the ports kiln's flags open; the selectors select the pods; the
    probes use /v2/health/ready and /v2/health/live; the grace period covers the preStop
    sleep plus --exit-timeout-secs; the security context is non-root with a read-only root
    file system, no capabilities and the RuntimeDefault seccomp profile, as the Dockerfile's
    user; the HPA scales the Deployment on the pods metric the prometheus-adapter rule
    defines; the gpu overlay asks for nvidia.com/gpu with node affinity and tolerations; the
    init-container overlay fills the model volume itself; the KServe runtime has the formats,
    protocols, ports and annotations KServe expects; the batch Job restarts on failure and
    resumes.
  * Against a live `kiln serve` started with the Deployment's own arguments (the demo
    repository and free ports substituted): the probe paths answer 200, an inference succeeds,
    and the ServiceMonitor's scrape (port and path) returns metrics in which every metric the
    adapter rule (and so the HPA) uses exists, without `namespace` or `pod` labels of its own
    that would clash with the scrape's; SIGTERM drains and exits 0 within --exit-timeout-secs.
    The KServe runtime's arguments start kiln too.

Exit status 77 (skipped) only when the tools are missing: run `scripts/install-deps deploy`
(`make test` does).

    /usr/bin/python3 tests/deploy/check_manifests.py --kiln build/kiln --repo build/demo_models
"""

import argparse
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "server"))
import http_integration_test as h  # noqa: E402  (Checks, Client, free_port, add_sub_request)
import prometheus_text as prom  # noqa: E402

SKIP = 77
READY_TIMEOUT_S = 60.0

# Kinds no npm package describes: checked here (check_kserve_*).
KSERVE_KINDS = {("serving.kserve.io/v1alpha1", "ClusterServingRuntime"),
                ("serving.kserve.io/v1beta1", "InferenceService")}


# ---------------------------------------------------------------------------------------------
# Tools.

def kubectl_version(path):
    """(major, minor) of a kubectl client, or None."""
    try:
        out = subprocess.run([path, "version", "--client"], capture_output=True, text=True,
                             timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r'Major:"(\d+)", Minor:"(\d+)', out) or re.search(r"v(\d+)\.(\d+)\.", out)
    return (int(m.group(1)), int(m.group(2))) if m else None


def dpkg_owner(path):
    r = subprocess.run(["dpkg-query", "-S", path], capture_output=True, text=True)
    return r.stdout.split(":")[0] if r.returncode == 0 else None


def find_kubectls(explicit):
    """[(label, path, version)]: Debian's kubectl first (required), then the PATH's when it is
    another binary of another version."""
    tools_dir = (os.environ.get("KILN_DEPLOY_TOOLS_DIR") or
                 os.path.join(ROOT, "build", "deploy-tools"))
    candidates = []
    if explicit:
        candidates.append(explicit)
    candidates.append(os.path.join(tools_dir, "kubernetes-client", "usr", "bin", "kubectl"))
    if dpkg_owner("/usr/bin/kubectl") == "kubernetes-client":
        candidates.append("/usr/bin/kubectl")
    debian = None
    for c in candidates:
        if os.access(c, os.X_OK):
            v = kubectl_version(c)
            if v is not None and (explicit == c or v == (1, 20)):
                debian = (f"kubectl {v[0]}.{v[1]} (Debian's kubernetes-client)", c, v)
                break
    if debian is None:
        return []
    found = [debian]
    other = shutil.which("kubectl")
    if other and os.path.realpath(other) != os.path.realpath(debian[1]):
        v = kubectl_version(other)
        if v is not None and v != debian[2]:
            found.append((f"kubectl {v[0]}.{v[1]} ({other})", other, v))
    return found


def node_dir():
    return os.environ.get("KILN_DEPLOY_NODE_DIR") or os.path.join(ROOT, "build", "deploy-node")


def node_ready(ndir):
    packages = ("kubernetes-models", "@kubernetes-models/validate",
                "@kubernetes-models/prometheus-operator")
    return shutil.which("node") and all(
        os.path.isfile(os.path.join(ndir, "node_modules", p, "package.json")) for p in packages)


# ---------------------------------------------------------------------------------------------
# Rendering and lookups.

def kustomizations(deploy_dir):
    """Every folder with a kustomization.yaml, relative to deploy_dir, sorted."""
    out = []
    for dirpath, _, filenames in os.walk(deploy_dir):
        if "kustomization.yaml" in filenames:
            out.append(os.path.relpath(dirpath, deploy_dir))
    return sorted(out)


def render(kubectl, path):
    r = subprocess.run([kubectl, "kustomize", path], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError(f"exit {r.returncode}: {r.stderr.strip()[:2000]}")
    return [o for o in yaml.safe_load_all(r.stdout) if o is not None]


def find(objs, kind, name=None):
    hits = [o for o in objs if o.get("kind") == kind and
            (name is None or o.get("metadata", {}).get("name") == name)]
    if len(hits) != 1:
        raise AssertionError(f"expected one {kind}{' ' + name if name else ''}, found {len(hits)}")
    return hits[0]


def obj_id(o):
    md = o.get("metadata", {})
    ns = md.get("namespace")
    return f"{o.get('kind')}/{(ns + '/') if ns else ''}{md.get('name')}"


def container(pod_spec, name=None):
    cs = pod_spec.get("containers", [])
    if name is None:
        if len(cs) != 1:
            raise AssertionError(f"expected one container, found {len(cs)}")
        return cs[0]
    hits = [c for c in cs if c.get("name") == name]
    if len(hits) != 1:
        raise AssertionError(f"no container {name}")
    return hits[0]


def flag(args, name):
    """The value of --name in args (`--name=v` or `--name v`), or None."""
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(name + "="):
            return a[len(name) + 1:]
    return None


def with_flag(args, name, value):
    """args with --name's value replaced (the flag must be there)."""
    out = list(args)
    for i, a in enumerate(out):
        if a == name and i + 1 < len(out):
            out[i + 1] = value
            return out
        if a.startswith(name + "="):
            out[i] = f"{name}={value}"
            return out
    raise AssertionError(f"{name} not in {args}")


def cpu_quantity(q):
    """A CPU quantity ("4", "500m", 2) in cores."""
    s = str(q)
    return float(s[:-1]) / 1000 if s.endswith("m") else float(s)


def expand_env(args, ctr):
    """$(VAR) references in args expanded as the kubelet does, with the container's env (values
    from resourceFieldRef limits.cpu: the CPU limit rounded up by the divisor)."""
    env = {}
    for e in ctr.get("env", []):
        if "value" in e:
            env[e["name"]] = str(e["value"])
            continue
        ref = e.get("valueFrom", {}).get("resourceFieldRef")
        if ref and ref.get("resource") == "limits.cpu":
            limit = ctr.get("resources", {}).get("limits", {}).get("cpu")
            cores = cpu_quantity(limit) if limit is not None else os.cpu_count()
            env[e["name"]] = str(math.ceil(cores / cpu_quantity(ref.get("divisor", "1"))))
    return [re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m.group(1), m.group(0)), a)
            for a in args]


def prestop_seconds(ctr):
    ps = ctr.get("lifecycle", {}).get("preStop", {})
    if "sleep" in ps:
        return int(ps["sleep"]["seconds"])
    cmd = ps.get("exec", {}).get("command", [])
    if len(cmd) == 2 and cmd[0] in ("sleep", "/bin/sleep", "/usr/bin/sleep"):
        return int(cmd[1])
    return 0


def dockerfile_uid(path):
    text = open(path, encoding="utf-8").read()
    m = re.search(r"^USER\s+(\d+)(?::(\d+))?\s*$", text, re.M)
    return (int(m.group(1)), int(m.group(2)) if m.group(2) else None) if m else (None, None)


def adapter_rules(objs):
    cm = find(objs, "ConfigMap", "kiln-adapter-rules")
    return yaml.safe_load(cm["data"]["config.yaml"])["rules"]


def promql_metric_names(query, series):
    """Metric names a prometheus-adapter metricsQuery selects, with its template filled."""
    q = (query.replace("<<.Series>>", series)
              .replace("<<.LabelMatchers>>", 'namespace="kiln",pod="kiln-0"')
              .replace("<<.GroupBy>>", "namespace,pod"))
    if "<<" in q:
        raise AssertionError(f"unknown template field in {query!r}")
    return sorted(set(re.findall(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{", q)))


def series_query_names(query):
    names = set(re.findall(r"^\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{", query))
    names |= set(re.findall(r'__name__\s*=\s*"([a-zA-Z_:][a-zA-Z0-9_:]*)"', query))
    return sorted(names)


# ---------------------------------------------------------------------------------------------
# Schema validation.

KSERVE_RUNTIME_SPEC = {"annotations", "supportedModelFormats", "protocolVersions", "containers",
                       "multiModel", "disabled", "builtInAdapter", "grpcEndpoint",
                       "grpcDataEndpoint", "nodeSelector", "affinity", "tolerations", "volumes",
                       "imagePullSecrets", "labels", "replicas", "storageHelper", "workerSpec",
                       "hostIPC", "httpDataEndpoint", "serviceAccountName"}
KSERVE_FORMAT = {"name", "version", "autoSelect", "priority"}
KSERVE_PROTOCOLS = {"v1", "v2", "grpc-v1", "grpc-v2"}
KSERVE_MODEL_SPEC = {"modelFormat", "runtime", "protocolVersion", "storageUri", "storage", "args",
                     "env", "resources", "ports", "image", "command", "volumeMounts",
                     "readinessProbe", "livenessProbe", "startupProbe", "securityContext", "name"}
KSERVE_PREDICTOR = {"model", "minReplicas", "maxReplicas", "scaleTarget", "scaleMetric",
                    "scaleMetricType", "containerConcurrency", "timeout", "canaryTrafficPercent",
                    "logger", "batcher", "serviceAccountName", "nodeSelector", "affinity",
                    "tolerations", "volumes", "imagePullSecrets", "labels", "annotations",
                    "deploymentStrategy", "containers", "initContainers", "securityContext",
                    "priorityClassName", "autoScaling", "workerSpec"}


def unknown_keys(obj, allowed, where):
    return [f"{where}/{k}: unknown field" for k in obj if k not in allowed]


def check_kserve_object(o):
    """Errors of a KServe object, and the containers to validate as core/v1 Containers."""
    errors, containers = [], []
    md = o.get("metadata", {})
    if not md.get("name"):
        errors.append("metadata.name missing")
    spec = o.get("spec")
    if not isinstance(spec, dict):
        return ["spec missing"], []
    if o["kind"] == "ClusterServingRuntime":
        if "namespace" in md:
            errors.append("a ClusterServingRuntime is cluster-scoped: no metadata.namespace")
        errors += unknown_keys(spec, KSERVE_RUNTIME_SPEC, "/spec")
        fmts = spec.get("supportedModelFormats")
        if not isinstance(fmts, list) or not fmts:
            errors.append("spec.supportedModelFormats: a non-empty list is required")
        for i, f in enumerate(fmts or []):
            if not isinstance(f, dict) or not isinstance(f.get("name"), str) or not f["name"]:
                errors.append(f"spec.supportedModelFormats[{i}].name is required")
                continue
            errors += unknown_keys(f, KSERVE_FORMAT, f"/spec/supportedModelFormats/{i}")
            if "version" in f and not isinstance(f["version"], str):
                errors.append(f"spec.supportedModelFormats[{i}].version must be a string")
            if "autoSelect" in f and not isinstance(f["autoSelect"], bool):
                errors.append(f"spec.supportedModelFormats[{i}].autoSelect must be a boolean")
            if "priority" in f and not (isinstance(f["priority"], int) and f["priority"] >= 1):
                errors.append(f"spec.supportedModelFormats[{i}].priority must be an integer >= 1")
        for p in spec.get("protocolVersions", []):
            if p not in KSERVE_PROTOCOLS:
                errors.append(f"spec.protocolVersions: '{p}' is not one of "
                              f"{sorted(KSERVE_PROTOCOLS)}")
        ann = spec.get("annotations", {})
        if not all(isinstance(v, str) for v in ann.values()):
            errors.append("spec.annotations: values must be strings")
        cs = spec.get("containers")
        if not isinstance(cs, list) or not cs:
            errors.append("spec.containers: a non-empty list is required")
        for i, c in enumerate(cs or []):
            containers.append((f"/spec/containers/{i}", c))
    else:  # InferenceService
        extra = set(spec) - {"predictor", "transformer", "explainer"}
        if extra:
            errors.append(f"spec: unknown fields {sorted(extra)}")
        pred = spec.get("predictor")
        if not isinstance(pred, dict):
            return errors + ["spec.predictor is required"], containers
        errors += unknown_keys(pred, KSERVE_PREDICTOR, "/spec/predictor")
        model = pred.get("model")
        if not isinstance(model, dict):
            return errors + ["spec.predictor.model is required"], containers
        errors += unknown_keys(model, KSERVE_MODEL_SPEC, "/spec/predictor/model")
        if not isinstance(model.get("modelFormat"), dict) or not model["modelFormat"].get("name"):
            errors.append("spec.predictor.model.modelFormat.name is required")
        if model.get("protocolVersion") not in (None, *KSERVE_PROTOCOLS):
            errors.append(f"spec.predictor.model.protocolVersion '{model['protocolVersion']}' "
                          "is not a protocol")
        if not model.get("storageUri") and not model.get("storage"):
            errors.append("spec.predictor.model: storageUri (or storage) is required")
        for key in ("minReplicas", "maxReplicas"):
            if key in pred and not (isinstance(pred[key], int) and pred[key] >= 0):
                errors.append(f"spec.predictor.{key} must be an integer >= 0")
        probe = {k: v for k, v in model.items() if k not in
                 ("modelFormat", "runtime", "protocolVersion", "storageUri", "storage")}
        if probe:
            containers.append(("/spec/predictor/model", dict(probe, name="kserve-container")))
    return errors, containers


def validate_all(t, ndir, objs_by_dir):
    """Every object of every rendering through validate_k8s.cjs (identical ones once)."""
    entries, seen = [], {}
    kserve_errors = []
    for d, objs in objs_by_dir.items():
        for o in objs:
            key = json.dumps(o, sort_keys=True)
            if key in seen:
                continue
            seen[key] = True
            ident = f"{d}: {obj_id(o)}"
            if (o.get("apiVersion"), o.get("kind")) in KSERVE_KINDS:
                errs, ctrs = check_kserve_object(o)
                kserve_errors.append((ident, errs))
                for where, c in ctrs:
                    entries.append({"id": f"{ident} {where}", "object": c,
                                    "model": "kubernetes-models/v1/Container"})
                continue
            entries.append({"id": ident, "object": o})
    r = subprocess.run(["node", os.path.join(HERE, "validate_k8s.cjs"), ndir],
                       input=json.dumps(entries), capture_output=True, text=True, timeout=300)
    if not t.check("validate_k8s.cjs ran", r.returncode == 0, r.stderr.strip()[:2000]):
        return
    for res in json.loads(r.stdout):
        t.check(f"schema: {res['id']} ({res['model']})", not res["errors"],
                "; ".join(res["errors"]))
    for ident, errs in kserve_errors:
        t.check(f"structure: {ident} (KServe)", not errs, "; ".join(errs))


# ---------------------------------------------------------------------------------------------
# What ties the objects together.

def labels_match(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def check_server_overlay(t, name, objs, uid):
    dep = find(objs, "Deployment", "kiln")
    svc = find(objs, "Service", "kiln")
    pdb = find(objs, "PodDisruptionBudget", "kiln")
    hpa = find(objs, "HorizontalPodAutoscaler", "kiln")
    sm = find(objs, "ServiceMonitor", "kiln")
    pod = dep["spec"]["template"]
    pod_labels = pod["metadata"]["labels"]
    spec = pod["spec"]
    ctr = container(spec, "kiln")
    args = ctr.get("command", []) + ctr.get("args", [])
    p = f"{name}: "

    t.check(p + "runs `kiln serve`", args[:2] == ["kiln", "serve"], f"{args[:2]}")
    t.check(p + "Deployment selector selects its pods",
            labels_match(dep["spec"]["selector"]["matchLabels"], pod_labels))
    t.check(p + "Service selects the pods", labels_match(svc["spec"]["selector"], pod_labels))
    t.check(p + "PDB selects the pods",
            labels_match(pdb["spec"]["selector"]["matchLabels"], pod_labels))
    t.check(p + "ServiceMonitor selects the Service",
            labels_match(sm["spec"]["selector"]["matchLabels"], svc["metadata"]["labels"]))
    t.check(p + "no replicas in the Deployment (the HPA owns them)", "replicas" not in dep["spec"])

    # Ports: Service port name -> targetPort -> container port -> kiln flag.
    cports = {cp["name"]: cp["containerPort"] for cp in ctr.get("ports", [])}
    sports = {sp["name"]: sp for sp in svc["spec"]["ports"]}
    for pname, default, fl in (("http", 8000, "--http-port"), ("grpc", 8001, "--grpc-port"),
                               ("metrics", 8002, "--metrics-port")):
        sp = sports.get(pname)
        if not t.check(p + f"Service port '{pname}' is {default}",
                       sp is not None and sp["port"] == default, f"{sp}"):
            continue
        target = sp.get("targetPort", sp["port"])
        cport = cports.get(target) if isinstance(target, str) else target
        t.check(p + f"Service port '{pname}' reaches container port {default}", cport == default,
                f"targetPort {target} -> {cport}")
        t.check(p + f"kiln listens there ({fl})", str(flag(args, fl) or "") == str(default),
                f"{fl}={flag(args, fl)}")
    t.check(p + "model repository /models is mounted",
            flag(args, "--model-repository") == "/models" and
            any(m["mountPath"] == "/models" for m in ctr.get("volumeMounts", [])))

    # Probes.
    for probe, path in (("startupProbe", "/v2/health/ready"),
                        ("readinessProbe", "/v2/health/ready"),
                        ("livenessProbe", "/v2/health/live")):
        g = ctr.get(probe, {}).get("httpGet", {})
        t.check(p + f"{probe} GET {path} on port http",
                g.get("path") == path and g.get("port") in ("http", 8000), f"{g}")

    # Draining arithmetic.
    grace = spec.get("terminationGracePeriodSeconds", 30)
    sleep_s = prestop_seconds(ctr)
    exit_timeout = int(flag(args, "--exit-timeout-secs") or 30)
    t.check(p + f"grace period {grace} s >= preStop {sleep_s} s + --exit-timeout-secs "
            f"{exit_timeout} s + 1", sleep_s > 0 and grace >= sleep_s + exit_timeout + 1)

    # Security.
    psc, csc = spec.get("securityContext", {}), ctr.get("securityContext", {})
    t.check(p + "runAsNonRoot", psc.get("runAsNonRoot") is True or csc.get("runAsNonRoot") is True)
    t.check(p + f"runs as the image's user {uid}", psc.get("runAsUser") == uid[0] and
            (uid[1] is None or psc.get("runAsGroup") == uid[1]),
            f"{psc.get('runAsUser')}:{psc.get('runAsGroup')}")
    seccomp = psc.get("seccompProfile") or csc.get("seccompProfile") or {}
    t.check(p + "seccomp RuntimeDefault", seccomp.get("type") == "RuntimeDefault")
    t.check(p + "readOnlyRootFilesystem", csc.get("readOnlyRootFilesystem") is True)
    t.check(p + "allowPrivilegeEscalation false", csc.get("allowPrivilegeEscalation") is False)
    t.check(p + "capabilities drop ALL", csc.get("capabilities", {}).get("drop") == ["ALL"])
    for ic in spec.get("initContainers", []):
        isc = ic.get("securityContext", {})
        t.check(p + f"init container {ic['name']}: no privilege, no capabilities",
                isc.get("allowPrivilegeEscalation") is False and
                isc.get("capabilities", {}).get("drop") == ["ALL"])

    # Autoscaling.
    ref = hpa["spec"]["scaleTargetRef"]
    t.check(p + "HPA scales the Deployment",
            (ref.get("apiVersion"), ref.get("kind"), ref.get("name")) ==
            ("apps/v1", "Deployment", dep["metadata"]["name"]), f"{ref}")
    ms = hpa["spec"].get("metrics", [])
    t.check(p + "HPA: one Pods metric with an AverageValue target",
            len(ms) == 1 and ms[0]["type"] == "Pods" and
            ms[0]["pods"]["target"]["type"] == "AverageValue", f"{ms}")
    t.check(p + "HPA: minReplicas >= 2 (the PDB can let one go)",
            hpa["spec"].get("minReplicas", 1) >= 2)
    scrapes = [(e.get("port"), e.get("path", "/metrics")) for e in sm["spec"]["endpoints"]]
    t.check(p + "ServiceMonitor scrapes port 'metrics' at /metrics",
            scrapes == [("metrics", "/metrics")], f"{scrapes}")
    return dep


def check_cpu(t, objs):
    ctr = container(find(objs, "Deployment", "kiln")["spec"]["template"]["spec"], "kiln")
    res = ctr.get("resources", {})
    t.check("overlays/cpu: CPU and memory requests and limits",
            all(k in res.get(x, {}) for x in ("requests", "limits") for k in ("cpu", "memory")),
            f"{res}")
    t.check("overlays/cpu: models from the kiln-models PVC",
            any(v.get("persistentVolumeClaim", {}).get("claimName") == "kiln-models"
                for v in find(objs, "Deployment", "kiln")["spec"]["template"]["spec"]["volumes"]))
    find(objs, "PersistentVolumeClaim", "kiln-models")


def check_gpu(t, objs):
    spec = find(objs, "Deployment", "kiln")["spec"]["template"]["spec"]
    ctr = container(spec, "kiln")
    res = ctr.get("resources", {})
    gpus = str(res.get("limits", {}).get("nvidia.com/gpu", "0"))
    t.check("overlays/gpu: nvidia.com/gpu limit", gpus not in ("0", ""), f"{res}")
    required = (spec.get("affinity", {}).get("nodeAffinity", {})
                .get("requiredDuringSchedulingIgnoredDuringExecution", {}))
    terms = required.get("nodeSelectorTerms", [])
    t.check("overlays/gpu: required node affinity on a GPU node label",
            any(e.get("key", "").startswith("nvidia.com/gpu") for term in terms
                for e in term.get("matchExpressions", [])), f"{terms}")
    t.check("overlays/gpu: tolerates the nvidia.com/gpu taint",
            any(tol.get("key") == "nvidia.com/gpu" for tol in spec.get("tolerations", [])))


def check_init_container(t, objs):
    spec = find(objs, "Deployment", "kiln")["spec"]["template"]["spec"]
    vols = {v["name"]: v for v in spec["volumes"]}
    ctr = container(spec, "kiln")
    mount = [m for m in ctr["volumeMounts"] if m["mountPath"] == "/models"]
    vol = vols.get(mount[0]["name"]) if mount else None
    t.check("overlays/init-container: /models is a per-pod emptyDir",
            vol is not None and "emptyDir" in vol and "persistentVolumeClaim" not in vol, f"{vol}")
    ics = spec.get("initContainers", [])
    t.check("overlays/init-container: an init container writes that volume",
            any(m["name"] == (mount[0]["name"] if mount else None) and not m.get("readOnly")
                for ic in ics for m in ic.get("volumeMounts", [])))
    t.check("overlays/init-container: no kiln-models PVC",
            not [o for o in objs if o["kind"] == "PersistentVolumeClaim"])


def check_kserve(t, objs):
    rt = find(objs, "ClusterServingRuntime")
    isvc = find(objs, "InferenceService")
    spec = rt["spec"]
    fmts = {f["name"] for f in spec["supportedModelFormats"]}
    t.check("kserve: runtime formats include onnx and gguf", {"onnx", "gguf"} <= fmts, f"{fmts}")
    t.check("kserve: protocols v2 and grpc-v2",
            {"v2", "grpc-v2"} <= set(spec.get("protocolVersions", [])))
    ctr = spec["containers"][0]
    args = ctr.get("command", []) + ctr.get("args", [])
    t.check("kserve: container named kserve-container", ctr.get("name") == "kserve-container")
    t.check("kserve: kiln serve on /mnt/models", args[:2] == ["kiln", "serve"] and
            flag(args, "--model-repository") == "/mnt/models", f"{args}")
    t.check("kserve: HTTP on 8080, gRPC on 9000 (KServe's ports)",
            flag(args, "--http-port") == "8080" and flag(args, "--grpc-port") == "9000")
    ann = spec.get("annotations", {})
    t.check("kserve: Prometheus scrape annotations name kiln's metrics port and path",
            ann.get("prometheus.kserve.io/port") == flag(args, "--metrics-port") and
            ann.get("prometheus.kserve.io/path") == "/metrics", f"{ann}")
    model = isvc["spec"]["predictor"]["model"]
    t.check("kserve: the InferenceService uses the runtime",
            model.get("runtime") == rt["metadata"]["name"])
    t.check("kserve: with a format the runtime supports", model["modelFormat"]["name"] in fmts)
    t.check("kserve: and a protocol it speaks",
            model.get("protocolVersion", "v1") in spec["protocolVersions"])
    return args


def check_batch(t, objs, kiln):
    job = find(objs, "Job", "kiln-batch")
    spec = job["spec"]["template"]["spec"]
    ctr = container(spec)
    args = ctr.get("command", []) + ctr.get("args", [])
    t.check("batch: restartPolicy OnFailure", spec.get("restartPolicy") == "OnFailure")
    t.check("batch: backoffLimit > 0", job["spec"].get("backoffLimit", 6) > 0)
    t.check("batch: `kiln batch ... --resume`",
            args[:2] == ["kiln", "batch"] and "--resume" in args, f"{args}")
    mounts = {m["mountPath"]: m for m in ctr.get("volumeMounts", [])}
    vols = {v["name"]: v for v in spec.get("volumes", [])}
    for fl in ("--input", "--output"):
        path = flag(args, fl) or ""
        mount = next((mp for mp in mounts if path.startswith(mp.rstrip("/") + "/")), None)
        vol = vols.get(mounts[mount]["name"]) if mount else None
        t.check(f"batch: {fl} {path} is on a PersistentVolumeClaim",
                vol is not None and "persistentVolumeClaim" in vol, f"{vol}")
    t.check("batch: models at --model-repository are mounted",
            flag(args, "--model-repository") in mounts)
    pvc_names = {o["metadata"]["name"] for o in objs if o["kind"] == "PersistentVolumeClaim"}
    claims = {v.get("persistentVolumeClaim", {}).get("claimName") for v in vols.values()}
    t.check("batch: the data PVC is part of the kustomization", bool(claims & pvc_names))
    r = subprocess.run([kiln, "batch", "--help"], capture_output=True, text=True, timeout=60)
    if r.returncode != 0 or not re.search(r"^Usage: \S*kiln batch\b", r.stdout, re.M):
        print("NOTE  this kiln has no `batch` command: the Job's flags are not checked against it")
        return
    for a in args[2:]:
        if a.startswith("--"):
            name = a.split("=")[0]
            known = re.search(r"(^|[\s,])" + re.escape(name) + r"([\s,=]|$)", r.stdout, re.M)
            t.check(f"batch: `kiln batch` knows {name}", known is not None)


def check_adapter(t, objs, hpa_metric):
    rules = adapter_rules(objs)
    names = [r.get("name", {}).get("as") for r in rules]
    t.check("adapter: a rule exposes the HPA's metric", hpa_metric in names,
            f"{hpa_metric} not in {names}")
    rule = next((r for r in rules if r.get("name", {}).get("as") == hpa_metric), None)
    if rule is None:
        return []
    series = series_query_names(rule["seriesQuery"])
    t.check("adapter: seriesQuery names one metric", len(series) == 1, f"{series}")
    matches = rule.get("name", {}).get("matches", "")
    t.check("adapter: name.matches matches it",
            bool(series) and re.search(matches, series[0]) is not None, f"{matches!r} vs {series}")
    ov = rule.get("resources", {}).get("overrides", {})
    t.check("adapter: namespace and pod labels map to resources",
            ov.get("namespace", {}).get("resource") == "namespace" and
            ov.get("pod", {}).get("resource") == "pod", f"{ov}")
    t.check("adapter: the seriesQuery keeps only series with namespace and pod",
            'namespace!=""' in rule["seriesQuery"] and 'pod!=""' in rule["seriesQuery"])
    used = promql_metric_names(rule["metricsQuery"], series[0] if series else "")
    q = rule["metricsQuery"]
    t.check("adapter: queue time over successful requests, per pod, with 1m rates",
            used == ["nv_inference_queue_duration_us", "nv_inference_request_success"] and
            q.count("[1m]") == 2 and q.count("by (<<.GroupBy>>)") == 2 and
            q.index("nv_inference_queue_duration_us") < q.index("/ clamp_min(") <
            q.index("nv_inference_request_success"),
            f"{used} in {q!r}")
    return sorted(set(series) | set(used))


# ---------------------------------------------------------------------------------------------
# The live server.

class Kiln:
    def __init__(self, argv):
        self.log = tempfile.TemporaryFile()
        print("starting: " + " ".join(argv), flush=True)
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT)

    def output(self):
        self.log.seek(0)
        return self.log.read().decode("utf-8", "replace")

    def wait(self, port, want_ready=True, timeout=READY_TIMEOUT_S):
        """Waits until /v2/health/ready answers (200 when want_ready, else anything)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                c = h.Client(port, timeout=2)
                status = c.get("/v2/health/ready").status
                c.close()
                if status == 200 or not want_ready:
                    return True
            except OSError:
                pass
            time.sleep(0.2)
        return False

    def stop(self, timeout=40):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None


def get(port, path):
    c = h.Client(port, timeout=10)
    try:
        return c.get(path)
    finally:
        c.close()


def live_args(args, kiln, repo, ports):
    """The manifest's command line with the binary, the repository and the ports of this run."""
    out = [kiln] + args[1:]
    out = with_flag(out, "--model-repository", repo)
    for fl, port in ports.items():
        out = with_flag(out, fl, str(port))
    return out


def check_live_server(t, kiln, repo, dep, svc, sm, metric_names):
    ctr = container(dep["spec"]["template"]["spec"], "kiln")
    args = expand_env(ctr.get("command", []) + ctr.get("args", []), ctr)
    t.check("live: every $(VAR) of the arguments is defined",
            not any("$(" in a for a in args), f"{args}")
    ports = {fl: h.free_port() for fl in ("--http-port", "--grpc-port", "--metrics-port")}
    by_name = {"http": ports["--http-port"], "grpc": ports["--grpc-port"],
               "metrics": ports["--metrics-port"]}
    server = Kiln(live_args(args, kiln, repo, ports))
    http = ports["--http-port"]
    try:
        if not t.check("live: kiln serve with the Deployment's arguments becomes ready",
                       server.wait(http), server.output()[-3000:]):
            return
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            g = ctr[probe]["httpGet"]
            r = get(by_name[g["port"]] if isinstance(g["port"], str) else http, g["path"])
            t.check(f"live: {probe} GET {g['path']} -> 200", r.status == 200, f"{r}")
        r = None
        c = h.Client(http)
        try:
            r = c.post("/v2/models/add_sub/infer", h.add_sub_request([([1.0] * 16, [2.0] * 16)]))
        finally:
            c.close()
        t.check("live: one inference", r is not None and r.status == 200, f"{r}")

        ep = sm["spec"]["endpoints"][0]
        sport = next(p for p in svc["spec"]["ports"] if p["name"] == ep["port"])
        target = sport.get("targetPort")
        scrape = get(by_name[target] if isinstance(target, str) else by_name["metrics"],
                     ep.get("path", "/metrics"))
        if not t.check("live: the ServiceMonitor's scrape answers 200", scrape.status == 200,
                       f"{scrape}"):
            return
        fams = prom.parse(scrape.body.decode("utf-8"))
        for name in metric_names:
            fam = fams.get(name)
            t.check(f"live: kiln exports {name}", fam is not None and fam.samples,
                    "no such family" if fam is None else "no samples")
        clash = sorted({f.name for f in fams.values() for s in f.samples
                        if {"namespace", "pod"} & set(s.labels)})
        t.check("live: no series labels namespace/pod itself (the scrape adds them)", not clash,
                f"{clash}")
        try:
            succ = sum(s.value for s in fams["nv_inference_request_success"].samples)
            queue = sum(s.value for s in fams["nv_inference_queue_duration_us"].samples)
            t.check("live: the adapter's quantity is defined after traffic",
                    succ >= 1 and queue >= 0, f"success {succ}, queue {queue} us")
            average = queue / max(succ, 1) / 1e6
            print(f"      average queue time per request so far: {average:.6f} s "
                  "(the value kiln_queue_seconds_per_request would report)")
        except KeyError as e:
            t.check("live: the adapter's quantity is defined after traffic", False, f"{e}")
    finally:
        exit_timeout = int(flag(args, "--exit-timeout-secs") or 30)
        t0 = time.monotonic()
        rc = server.stop(exit_timeout + 10)
        took = time.monotonic() - t0
        t.check(f"live: SIGTERM drains and exits 0 within --exit-timeout-secs ({exit_timeout} s)",
                rc == 0 and took <= exit_timeout, f"exit {rc} after {took:.1f} s")


def check_live_kserve(t, kiln, repo, args):
    ports = {fl: h.free_port() for fl in ("--http-port", "--grpc-port", "--metrics-port")}
    server = Kiln(live_args(args, kiln, repo, ports))
    try:
        t.check("live: kiln serve with the KServe runtime's arguments becomes ready",
                server.wait(ports["--http-port"]), server.output()[-3000:])
        r = get(ports["--metrics-port"], "/metrics")
        t.check("live: the KServe scrape annotations reach /metrics", r.status == 200, f"{r}")
    finally:
        rc = server.stop(40)
        t.check("live: it exits 0 on SIGTERM", rc == 0, f"exit {rc}")


# ---------------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kiln", required=True, help="path to the kiln executable")
    ap.add_argument("--repo", required=True, help="demo model repository")
    ap.add_argument("--deploy-dir", default=os.path.join(ROOT, "deploy", "kubernetes"))
    ap.add_argument("--dockerfile", default=os.path.join(ROOT, "Dockerfile"))
    ap.add_argument("--kubectl",
                    help="Debian's kubectl (default: where scripts/install-deps deploy puts it)")
    ap.add_argument("--no-live", action="store_true", help="skip the checks against a running kiln")
    args = ap.parse_args()

    global yaml
    missing = []
    try:
        import yaml  # noqa: F401  (python3-yaml)
    except ImportError:
        missing.append("PyYAML (python3-yaml)")
    kubectls = find_kubectls(args.kubectl)
    if not kubectls:
        missing.append("Debian's kubectl 1.20 (kubernetes-client)")
    ndir = node_dir()
    if not node_ready(ndir):
        missing.append(f"node and the kubernetes-models packages in {ndir}")
    if missing:
        print("SKIP: missing " + ", ".join(missing) + "; run scripts/install-deps deploy")
        return SKIP

    t = h.Checks()
    dirs = kustomizations(args.deploy_dir)
    print("kustomizations: " + ", ".join(dirs))
    want = {"base", "models", "overlays/cpu", "overlays/gpu", "overlays/init-container", "kserve",
            "batch", "prometheus-adapter"}
    t.check("every expected kustomization is there", want <= set(dirs),
            f"missing {sorted(want - set(dirs))}")

    # Render with each kubectl; the first (Debian's) rendering is the one checked in depth.
    rendered = {}
    for label, kubectl, _ in kubectls:
        for d in dirs:
            try:
                objs = render(kubectl, os.path.join(args.deploy_dir, d))
                bad = [o for o in objs if not (isinstance(o, dict) and o.get("apiVersion") and
                                               o.get("kind") and o.get("metadata", {}).get("name"))]
                ok = t.check(f"{label}: kustomize {d} ({len(objs)} objects, each with apiVersion, "
                             "kind and name)", len(objs) > 0 and not bad, f"not objects: {bad}")
            except (RuntimeError, subprocess.TimeoutExpired, yaml.YAMLError) as e:
                ok = t.check(f"{label}: kustomize {d}", False, str(e))
                objs = None
            if ok and objs is not None:
                rendered.setdefault(label, {})[d] = objs
    debian_label = kubectls[0][0]
    objs_by_dir = rendered.get(debian_label, {})
    for label, by_dir in rendered.items():
        if label == debian_label:
            continue
        for d, objs in by_dir.items():
            same = sorted(map(obj_id, objs)) == sorted(map(obj_id, objs_by_dir.get(d, [])))
            t.check(f"{label}: {d} renders the same objects as {debian_label}", same)

    all_renderings = {f"{label}: {d}": objs
                      for label, by_dir in rendered.items() for d, objs in by_dir.items()}
    validate_all(t, ndir, all_renderings)

    uid = dockerfile_uid(args.dockerfile)
    t.check("Dockerfile runs as a numeric non-root user", uid[0] not in (None, 0), f"{uid}")
    dep = svc = sm = None
    metric_names = []
    kserve_args = None
    for d in ("overlays/cpu", "overlays/gpu", "overlays/init-container"):
        if d in objs_by_dir:
            t.run(f"{d}: consistency", lambda d=d: check_server_overlay(t, d, objs_by_dir[d], uid))
    if "overlays/cpu" in objs_by_dir:
        t.run("overlays/cpu", lambda: check_cpu(t, objs_by_dir["overlays/cpu"]))
        dep = find(objs_by_dir["overlays/cpu"], "Deployment", "kiln")
        svc = find(objs_by_dir["overlays/cpu"], "Service", "kiln")
        sm = find(objs_by_dir["overlays/cpu"], "ServiceMonitor", "kiln")
        hpa = find(objs_by_dir["overlays/cpu"], "HorizontalPodAutoscaler", "kiln")
        hpa_metric = hpa["spec"]["metrics"][0].get("pods", {}).get("metric", {}).get("name")
        if "prometheus-adapter" in objs_by_dir:
            try:
                metric_names = check_adapter(t, objs_by_dir["prometheus-adapter"], hpa_metric)
            except Exception as e:  # noqa: BLE001
                t.check("adapter rule", False, f"{type(e).__name__}: {e}")
    if "overlays/gpu" in objs_by_dir:
        t.run("overlays/gpu", lambda: check_gpu(t, objs_by_dir["overlays/gpu"]))
    if "overlays/init-container" in objs_by_dir:
        t.run("overlays/init-container",
              lambda: check_init_container(t, objs_by_dir["overlays/init-container"]))
    if "kserve" in objs_by_dir:
        try:
            kserve_args = check_kserve(t, objs_by_dir["kserve"])
        except Exception as e:  # noqa: BLE001
            t.check("kserve", False, f"{type(e).__name__}: {e}")
    if "batch" in objs_by_dir:
        t.run("batch", lambda: check_batch(t, objs_by_dir["batch"], args.kiln))

    if not args.no_live:
        if dep is not None and metric_names:
            t.run("live server", lambda: check_live_server(t, args.kiln, args.repo, dep, svc, sm,
                                                           metric_names))
        else:
            t.check("live: the cpu overlay and the adapter rule were read", False)
        if kserve_args:
            t.run("live KServe runtime",
                  lambda: check_live_kserve(t, args.kiln, args.repo, kserve_args))

    return 0 if t.summary() else 1


if __name__ == "__main__":
    sys.exit(main())
