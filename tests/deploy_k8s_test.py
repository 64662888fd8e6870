"""The Kubernetes manifests in deploy/k8s, checked offline.

- The generated PrometheusRule and dashboard ConfigMap equal their sources
  (deploy/k8s/generate.py --check, then parsed and compared), and the rules
  inside the PrometheusRule pass `promtool check rules`.
- Every kustomization renders (`kubectl kustomize` where kubectl exists;
  otherwise the kustomizations' `resources` lists are followed, which is all
  they use) and every object of a built-in kind validates, strictly (unknown
  fields refused), against the Kubernetes API schemas that PyPI's
  kubernetes-validate carries. The Prometheus Operator kinds (PodMonitor,
  PrometheusRule) have no schema there: their fields are checked here.
- What the issue asks of the Deployment, Service, PDB, monitors and HPA holds
  (probes on the gRPC health service, non-root read-only securityContext,
  read-only dataset mount, grace above --shutdown-grace-seconds, headless
  Service, selectors that match, the HPA's metric served by the adapter and
  recorded by a rule), and every flag passed to stoker-server / stoker-bench
  is one they accept.

Usage: deploy_k8s_test.py REPO_ROOT BUILD_DIR   (run with build/pyenv/bin/python)
"""
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

ROOT, BUILD = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
K8S = f"{ROOT}/deploy/k8s"
KUBERNETES_VERSION = "1.30.0"  # the oldest release still in common support with gRPC probes and policy/v1
results = []


def check(name, ok, detail=""):
    results.append(ok)
    print(f"{'ok' if ok else 'FAIL'}: {name}" + (f" {detail}" if detail and not ok else ""), flush=True)
    return ok


def load_yaml(path):
    with open(path) as f:
        return yaml.safe_load(f)


def render(directory):
    """The kustomization's objects and how they were rendered."""
    if shutil.which("kubectl"):
        out = subprocess.run(["kubectl", "kustomize", directory], capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"kubectl kustomize {directory}: {out.stderr.strip()}")
        return [d for d in yaml.safe_load_all(out.stdout) if d], "kubectl kustomize"
    docs = []
    k = load_yaml(f"{directory}/kustomization.yaml")
    unsupported = set(k) - {"apiVersion", "kind", "resources", "patches"}
    if unsupported:
        raise RuntimeError(f"{directory}: no kubectl here, and the fallback follows only resources and JSON patches "
                           f"(found {unsupported})")
    for r in k["resources"]:
        path = os.path.join(directory, r)
        if os.path.isdir(path):
            docs += render(path)[0]
        else:
            with open(path) as f:
                docs += [d for d in yaml.safe_load_all(f) if d]
    for patch in k.get("patches", []):  # JSON 6902 patches on a kind/name target
        import jsonpatch
        ops = load_yaml(os.path.join(directory, patch["path"]))
        target = patch["target"]
        docs = [jsonpatch.apply_patch(d, ops) if d["kind"] == target["kind"] and
                d["metadata"]["name"] == target["name"] else d for d in docs]
    return docs, "resources lists and JSON patches (no kubectl here)"


def generated_equal_sources():
    r = subprocess.run([sys.executable, f"{K8S}/generate.py", "--check"], capture_output=True, text=True)
    check("deploy/k8s/generate.py --check: generated files are up to date", r.returncode == 0, r.stderr.strip())
    rule = load_yaml(f"{K8S}/base/generated/prometheusrule.yaml")
    sources = [load_yaml(f"{ROOT}/deploy/prometheus/{n}") for n in ("recording_rules.yml", "alerting_rules.yml")]
    check("PrometheusRule spec.groups equal deploy/prometheus's recording + alerting groups",
          rule["spec"]["groups"] == sources[0]["groups"] + sources[1]["groups"])
    with tempfile.NamedTemporaryFile("w", suffix=".yml") as f:
        yaml.safe_dump({"groups": rule["spec"]["groups"]}, f)
        f.flush()
        r = subprocess.run(["promtool", "check", "rules", f.name], capture_output=True, text=True)
        check("promtool check rules on the PrometheusRule's groups", r.returncode == 0, r.stdout + r.stderr)
    cm = load_yaml(f"{K8S}/base/generated/grafana-dashboards.yaml")
    dash_dir = f"{ROOT}/deploy/grafana/dashboards"
    names = sorted(os.listdir(dash_dir))
    same = sorted(cm["data"]) == names and all(
        json.loads(cm["data"][n]) == json.load(open(f"{dash_dir}/{n}")) for n in names)
    check(f"dashboard ConfigMap holds exactly deploy/grafana/dashboards ({len(names)} dashboards)", same)
    check("dashboard ConfigMap is labelled for Grafana's sidecar", cm["metadata"]["labels"].get("grafana_dashboard") == "1")


def validate_schemas(objects, where):
    import kubernetes_validate as kv
    for o in objects:
        name = f"{where}: {o['kind']}/{o['metadata']['name']}"
        if o["apiVersion"].startswith("monitoring.coreos.com/"):
            continue  # checked by check_operator_kinds
        try:
            kv.validate(o, KUBERNETES_VERSION, strict=True)
            check(f"{name} validates strictly against the Kubernetes {KUBERNETES_VERSION} schema", True)
        except Exception as e:  # ValidationError, SchemaNotFoundError
            check(f"{name} validates strictly against the Kubernetes {KUBERNETES_VERSION} schema", False,
                  f"{type(e).__name__}: {str(e)[:600]}")


def flags_accepted(binary, args):
    """The --flags in args that `binary --helpfull` does not list."""
    out = subprocess.run([binary, "--helpfull"], capture_output=True, text=True)
    known = set(re.findall(r"--([a-z0-9_]+)", out.stdout + out.stderr))
    missing = []
    for a in args:
        m = re.match(r"--([a-z0-9_-]+)", a)
        if m and m.group(1).replace("-", "_") not in known:
            missing.append(a)
    return missing


def by_kind(objects):
    out = {}
    for o in objects:
        out.setdefault(o["kind"], []).append(o)
    return out


def matches(selector, labels):
    ok = all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())
    for e in selector.get("matchExpressions", []):
        if e["operator"] == "Exists":
            ok = ok and e["key"] in labels
        elif e["operator"] == "In":
            ok = ok and labels.get(e["key"]) in e["values"]
    return ok


def check_servers(objects):
    k = by_kind(objects)
    dep = k["Deployment"][0]
    pod = dep["spec"]["template"]
    spec = pod["spec"]
    c = spec["containers"][0]
    args = c["args"]
    flag = {a.split("=", 1)[0]: a.split("=", 1)[1] for a in args if "=" in a}
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    check("Deployment: readiness and liveness probes use gRPC health on the gRPC port",
          c["readinessProbe"]["grpc"]["port"] == ports["grpc"] == int(flag["--port"])
          and c["livenessProbe"]["grpc"]["port"] == ports["grpc"])
    check("Deployment: the metrics port is the one the server listens on", ports["metrics"] == int(flag["--metrics-port"]))
    check("Deployment: CPU and memory requests and limits are set",
          all(c["resources"][w].get(r) for w in ("requests", "limits") for r in ("cpu", "memory")))
    check("Deployment: --workers matches the CPU limit", flag["--workers"] == str(c["resources"]["limits"]["cpu"]))
    mem = c["resources"]["limits"]["memory"]
    units = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40}
    limit = int(mem[:-2]) * units[mem[-2:]] if mem[-2:] in units else int(mem)
    check("Deployment: --max-inflight-bytes is at most half the memory limit",
          int(flag.get("--max-inflight-bytes", 0)) and int(flag["--max-inflight-bytes"]) <= limit // 2,
          f"({flag.get('--max-inflight-bytes')} vs {mem})")
    spreads = spec.get("topologySpreadConstraints", [])
    check("Deployment: spread over nodes",
          any(t["topologyKey"] == "kubernetes.io/hostname" and matches(t["labelSelector"], pod["metadata"]["labels"])
              for t in spreads))
    psc, csc = spec["securityContext"], c["securityContext"]
    check("Deployment: non-root, read-only root filesystem, no capabilities, no privilege escalation",
          psc["runAsNonRoot"] and psc["runAsUser"] != 0 and csc["readOnlyRootFilesystem"]
          and csc["capabilities"]["drop"] == ["ALL"] and csc["allowPrivilegeEscalation"] is False
          and psc["seccompProfile"]["type"] == "RuntimeDefault")
    mount = next(m for m in c["volumeMounts"] if m["mountPath"] == flag["--data-root"])
    volume = next(v for v in spec["volumes"] if v["name"] == mount["name"])
    check("Deployment: the dataset volume is mounted read-only at --data-root",
          mount.get("readOnly") is True and volume["persistentVolumeClaim"].get("readOnly") is True)
    check("Deployment: terminationGracePeriodSeconds above --shutdown-grace-seconds",
          spec["terminationGracePeriodSeconds"] > float(flag["--shutdown-grace-seconds"]),
          f"({spec['terminationGracePeriodSeconds']} vs {flag['--shutdown-grace-seconds']})")
    missing = flags_accepted(f"{BUILD}/server/stoker-server", args)
    check("Deployment: every flag is one stoker-server accepts", not missing, f"(unknown: {missing})")
    svc = k["Service"][0]
    check("Service: headless, selects the server pods, names the gRPC port",
          svc["spec"]["clusterIP"] == "None" and matches({"matchLabels": svc["spec"]["selector"]}, pod["metadata"]["labels"])
          and any(p["name"] == "grpc" and p["port"] == ports["grpc"] for p in svc["spec"]["ports"]))
    pdb = k["PodDisruptionBudget"][0]
    check("PodDisruptionBudget selects the server pods", matches(pdb["spec"]["selector"], pod["metadata"]["labels"]))
    return dep


def check_operator_kinds(objects, dep, training_pod_labels, training_ports):
    """PodMonitor and PrometheusRule: the fields we use, by hand (no schema)."""
    k = by_kind(objects)
    pod = dep["spec"]["template"]
    server_ports = {p["name"] for p in pod["spec"]["containers"][0]["ports"]}
    monitors = {m["metadata"]["name"]: m for m in k["PodMonitor"]}
    for m in monitors.values():
        check(f"PodMonitor/{m['metadata']['name']}: apiVersion monitoring.coreos.com/v1 with selector and endpoints",
              m["apiVersion"] == "monitoring.coreos.com/v1" and "selector" in m["spec"]
              and all(set(e) <= {"port", "path", "interval", "relabelings"} for e in m["spec"]["podMetricsEndpoints"]))
    s = monitors["stoker-server"]
    e = s["spec"]["podMetricsEndpoints"][0]
    check("PodMonitor/stoker-server: selects the server pods on their metrics port, as job stoker-server",
          matches(s["spec"]["selector"], pod["metadata"]["labels"]) and e["port"] in server_ports
          and {"targetLabel": "job", "replacement": "stoker-server"} in e["relabelings"])
    t = monitors["stoker-training"]
    e = t["spec"]["podMetricsEndpoints"][0]
    check("PodMonitor/stoker-training: selects the example training pod on its metrics port, job from its label",
          matches(t["spec"]["selector"], training_pod_labels) and e["port"] in training_ports
          and any(r.get("targetLabel") == "job" for r in e["relabelings"]))
    rule = k["PrometheusRule"][0]
    check("PrometheusRule: apiVersion monitoring.coreos.com/v1, groups with named rules",
          rule["apiVersion"] == "monitoring.coreos.com/v1"
          and all(g["name"] and all(("record" in r) != ("alert" in r) and r["expr"] for r in g["rules"])
                  for g in rule["spec"]["groups"]))


def files_under_secret_mounts(container, volumes, paths):
    """The paths that no secret volume mounted in the container holds."""
    secret_mounts = [m["mountPath"] for m in container.get("volumeMounts", [])
                     if "secret" in volumes.get(m["name"], {})]
    return [p for p in paths if not any(p.startswith(m.rstrip("/") + "/") for m in secret_mounts)]


def check_secure(objects):
    k = by_kind(objects)
    dep = k["Deployment"][0]
    pod = dep["spec"]["template"]["spec"]
    server = pod["containers"][0]
    volumes = {v["name"]: v for v in pod["volumes"]}
    args = server["args"]
    for flag in ("--tls-cert=", "--tls-key=", "--tls-client-ca=", "--auth-token-file=", "--metrics-basic-auth-file=",
                 "--max-streams-per-client="):
        check(f"secure: the server gets {flag[:-1]}", any(a.startswith(flag) for a in args))
    missing = flags_accepted(f"{BUILD}/server/stoker-server", args)
    check("secure: every server flag is one stoker-server accepts", not missing, f"(unknown: {missing})")
    files = [a.split("=", 1)[1] for a in args if a.split("=")[0] in
             ("--tls-cert", "--tls-key", "--tls-client-ca", "--auth-token-file", "--metrics-basic-auth-file")]
    outside = files_under_secret_mounts(server, volumes, files)
    check("secure: every file the server flags name is in a mounted Secret", not outside, f"({outside})")
    for probe in ("readinessProbe", "livenessProbe"):
        command = server[probe].get("exec", {}).get("command", [])
        ok = command[:1] == ["/usr/local/bin/stoker-health"] and not flags_accepted(
            f"{BUILD}/tools/stoker-health", command[1:]) and any(c.startswith("--tls-cert=") for c in command)
        check(f"secure: {probe} runs stoker-health over TLS with a client certificate", ok, f"({command})")
        probe_files = [c.split("=", 1)[1] for c in command if c.startswith(("--tls-ca=", "--tls-cert=", "--tls-key="))]
        check(f"secure: {probe}'s files are in a mounted Secret",
              not files_under_secret_mounts(server, volumes, probe_files))
    monitor = next(m for m in k["PodMonitor"] if m["metadata"]["name"] == "stoker-server")
    auth = monitor["spec"]["podMetricsEndpoints"][0].get("basicAuth", {})
    check("secure: Prometheus scrapes the servers with basic auth from a Secret",
          auth.get("username", {}).get("key") == "username" and auth.get("password", {}).get("key") == "password")
    job = k["Job"][0]
    trainer = job["spec"]["template"]["spec"]["containers"][0]
    jvolumes = {v["name"]: v for v in job["spec"]["template"]["spec"]["volumes"]}
    missing = flags_accepted(f"{BUILD}/client/stoker-bench", trainer["args"])
    check("secure: every training Job flag is one stoker-bench accepts", not missing, f"(unknown: {missing})")
    tls_files = [a.split("=", 1)[1] for a in trainer["args"] if a.startswith(("--tls-ca=", "--tls-cert=", "--tls-key="))]
    check("secure: the training Job uses TLS with a client certificate from a mounted Secret",
          len(tls_files) == 3 and not files_under_secret_mounts(trainer, jvolumes, tls_files), f"({tls_files})")
    env = {e["name"]: e for e in trainer.get("env", [])}
    check("secure: the training Job's token comes from a Secret in $STOKER_AUTH_TOKEN",
          "secretKeyRef" in env.get("STOKER_AUTH_TOKEN", {}).get("valueFrom", {}))


def check_autoscaling(objects, dep):
    k = by_kind(objects)
    hpa = k["HorizontalPodAutoscaler"][0]
    ref = hpa["spec"]["scaleTargetRef"]
    check("HPA scales the server Deployment", ref["kind"] == "Deployment" and ref["name"] == dep["metadata"]["name"])
    metric = hpa["spec"]["metrics"][0]["external"]
    adapter = yaml.safe_load(next(c for c in k["ConfigMap"] if c["metadata"]["name"] == "stoker-prometheus-adapter")
                             ["data"]["config.yaml"])
    served = {r["name"]["as"]: r for r in adapter["externalRules"]}
    check("HPA's external metric is served by the prometheus-adapter rules",
          metric["metric"]["name"] in served, f"({metric['metric']['name']} not in {list(served)})")
    recorded = {r.get("record") for g in load_yaml(f"{ROOT}/deploy/prometheus/recording_rules.yml")["groups"]
                for r in g["rules"]}
    series = re.findall(r"stoker:[a-z_:]+", served.get(metric["metric"]["name"], {}).get("metricsQuery", ""))
    check("the adapter's query reads a series the recording rules make", series and set(series) <= recorded,
          f"({series})")
    check("HPA target: AverageValue 1 makes replicas equal the servers needed",
          metric["target"] == {"type": "AverageValue", "averageValue": "1"})


def check_object_storage(objects):
    k = by_kind(objects)
    pod = k["Deployment"][0]["spec"]["template"]["spec"]
    server = pod["containers"][0]
    args = server["args"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    check("object-storage: the server reads an s3:// data root",
          any(a.startswith("--data-root=s3://") for a in args))
    missing = flags_accepted(f"{BUILD}/server/stoker-server", args)
    check("object-storage: every server flag is one stoker-server accepts", not missing, f"(unknown: {missing})")
    cache = [a.split("=", 1)[1] for a in args if a.startswith("--cache-dir=")]
    mounts = {m["mountPath"]: m for m in server["volumeMounts"]}
    check("object-storage: --cache-dir is a writable emptyDir mount",
          len(cache) == 1 and cache[0] in mounts and not mounts[cache[0]].get("readOnly")
          and "emptyDir" in volumes[mounts[cache[0]]["name"]])
    check("object-storage: no datasets volume is left", "datasets" not in volumes)
    sa = k["ServiceAccount"][0]
    check("object-storage: the service account names the IAM role for web identity",
          sa["metadata"].get("annotations", {}).get("eks.amazonaws.com/role-arn", "").startswith("arn:aws:iam::"))


def main():
    try:
        import kubernetes_validate  # noqa: F401
    except ImportError:
        print("FAIL: kubernetes-validate is missing: run this with build/pyenv/bin/python (make pyenv installs it)")
        return 1
    generated_equal_sources()
    rendered = {}
    for d in ("base", "autoscaling", "examples", "secure", "object-storage"):
        try:
            rendered[d], how = render(f"{K8S}/{d}")
            check(f"deploy/k8s/{d} renders ({how}): {len(rendered[d])} objects", len(rendered[d]) > 0)
        except RuntimeError as e:
            check(f"deploy/k8s/{d} renders", False, str(e))
            return 1
        validate_schemas(rendered[d], f"deploy/k8s/{d}")
    dep = check_servers(rendered["base"])
    job = by_kind(rendered["examples"])["Job"][0]
    trainer = job["spec"]["template"]["spec"]["containers"][0]
    check_operator_kinds(rendered["base"], dep, job["spec"]["template"]["metadata"]["labels"],
                         {p["name"] for p in trainer["ports"]})
    missing = flags_accepted(f"{BUILD}/client/stoker-bench", trainer["args"])
    check("example training Job: every flag is one stoker-bench accepts", not missing, f"(unknown: {missing})")
    check("example training Job: its servers are the headless Service's DNS name and gRPC port",
          "--servers=dns:///stoker-server.stoker.svc.cluster.local:50051" in trainer["args"])
    check_autoscaling(rendered["autoscaling"], dep)
    check_secure(rendered["secure"])
    check_object_storage(rendered["object-storage"])
    # The checks above can fail: a broken copy of the Deployment must be refused.
    import kubernetes_validate as kv
    broken = copy.deepcopy(by_kind(rendered["base"])["Deployment"][0])
    broken["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["grpcPort"] = 50051
    try:
        kv.validate(broken, KUBERNETES_VERSION, strict=True)
        check("a Deployment with an unknown field is refused (the validator is live)", False)
    except kv.ValidationError:
        check("a Deployment with an unknown field is refused (the validator is live)", True)
    failed = results.count(False)
    print(f"{results.count(True)} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
