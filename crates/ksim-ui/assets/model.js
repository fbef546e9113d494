// What the page keeps of each object (compact records, not the objects),
// and the little Kubernetes arithmetic it needs: quantities, pod requests,
// owner kinds, label selectors, skew and the decision table.

const SUFFIX = {
  n: 1e-9, u: 1e-6, m: 1e-3, '': 1, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18,
  Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3, Ti: 1024 ** 4, Pi: 1024 ** 5, Ei: 1024 ** 6,
};

/** A resource quantity ("100m", "1.5Gi", "2e3") as a number; 0 if unreadable. */
export function quantity(text) {
  if (text === undefined || text === null) return 0;
  const m = /^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$/.exec(String(text).trim());
  if (!m || !(m[2] in SUFFIX)) return 0;
  return parseFloat(m[1]) * SUFFIX[m[2]];
}

function requests(containers) {
  const total = { cpu: 0, memory: 0 };
  for (const c of containers || []) {
    const r = (c.resources && c.resources.requests) || {};
    total.cpu += quantity(r.cpu);
    total.memory += quantity(r.memory);
  }
  return total;
}

/** The pod's effective requests: max(sum of containers, each init container) plus overhead. */
export function podRequests(spec) {
  const sum = requests(spec.containers);
  for (const c of spec.initContainers || []) {
    const one = requests([c]);
    sum.cpu = Math.max(sum.cpu, one.cpu);
    sum.memory = Math.max(sum.memory, one.memory);
  }
  const overhead = spec.overhead || {};
  sum.cpu += quantity(overhead.cpu);
  sum.memory += quantity(overhead.memory);
  return sum;
}

/** The workload kind owning a pod: ReplicaSets of Deployments count as Deployment. */
export function ownerKind(metadata) {
  const owner = (metadata.ownerReferences || []).find((o) => o.controller) || (metadata.ownerReferences || [])[0];
  if (!owner) return 'bare';
  if (owner.kind === 'ReplicaSet') {
    return metadata.labels && metadata.labels['pod-template-hash'] ? 'Deployment' : 'ReplicaSet';
  }
  if (['StatefulSet', 'DaemonSet', 'Job'].includes(owner.kind)) return owner.kind;
  return 'other';
}

export const OWNER_KINDS = ['Deployment', 'StatefulSet', 'DaemonSet', 'Job', 'ReplicaSet', 'bare', 'other'];

function condition(status, type) {
  return ((status && status.conditions) || []).find((c) => c.type === type);
}

export const key = (metadata) => (metadata.namespace ? `${metadata.namespace}/${metadata.name}` : metadata.name);

const DECISIONS = 'kube-scheduler-simulator.sigs.k8s.io/filter-result';
const SCORES = 'kube-scheduler-simulator.sigs.k8s.io/finalscore-result';
const SELECTED = 'kube-scheduler-simulator.sigs.k8s.io/selected-node';

/** The record of a pod. */
export function podRecord(pod) {
  const md = pod.metadata;
  const status = pod.status || {};
  const scheduled = condition(status, 'PodScheduled');
  const annotations = md.annotations || {};
  const spec = pod.spec || {};
  return {
    key: key(md),
    namespace: md.namespace,
    name: md.name,
    labels: md.labels || {},
    node: spec.nodeName || '',
    phase: status.phase || 'Pending',
    terminating: !!md.deletionTimestamp,
    ready: (condition(status, 'Ready') || {}).status === 'True',
    kind: ownerKind(md),
    ...podRequests(spec),
    unschedulable: scheduled && scheduled.status === 'False' ? scheduled.message || scheduled.reason || '' : '',
    decisions: annotations[DECISIONS]
      ? { filter: annotations[DECISIONS], scores: annotations[SCORES] || '{}', selected: annotations[SELECTED] || '' }
      : null,
  };
}

/** The order of domain values: numbers by value ("2" before "10"), then text as localeCompare orders it. */
export const numericOrder = new Intl.Collator(undefined, { numeric: true }).compare;

/** Whether a pod counts against its node (not finished). */
export const active = (p) => p.phase !== 'Succeeded' && p.phase !== 'Failed';

/** The record of a node. */
export function nodeRecord(node) {
  const status = node.status || {};
  const allocatable = status.allocatable || {};
  const ready = condition(status, 'Ready');
  const spec = node.spec || {};
  const taints = (spec.taints || []).filter((t) => t.key !== 'node.kubernetes.io/unschedulable');
  return {
    name: node.metadata.name,
    labels: node.metadata.labels || {},
    cpu: quantity(allocatable.cpu),
    memory: quantity(allocatable.memory),
    pods: quantity(allocatable.pods),
    cordoned: !!spec.unschedulable,
    notReady: !ready || ready.status !== 'True',
    taints: taints.map((t) => `${t.key}${t.value ? '=' + t.value : ''}:${t.effect}`),
  };
}

/** metav1.LabelSelector against labels (nil selects nothing, {} everything). */
export function selects(selector, labels) {
  if (!selector) return false;
  for (const [k, v] of Object.entries(selector.matchLabels || {})) {
    if (labels[k] !== v) return false;
  }
  for (const r of selector.matchExpressions || []) {
    const has = Object.prototype.hasOwnProperty.call(labels, r.key);
    const values = r.values || [];
    switch (r.operator) {
      case 'In': if (!has || !values.includes(labels[r.key])) return false; break;
      case 'NotIn': if (has && values.includes(labels[r.key])) return false; break;
      case 'Exists': if (!has) return false; break;
      case 'DoesNotExist': if (has) return false; break;
      default: return false;
    }
  }
  return true;
}

/**
 * Count of `pods` per domain of `topologyKey` over `nodes` (a Map of
 * records); domains are the values the nodes carry, zero counts included.
 * Returns { counts: Map domain → count, skew } (skew: max - min, as
 * PodTopologySpread computes it over the eligible domains).
 */
export function spread(nodes, pods, topologyKey) {
  const counts = new Map();
  for (const n of nodes.values()) {
    const d = n.labels[topologyKey];
    if (d !== undefined && !counts.has(d)) counts.set(d, 0);
  }
  for (const p of pods) {
    const n = nodes.get(p.node);
    const d = n && n.labels[topologyKey];
    if (d !== undefined) counts.set(d, counts.get(d) + 1);
  }
  let max = 0;
  let min = Infinity;
  for (const c of counts.values()) {
    max = Math.max(max, c);
    min = Math.min(min, c);
  }
  return { counts, skew: counts.size ? max - min : 0 };
}

/**
 * The rows `ksim explain pod` prints: the chosen node first, then feasible
 * nodes by total score, then filtered-out nodes by name.
 */
export function decisionTable(decisions) {
  const filter = JSON.parse(decisions.filter);
  const scores = JSON.parse(decisions.scores);
  const plugins = [];
  for (const row of Object.values(scores)) {
    for (const p of Object.keys(row)) if (!plugins.includes(p)) plugins.push(p);
  }
  const rows = Object.entries(filter).map(([node, verdicts]) => {
    const rejection = Object.entries(verdicts).find(([, v]) => v !== 'passed');
    const s = scores[node] || {};
    const total = Object.values(s).reduce((a, v) => a + (parseInt(v, 10) || 0), 0);
    return {
      node,
      selected: node === decisions.selected,
      verdict: rejection ? `${rejection[0]}: ${rejection[1]}` : 'passed',
      scores: plugins.map((p) => (p in s ? s[p] : '-')),
      total: rejection ? null : total,
    };
  });
  rows.sort((a, b) =>
    (b.selected - a.selected)
    || ((b.total !== null) - (a.total !== null))
    || ((b.total ?? 0) - (a.total ?? 0))
    || a.node.localeCompare(b.node));
  return { plugins, rows };
}

/** Human figures: cores with up to two decimals, bytes in Gi/Mi. */
export function cores(n) {
  return n >= 10 ? n.toFixed(0) : String(Math.round(n * 100) / 100);
}
export function bytes(n) {
  if (n >= 1024 ** 3) return `${Math.round((n / 1024 ** 3) * 10) / 10}Gi`;
  return `${Math.round(n / 1024 ** 2)}Mi`;
}
