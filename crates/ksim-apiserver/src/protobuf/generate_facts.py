#!/usr/bin/env python3
"""Generates facts.rs: the wire facts (field number, JSON name, kind, omitempty, inline) of
every protobuf message reachable from the kinds ksim decodes.

The facts are read from the Go struct tags of the Kubernetes API types (`types.go` files of
the k8s.io/api and k8s.io/apimachinery modules, v0.33.x), which carry both the JSON tag and
the protobuf tag of every field. Usage:

    generate_facts.py <k8s.io/api checkout> <k8s.io/apimachinery checkout> > facts.rs && cargo fmt --all
"""

import re
import sys

API, APIMACHINERY = sys.argv[1], sys.argv[2]

# Go package import path -> (directory holding types.go files, protobuf package)
PACKAGES = {}
for gv in [
    "core/v1", "apps/v1", "batch/v1", "policy/v1", "scheduling/v1", "networking/v1",
    "rbac/v1", "coordination/v1", "events/v1", "authentication/v1", "authorization/v1",
    "autoscaling/v1", "autoscaling/v2", "storage/v1",
]:
    PACKAGES["k8s.io/api/" + gv] = (f"{API}/{gv}", "k8s.io.api." + gv.replace("/", "."))
PACKAGES["k8s.io/apimachinery/pkg/apis/meta/v1"] = (
    f"{APIMACHINERY}/pkg/apis/meta/v1", "k8s.io.apimachinery.pkg.apis.meta.v1")

# (apiVersion, kind, package) of the objects a client may send.
ROOTS = [
    ("v1", k, "k8s.io/api/core/v1") for k in [
        "Namespace", "ConfigMap", "Secret", "Service", "ResourceQuota", "ServiceAccount", "Pod",
        "Node", "Event", "Binding", "PersistentVolumeClaim", "PersistentVolume", "Endpoints",
        "LimitRange", "ReplicationController", "PodTemplate"]
] + [
    ("apps/v1", k, "k8s.io/api/apps/v1") for k in [
        "Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "ControllerRevision"]
] + [
    ("batch/v1", "Job", "k8s.io/api/batch/v1"),
    ("batch/v1", "CronJob", "k8s.io/api/batch/v1"),
    ("policy/v1", "PodDisruptionBudget", "k8s.io/api/policy/v1"),
    ("policy/v1", "Eviction", "k8s.io/api/policy/v1"),
    ("scheduling.k8s.io/v1", "PriorityClass", "k8s.io/api/scheduling/v1"),
    ("networking.k8s.io/v1", "Ingress", "k8s.io/api/networking/v1"),
    ("networking.k8s.io/v1", "IngressClass", "k8s.io/api/networking/v1"),
    ("networking.k8s.io/v1", "NetworkPolicy", "k8s.io/api/networking/v1"),
    ("coordination.k8s.io/v1", "Lease", "k8s.io/api/coordination/v1"),
    ("events.k8s.io/v1", "Event", "k8s.io/api/events/v1"),
    ("authentication.k8s.io/v1", "SelfSubjectReview", "k8s.io/api/authentication/v1"),
    ("authentication.k8s.io/v1", "TokenRequest", "k8s.io/api/authentication/v1"),
    ("autoscaling/v1", "Scale", "k8s.io/api/autoscaling/v1"),
    ("autoscaling/v1", "HorizontalPodAutoscaler", "k8s.io/api/autoscaling/v1"),
    ("autoscaling/v2", "HorizontalPodAutoscaler", "k8s.io/api/autoscaling/v2"),
    ("storage.k8s.io/v1", "StorageClass", "k8s.io/api/storage/v1"),
    ("meta.k8s.io/v1", "DeleteOptions", "k8s.io/apimachinery/pkg/apis/meta/v1"),
] + [
    ("rbac.authorization.k8s.io/v1", k, "k8s.io/api/rbac/v1")
    for k in ["Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"]
] + [
    ("authorization.k8s.io/v1", k, "k8s.io/api/authorization/v1")
    for k in ["SelfSubjectAccessReview", "SubjectAccessReview", "LocalSubjectAccessReview",
              "SelfSubjectRulesReview"]
]

# Go types with a JSON form of their own (not a plain message).
SPECIAL = {
    ("k8s.io/apimachinery/pkg/apis/meta/v1", "Time"): "Kind::Time",
    ("k8s.io/apimachinery/pkg/apis/meta/v1", "MicroTime"): "Kind::MicroTime",
    ("k8s.io/apimachinery/pkg/apis/meta/v1", "Duration"): "Kind::Duration",
    ("k8s.io/apimachinery/pkg/apis/meta/v1", "FieldsV1"): "Kind::FieldsV1",
    ("k8s.io/apimachinery/pkg/api/resource", "Quantity"): "Kind::Quantity",
    ("k8s.io/apimachinery/pkg/util/intstr", "IntOrString"): "Kind::IntOrString",
    ("k8s.io/apimachinery/pkg/runtime", "RawExtension"): "Kind::RawExtension",
    ("k8s.io/apimachinery/pkg/types", "UID"): "Kind::String",
    ("k8s.io/apimachinery/pkg/types", "NodeName"): "Kind::String",
    ("k8s.io/apimachinery/pkg/apis/meta/v1", "Verbs"): "Kind::StringList",
    ("k8s.io/api/authentication/v1", "ExtraValue"): "Kind::StringList",
    ("k8s.io/api/authorization/v1", "ExtraValue"): "Kind::StringList",
}
SCALARS = {"string": "Kind::String", "bool": "Kind::Bool", "int32": "Kind::Int32",
           "int64": "Kind::Int64", "float64": "Kind::Double", "[]byte": "Kind::Bytes"}

structs = {}   # (pkg, name) -> [(go_name, go_type, tag)]
named = {}     # (pkg, name) -> underlying go type
imports = {}   # (pkg, name) -> {alias: import path}

import glob
for pkg, (d, _) in PACKAGES.items():
    for path in sorted(glob.glob(d + "/types.go") + glob.glob(d + "/micro_time.go")):
        src = open(path).read()
        alias = {}
        m = re.search(r"^import \((.*?)^\)", src, re.S | re.M)
        for line in (m.group(1).splitlines() if m else []):
            im = re.match(r'\s*(\w+)?\s*"([^"]+)"', line)
            if im:
                alias[im.group(1) or im.group(2).rsplit("/", 1)[-1]] = im.group(2)
        for sm in re.finditer(r"^type (\w+) struct \{\n(.*?)^\}", src, re.S | re.M):
            fields = []
            for line in sm.group(2).splitlines():
                line = line.strip()
                if not line or line.startswith("//"):
                    continue
                fm = re.match(r"(\w+)\s+([^\s`]+)\s+`(.*)`", line) or re.match(
                    r"()([^\s`]+)\s+`(.*)`", line)
                if not fm:
                    continue
                name, typ, tag = fm.groups()
                if not name:
                    name = typ.rsplit(".", 1)[-1]
                fields.append((name, typ, tag))
            structs[(pkg, sm.group(1))] = fields
            imports[(pkg, sm.group(1))] = alias
        for nm in re.finditer(r"^type (\w+) ([^\s{]+)\s*$", src, re.M):
            named[(pkg, nm.group(1))] = (nm.group(2), alias)


def proto_name(pkg, name):
    return PACKAGES[pkg][1] + "." + name


def resolve(pkg, typ, alias):
    """Returns (kind expression, message key or None) for a Go type without pointer/slice."""
    if typ in SCALARS:
        return SCALARS[typ], None
    if "." in typ:
        a, n = typ.split(".")
        key = (alias[a], n)
    else:
        key = (pkg, typ)
    if key in SPECIAL:
        return SPECIAL[key], None
    if key in structs:
        return f'Kind::Message("{proto_name(*key)}")', key
    if key in named:
        under, nalias = named[key]
        return resolve(key[0], under, nalias)
    raise SystemExit(f"unknown type {typ} in {pkg}")


def field_row(pkg, sname, name, typ, tag, alias):
    pm = re.search(r'protobuf:"([^"]+)"', tag)
    if not pm:
        return None, []
    parts = pm.group(1).split(",")
    number = int(parts[1])
    jm = re.search(r'json:"([^"]*)"', tag)
    jparts = (jm.group(1) if jm else "").split(",")
    json_name = jparts[0]
    flags = []
    pointer = typ.startswith("*")
    t = typ.lstrip("*")
    if "omitempty" in jparts[1:] and not pointer:
        flags.append("OMIT")
    if "inline" in jparts[1:]:
        flags.append("INLINE")
        json_name = ""
    refs = []
    if t.startswith("map["):
        mm = re.match(r"map\[([^\]]+)\](.+)", t)
        kind, ref = resolve(pkg, mm.group(2), alias)
        kind = f"Kind::Map(&{kind})"
        refs.append(ref)
    elif t.startswith("[]") and t != "[]byte":
        kind, ref = resolve(pkg, t[2:].lstrip("*"), alias)
        flags.append("REP")
        refs.append(ref)
    else:
        key = (alias[t.split(".")[0]], t.split(".")[1]) if "." in t else (pkg, t)
        if key in named and named[key][0].startswith("map["):
            under, nalias = named[key]
            return field_row(key[0], sname, name, under, tag, nalias)
        kind, ref = resolve(pkg, t, alias)
        refs.append(ref)
    if json_name == "-" or (not json_name and "INLINE" not in flags):
        return None, []
    flag_expr = " | ".join(flags) if flags else "0"
    return f'f({number}, "{json_name}", {kind}, {flag_expr})', [r for r in refs if r]


seen = set()
queue = [(pkg, kind) for (_, kind, pkg) in ROOTS]
messages = {}
while queue:
    key = queue.pop()
    if key in seen:
        continue
    seen.add(key)
    rows = []
    for name, typ, tag in structs[key]:
        row, refs = field_row(key[0], key[1], name, typ, tag, imports[key])
        if row:
            rows.append((int(re.match(r"f\((\d+)", row).group(1)), row))
            queue.extend(refs)
    messages[proto_name(*key)] = sorted(rows)

out = []
out.append("//! Wire facts of the Kubernetes protobuf messages ksim decodes: per message, each field's")
out.append("//! number, JSON name, kind and whether Go's JSON drops its zero value (`omitempty` on a")
out.append("//! non-pointer field) or flattens it into its parent (`inline`). Generated by")
out.append("//! `generate_facts.py` from the Go struct tags of k8s.io/api and k8s.io/apimachinery")
out.append("//! v0.33; edit the generator, not this file.")
out.append("")
out.append("use super::schema::{INLINE, Kind, MessageFacts, OMIT, REP, RootKind, f};")
out.append("")
out.append("/// The objects a client may send, by apiVersion and kind.")
out.append("pub(super) static ROOT_KINDS: &[RootKind] = &[")
for api_version, kind, pkg in sorted(ROOTS):
    out.append(f'    RootKind {{ api_version: "{api_version}", kind: "{kind}", message: "{proto_name(pkg, kind)}" }},')
out.append("];")
out.append("")
out.append("/// Every message reachable from [`ROOT_KINDS`], sorted by name; fields sorted by number.")
out.append("pub(super) static MESSAGES: &[MessageFacts] = &[")
for name in sorted(messages):
    out.append(f'    MessageFacts {{ name: "{name}", fields: &[')
    for _, row in messages[name]:
        out.append(f"        {row},")
    out.append("    ] },")
out.append("];")
out.append("")
print("\n".join(out))
