// The page: keeps records of nodes, pods, budgets and timeline entries from
// the API's lists and watches, and re-renders what changed at most every
// 100 ms: a node box only when what it shows changed (its pods' cells,
// use or status), a domain's counts and the spread from per-node counts
// kept up to date as boxes change, each side panel only when its records
// changed; everything when the grouping, the filter or the node set
// changes. No redraw scans every pod.

import { discover, getJSON, informer, mark, timings } from './k8s.js';
import {
  active, key, nodeRecord, numericOrder, podRecord, selects, OWNER_KINDS,
} from './model.js';
import {
  budgetRows, decisionsHtml, esc, nodeClass, nodeInner, pendingList, spreadTable, timelineRows,
} from './views.js';

const $ = (id) => document.getElementById(id);

const state = {
  nodes: new Map(), // name → node record
  pods: new Map(), // key → pod record
  podsByNode: new Map(), // node name → Set of pod keys
  budgets: new Map(), // id → {id, label, namespace, selector, status}
  timeline: [],
  topologyKey: '',
  filter: { namespace: '', selector: '' },
  selected: new Set(), // pod keys the filter selects (when filtered)
  filtered: false,
  highlight: new Set(),
  hoverBudget: '',
  pinnedBudget: '',
  openDecisions: new Set(),
  timelineFilter: { kind: '', by: '', text: '' },
  timelineWho: new Set(), // every `by` the timeline has shown
  pending: new Map(), // key → record of each pod waiting to be scheduled
  // Per node: what its box shows, summed over its active pods.
  use: new Map(), // node name → {cpu, memory, count, selected}
  // What the next render must redo (`side`: every side panel).
  dirty: {
    all: true, nodes: new Set(), side: true, keys: true, spread: false, pending: false, budgets: false, timeline: false,
  },
  loaded: { nodes: false, pods: false },
  renders: 0,
  lastRender: 0,
  timings,
};
window.ksimUi = state; // for tests and benchmarks

let timer = null;
let timerSoon = false;
/** Renders within 100 ms (`soon`: in the next task, for a (re)list). */
function schedule(soon) {
  if (timer !== null) {
    if (!soon || timerSoon) return;
    clearTimeout(timer);
  }
  timerSoon = !!soon;
  timer = setTimeout(() => {
    timer = null;
    render();
  }, soon ? 0 : 100);
}

function dirtyNode(name) {
  if (name) state.dirty.nodes.add(name);
}

// ---- nodes ----
function setNode(node) {
  const record = nodeRecord(node);
  const old = state.nodes.get(record.name);
  state.nodes.set(record.name, record);
  if (!old || JSON.stringify(old.labels) !== JSON.stringify(record.labels)) {
    state.dirty.all = true;
    state.dirty.keys = true;
  } else {
    dirtyNode(record.name);
  }
}

informer('/api/v1/nodes', {
  reset(items) {
    const started = performance.now();
    state.nodes.clear();
    for (const n of items) setNode(n);
    mark('nodes reset', started, { items: items.length });
    state.loaded.nodes = true;
    state.dirty.all = state.dirty.keys = state.dirty.side = true;
    schedule(true);
  },
  events(batch) {
    for (const { type, object } of batch) {
      if (type === 'DELETED') {
        state.nodes.delete(object.metadata.name);
        state.dirty.all = state.dirty.keys = true;
      } else {
        setNode(object);
      }
    }
    state.dirty.spread = true;
    schedule();
  },
  status: connection('nodes'),
});

// ---- pods ----
// What a node box shows of a pod; a change elsewhere (a label, say) redraws nothing.
const shown = (p) => `${p.node}|${p.kind}|${p.ready}|${p.phase}|${p.cpu}|${p.memory}`;
const isPending = (p) => !p.node && p.phase === 'Pending' && !p.terminating;

function placePod(record) {
  const old = state.pods.get(record.key);
  state.pods.set(record.key, record);
  if (old && old.node !== record.node && old.node) state.podsByNode.get(old.node)?.delete(record.key);
  if (record.node && (!old || old.node !== record.node)) {
    let set = state.podsByNode.get(record.node);
    if (!set) state.podsByNode.set(record.node, (set = new Set()));
    set.add(record.key);
  }
  if (!old || shown(old) !== shown(record)) {
    if (old) dirtyNode(old.node);
    dirtyNode(record.node);
  }
  if (isPending(record)) {
    state.pending.set(record.key, record);
    state.dirty.pending = true;
  } else if (old && state.pending.delete(record.key)) {
    state.dirty.pending = true;
  }
  // The highlighted budget's pods follow label changes.
  const budget = state.budgets.get(state.hoverBudget || state.pinnedBudget);
  if (budget && record.node) {
    const covered = budget.namespaces.has(record.namespace) && selects(budget.selector, record.labels);
    if (covered !== state.highlight.has(record.key)) {
      if (covered) state.highlight.add(record.key);
      else state.highlight.delete(record.key);
      dirtyNode(record.node);
    }
  }
}

function removePod(k) {
  const old = state.pods.get(k);
  if (!old) return;
  state.pods.delete(k);
  if (state.pending.delete(k)) state.dirty.pending = true;
  if (old.node) {
    state.podsByNode.get(old.node)?.delete(k);
    dirtyNode(old.node);
  }
}

informer('/api/v1/pods', {
  map: podRecord,
  reset(records) {
    const started = performance.now();
    state.pods.clear();
    state.podsByNode.clear();
    state.pending.clear();
    for (const p of records) placePod(p);
    mark('pods reset', started, { items: records.length });
    state.loaded.pods = true;
    state.dirty.all = state.dirty.side = true;
    schedule(true);
  },
  events(batch) {
    for (const { type, object } of batch) {
      if (type === 'DELETED') removePod(key(object.metadata));
      else placePod(podRecord(object));
    }
    schedule();
  },
  status: connection('pods'),
});

// ---- the filter: the API server evaluates the label selector ----
let stopSelection = null;
function applyFilter() {
  const namespace = $('namespace').value.trim();
  const selector = $('selector').value.trim();
  state.filter = { namespace, selector };
  if (stopSelection) stopSelection();
  stopSelection = null;
  $('filter-error').textContent = '';
  state.filtered = !!(namespace || selector);
  state.selected = new Set();
  state.dirty.all = state.dirty.side = true;
  if (state.filtered) {
    const path = namespace ? `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods` : '/api/v1/pods';
    stopSelection = informer(path, {
      reset(items) {
        state.selected = new Set(items.map((p) => key(p.metadata)));
        state.dirty.all = state.dirty.side = true;
        schedule();
      },
      events(batch) {
        for (const { type, object } of batch) {
          const k = key(object.metadata);
          if (type === 'DELETED') state.selected.delete(k);
          else state.selected.add(k);
          dirtyNode(state.pods.get(k)?.node);
        }
        schedule();
      },
      status(text) {
        $('filter-error').textContent = text ? text.replace(/^[^:]*: /, '') : '';
      },
    }, { labelSelector: selector, accept: 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json' });
  }
  schedule();
}

// ---- budgets ----
function budgetInformer(path, kind) {
  return informer(path, {
    reset(items) {
      for (const [id, b] of state.budgets) if (b.kind === kind) state.budgets.delete(id);
      for (const b of items) setBudget(b, kind);
      state.dirty.budgets = true;
      schedule();
    },
    events(batch) {
      for (const { type, object } of batch) {
        if (type === 'DELETED') state.budgets.delete(`${kind}/${key(object.metadata)}`);
        else setBudget(object, kind);
      }
      state.dirty.budgets = true;
      refreshHighlight();
      schedule();
    },
    status: connection(kind),
  });
}

function setBudget(object, kind) {
  const id = `${kind}/${key(object.metadata)}`;
  const spec = object.spec || {};
  const status = object.status || {};
  const distributed = kind !== 'PodDisruptionBudget';
  // A distributed budget covers the pods of its members' namespaces.
  const namespaces = distributed && (spec.federation || []).length
    ? new Set(spec.federation.map((m) => m.namespace))
    : new Set([object.metadata.namespace]);
  state.budgets.set(id, {
    id,
    kind,
    label: distributed
      ? `${key(object.metadata)} (distributed${status.membersObserved ? ', ' + status.membersObserved + ' members' : ''})`
      : key(object.metadata),
    namespaces,
    selector: spec.selector || null,
    status,
  });
}

budgetInformer('/apis/policy/v1/poddisruptionbudgets', 'PodDisruptionBudget');
// The DistributedPodDisruptionBudget is shown where it is served.
discover('policy.ksim.io/v1alpha1').then((list) => {
  if (list && (list.resources || []).some((r) => r.name === 'distributedpoddisruptionbudgets')) {
    budgetInformer('/apis/policy.ksim.io/v1alpha1/distributedpoddisruptionbudgets', 'DistributedPodDisruptionBudget');
  }
});

function budgetPods(id) {
  const b = state.budgets.get(id);
  const keys = new Set();
  if (!b) return keys;
  for (const p of state.pods.values()) {
    if (b.namespaces.has(p.namespace) && selects(b.selector, p.labels)) keys.add(p.key);
  }
  return keys;
}

function refreshHighlight() {
  const id = state.hoverBudget || state.pinnedBudget;
  const next = id ? budgetPods(id) : new Set();
  for (const k of state.highlight) if (!next.has(k)) dirtyNode(state.pods.get(k)?.node);
  for (const k of next) if (!state.highlight.has(k)) dirtyNode(state.pods.get(k)?.node);
  state.highlight = next;
  schedule();
}

// ---- timeline: events as they happen ----
// First match wins: `descheduler` before `scheduler`.
const WHO = [
  [/descheduler/, 'descheduler'],
  [/scheduler/, 'scheduler'],
  [/autoscaler/, 'autoscaler'],
  [/node|taint/, 'node lifecycle'],
];

/** Who caused an event or an eviction record, in the timeline's words. */
function whoIs(source) {
  if (/^kubectl/.test(source)) return source;
  for (const [pattern, name] of WHO) if (pattern.test(source)) return name;
  return source || 'unknown';
}

// Events the timeline shows (evictions and refusals through the eviction
// API come from the API server's records below, not from Events).
const KINDS = {
  Scheduled: 'scheduled',
  FailedScheduling: 'unschedulable',
  Preempted: 'preempted',
  TaintManagerEviction: 'evicted',
};
const OUTCOMES = { Evicted: 'evicted', Refused: 'refused' };

const clockTime = (time) => (time || '').replace(/^.*T/, '').replace(/\..*Z$|Z$/, '');

function addToTimeline(entry) {
  state.timeline.push(entry);
  if (!state.timelineWho.has(entry.by)) {
    state.timelineWho.add(entry.by);
    whoOptions();
  }
}

function timelineChanged() {
  if (state.timeline.length > 5000) state.timeline.splice(0, state.timeline.length - 5000);
  state.dirty.timeline = true;
  schedule();
}

/** The timeline's entry for an Event, or null when it does not show it. */
function fromEvent(object) {
  const kind = KINDS[object.reason];
  if (!kind) return null;
  if (object.reason === 'TaintManagerEviction' && /^Cancelling/.test(object.message || '')) return null;
  const involved = object.involvedObject || {};
  const time = object.eventTime || object.lastTimestamp || object.firstTimestamp || object.metadata.creationTimestamp || '';
  return {
    kind,
    time: clockTime(time),
    object: `${involved.namespace ? involved.namespace + '/' : ''}${involved.name || ''}`,
    by: whoIs(object.reportingComponent || (object.source && object.source.component) || ''),
    message: object.message || '',
  };
}

/** The timeline's entry for one of the API server's eviction records. */
function fromRecord(object) {
  const kind = OUTCOMES[object.outcome];
  if (!kind) return null;
  const pod = object.pod || {};
  return {
    kind,
    time: clockTime(object.time),
    object: `${pod.namespace ? pod.namespace + '/' : ''}${pod.name || ''}`,
    by: whoIs(object.requestedBy || ''),
    message: object.message || '',
  };
}

// One watch of the Events and of the API server's records of the eviction
// subresource (every eviction and refusal with who asked): ksim's
// /ksim/v1alpha1/timeline, one stream of the six a browser opens to an origin.
informer('/ksim/v1alpha1/timeline', {
  reset() {},
  events(batch) {
    for (const { type, object } of batch) {
      if (type === 'DELETED') continue;
      const entry = object.kind === 'EvictionRecord' ? fromRecord(object) : fromEvent(object);
      if (entry) addToTimeline(entry);
    }
    timelineChanged();
  },
  status: connection('timeline'),
}, { skipList: true });

// ---- connection status ----
const problems = new Map();
function connection(what) {
  return (text) => {
    if (text) problems.set(what, text);
    else problems.delete(what);
    $('status').textContent = [...problems.values()].join('; ');
  };
}

// ---- rendering ----
function topologyKeys() {
  const keys = new Set();
  for (const n of state.nodes.values()) for (const k of Object.keys(n.labels)) keys.add(k);
  return [...keys].sort();
}

function renderKeys() {
  const select = $('topology-key');
  const keys = topologyKeys();
  if (!state.topologyKey || !keys.includes(state.topologyKey)) {
    const preferred = ['topology.kubernetes.io/zone', 'kubernetes.io/hostname'];
    state.topologyKey = preferred.find((k) => keys.includes(k)) || keys[0] || '';
  }
  select.innerHTML = keys.map((k) => `<option${k === state.topologyKey ? ' selected' : ''}>${esc(k)}</option>`).join('');
  state.keys = keys;
}

function view() {
  return { filtered: state.filtered, selected: state.selected, highlight: state.highlight };
}

function podsOf(name) {
  const keys = state.podsByNode.get(name);
  const list = [];
  if (keys) for (const k of keys) list.push(state.pods.get(k));
  return list;
}

/** What a node box sums over its active pods; `selected` counts those the filter selects. */
function useOf(name) {
  const u = { cpu: 0, memory: 0, count: 0, selected: 0 };
  const keys = state.podsByNode.get(name);
  if (keys) {
    for (const k of keys) {
      const p = state.pods.get(k);
      if (!p || !active(p)) continue;
      u.cpu += p.cpu;
      u.memory += p.memory;
      u.count += 1;
      if (!state.filtered || state.selected.has(k)) u.selected += 1;
    }
  }
  return u;
}

const order = new Intl.Collator().compare; // localeCompare's order, faster
const boxes = new Map(); // node name → element
const boxHtml = new Map(); // node name → the markup it holds
const domains = new Map(); // domain → {count, pods (active), head (element)}

function domainTitle(domain, d) {
  const k = state.topologyKey;
  const title = domain === '' ? `no ${k}` : `${k}=${domain}`;
  return `${esc(title)} <small>${d.nodes} node(s), ${d.pods} pod(s)</small>`;
}

function renderPlacement() {
  const groups = new Map();
  const k = state.topologyKey;
  for (const n of state.nodes.values()) {
    const domain = n.labels[k] ?? '';
    let g = groups.get(domain);
    if (!g) groups.set(domain, (g = []));
    g.push(n);
  }
  const sorted = [...groups.keys()].sort((a, b) => (a === '') - (b === '') || numericOrder(a, b));
  const v = view();
  const parts = [];
  boxHtml.clear();
  domains.clear();
  state.use.clear();
  for (const domain of sorted) {
    const nodes = groups.get(domain).sort((a, b) => order(a.name, b.name));
    const d = { nodes: nodes.length, pods: 0, head: null };
    domains.set(domain, d);
    const body = [];
    for (const n of nodes) {
      const u = useOf(n.name);
      state.use.set(n.name, u);
      d.pods += u.count;
      const inner = nodeInner(n, podsOf(n.name), v);
      boxHtml.set(n.name, inner);
      body.push(`<div class="${nodeClass(n)}" data-node="${esc(n.name)}">${inner}</div>`);
    }
    parts.push(`<section class="domain" data-domain="${esc(domain)}"><h3>${domainTitle(domain, d)}</h3><div class="nodes">${body.join('')}</div></section>`);
  }
  const placement = $('placement');
  placement.innerHTML = parts.join('') || '<p class="none">No nodes.</p>';
  boxes.clear();
  for (const el of placement.getElementsByClassName('node')) boxes.set(el.dataset.node, el);
  for (const el of placement.children) {
    const d = domains.get(el.dataset.domain);
    if (d) d.head = el.firstElementChild;
  }
  state.dirty.spread = true;
}

/** Redraws the boxes of `names` whose markup changed; keeps the domain counts and the spread in step. */
function renderNodes(names) {
  const v = view();
  const k = state.topologyKey;
  const heads = new Set();
  for (const name of names) {
    const el = boxes.get(name);
    const n = state.nodes.get(name);
    if (!el || !n) continue;
    const u = useOf(name);
    const before = state.use.get(name);
    state.use.set(name, u);
    if (before && (before.count !== u.count || before.selected !== u.selected)) {
      state.dirty.spread = true;
      const domain = n.labels[k] ?? '';
      const d = domains.get(domain);
      if (d && before.count !== u.count) {
        d.pods += u.count - before.count;
        heads.add(domain);
      }
    }
    const cls = nodeClass(n);
    if (el.className !== cls) el.className = cls;
    const inner = nodeInner(n, podsOf(name), v);
    if (boxHtml.get(name) !== inner) {
      boxHtml.set(name, inner);
      el.innerHTML = inner;
    }
  }
  for (const domain of heads) {
    const d = domains.get(domain);
    if (d.head) d.head.innerHTML = domainTitle(domain, d);
  }
}

/** The selected pods' count per domain of every key, from the per-node counts. */
function renderSpread() {
  const spreadByKey = new Map();
  let total = 0;
  for (const u of state.use.values()) total += u.selected;
  for (const k of state.keys || []) {
    const counts = new Map();
    for (const n of state.nodes.values()) {
      const d = n.labels[k];
      if (d === undefined) continue;
      counts.set(d, (counts.get(d) || 0) + (state.use.get(n.name)?.selected || 0));
    }
    let max = 0;
    let min = Infinity;
    for (const c of counts.values()) {
      if (c > max) max = c;
      if (c < min) min = c;
    }
    spreadByKey.set(k, { counts, skew: counts.size ? max - min : 0 });
  }
  $('spread').innerHTML = spreadTable(state.topologyKey, spreadByKey, total);
}

function renderSide() {
  const d = state.dirty;
  if (d.side || d.spread) renderSpread();
  if (d.side || d.pending) {
    const pending = [...state.pending.values()].sort((a, b) => order(a.key, b.key));
    $('pending-count').textContent = pending.length;
    $('pending').innerHTML = pendingList(pending, state.openDecisions);
  }
  if (d.side || d.budgets) {
    const budgets = [...state.budgets.values()].sort((a, b) => a.id.localeCompare(b.id));
    $('budget-count').textContent = budgets.length;
    $('budgets').innerHTML = budgetRows(budgets, state.pinnedBudget);
  }
  if (d.side || d.timeline) $('timeline').innerHTML = timelineRows(state.timeline, state.timelineFilter);
  $('summary').textContent = `${state.nodes.size} nodes, ${state.pods.size} pods`;
}

function render() {
  const started = performance.now();
  const what = state.dirty.all ? 'render all' : 'render';
  if (state.dirty.keys) renderKeys();
  if (state.dirty.all) renderPlacement();
  else if (state.dirty.nodes.size) renderNodes(state.dirty.nodes);
  if (state.dirty.all) state.dirty.side = true;
  renderSide();
  state.dirty = {
    all: false, nodes: new Set(), side: false, keys: false, spread: false, pending: false, budgets: false, timeline: false,
  };
  state.renders += 1;
  state.lastRender = performance.now() - started;
  mark(what, started);
  const ready = state.loaded.nodes && state.loaded.pods;
  // Milliseconds from navigation to the first render holding every node and
  // pod: when its script ended, and when the browser had laid it out and
  // painted it (the next frame's task).
  if (ready && !state.firstCompleteRenderJs) {
    state.firstCompleteRenderJs = performance.now();
    requestAnimationFrame(() => setTimeout(() => {
      state.firstCompleteRender = performance.now();
    }, 0));
  }
  document.body.dataset.ready = ready ? 'true' : 'false';
}

// ---- controls ----
$('topology-key').addEventListener('change', (e) => {
  state.topologyKey = e.target.value;
  state.dirty.all = true;
  schedule();
});
$('filter').addEventListener('submit', (e) => {
  e.preventDefault();
  applyFilter();
});
$('timeline-kind').innerHTML = ['', ...new Set([...Object.values(KINDS), ...Object.values(OUTCOMES)])].map((k) => `<option value="${k}">${k || 'all'}</option>`).join('');
$('timeline-kind').addEventListener('change', (e) => {
  state.timelineFilter.kind = e.target.value;
  state.dirty.timeline = true;
  schedule();
});
/** The who filter offers everyone the timeline has named so far. */
function whoOptions() {
  const select = $('timeline-by');
  const names = [...state.timelineWho].sort();
  select.innerHTML = ['', ...names].map((b) => `<option value="${esc(b)}">${b ? esc(b) : 'anyone'}</option>`).join('');
  select.value = state.timelineFilter.by;
}
$('timeline-by').addEventListener('change', (e) => {
  state.timelineFilter.by = e.target.value;
  state.dirty.timeline = true;
  schedule();
});
whoOptions();
$('timeline-text').addEventListener('input', (e) => {
  state.timelineFilter.text = e.target.value.toLowerCase();
  state.dirty.timeline = true;
  schedule();
});
$('budgets').addEventListener('mouseover', (e) => {
  const row = e.target.closest('[data-budget]');
  const id = row ? row.dataset.budget : '';
  if (id !== state.hoverBudget) {
    state.hoverBudget = id;
    refreshHighlight();
  }
});
$('budgets').addEventListener('mouseleave', () => {
  state.hoverBudget = '';
  refreshHighlight();
});
$('budgets').addEventListener('click', (e) => {
  const row = e.target.closest('[data-budget]');
  if (!row) return;
  state.pinnedBudget = state.pinnedBudget === row.dataset.budget ? '' : row.dataset.budget;
  state.dirty.budgets = true;
  refreshHighlight();
});
$('pending').addEventListener('click', (e) => {
  const button = e.target.closest('[data-explain]');
  if (!button) return;
  state.openDecisions.add(button.dataset.explain);
  state.dirty.pending = true;
  schedule();
});
$('placement').addEventListener('click', (e) => {
  const cell = e.target.closest('[data-pod]');
  if (!cell) return;
  const p = state.pods.get(cell.dataset.pod);
  if (!p) return;
  $('pod-detail').innerHTML = `<h3>${esc(p.key)}</h3><p>${esc(p.kind)} on ${esc(p.node)}, ${esc(p.phase)}${p.ready ? ', Ready' : ''}; `
    + `requests cpu ${p.cpu}, memory ${p.memory}</p>${p.decisions ? decisionsHtml(p) : '<p class="none">No decisions recorded.</p>'}`;
  $('pod-detail').hidden = false;
});
$('legend').innerHTML = OWNER_KINDS.map((k) => `<span><i class="p k-${k}"></i>${k}</span>`).join('');

getJSON('/version').then((v) => {
  $('version').textContent = v.gitVersion;
}).catch(() => {});
