// The page: keeps records of nodes, pods, budgets and timeline entries from
// the API's lists and watches, and re-renders what changed at most every
// 100 ms (a node box whose pods or status changed; everything when the
// grouping, the filter or the node set changes).

import { discover, getJSON, informer, mark, timings } from './k8s.js';
import { active, key, nodeRecord, podRecord, selects, spread, OWNER_KINDS } from './model.js';
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
  timelineFilter: { kind: '', text: '' },
  // What the next render must redo.
  dirty: { all: true, nodes: new Set(), side: true, keys: true },
  loaded: { nodes: false, pods: false },
  renders: 0,
  lastRender: 0,
  timings,
};
window.ksimUi = state; // for tests and benchmarks

let scheduled = false;
function schedule() {
  if (scheduled) return;
  scheduled = true;
  setTimeout(() => {
    scheduled = false;
    render();
  }, 100);
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
    schedule();
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
    state.dirty.side = true;
    schedule();
  },
  status: connection('nodes'),
});

// ---- pods ----
function placePod(record) {
  const old = state.pods.get(record.key);
  if (old && old.node) {
    state.podsByNode.get(old.node)?.delete(record.key);
    dirtyNode(old.node);
  }
  state.pods.set(record.key, record);
  if (record.node) {
    let set = state.podsByNode.get(record.node);
    if (!set) state.podsByNode.set(record.node, (set = new Set()));
    set.add(record.key);
    dirtyNode(record.node);
  }
}

function removePod(k) {
  const old = state.pods.get(k);
  if (!old) return;
  state.pods.delete(k);
  if (old.node) {
    state.podsByNode.get(old.node)?.delete(k);
    dirtyNode(old.node);
  }
}

informer('/api/v1/pods', {
  reset(items) {
    const started = performance.now();
    state.pods.clear();
    state.podsByNode.clear();
    for (const p of items) placePod(podRecord(p));
    mark('pods reset', started, { items: items.length });
    state.loaded.pods = true;
    state.dirty.all = state.dirty.side = true;
    schedule();
  },
  events(batch) {
    for (const { type, object } of batch) {
      if (type === 'DELETED') removePod(key(object.metadata));
      else placePod(podRecord(object));
    }
    state.dirty.side = true;
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
        state.dirty.side = true;
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
      state.dirty.side = true;
      schedule();
    },
    events(batch) {
      for (const { type, object } of batch) {
        if (type === 'DELETED') state.budgets.delete(`${kind}/${key(object.metadata)}`);
        else setBudget(object, kind);
      }
      state.dirty.side = true;
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
const WHO = [
  [/scheduler/, 'scheduler'],
  [/descheduler/, 'descheduler'],
  [/node|taint/, 'node lifecycle'],
  [/autoscaler/, 'autoscaler'],
];

function who(event) {
  const requested = event.metadata.annotations && event.metadata.annotations['ksim.io/requested-by'];
  const source = requested || event.reportingComponent || (event.source && event.source.component) || '';
  if (/^kubectl/.test(source)) return source;
  for (const [pattern, name] of WHO) if (pattern.test(source)) return name;
  return source || 'unknown';
}

const KINDS = {
  Scheduled: 'scheduled',
  FailedScheduling: 'unschedulable',
  Preempted: 'preempted',
  Evicted: 'evicted',
  EvictionRefused: 'refused',
  TaintManagerEviction: 'evicted',
};

informer('/api/v1/events', {
  reset() {},
  events(batch) {
    for (const { type, object } of batch) {
      if (type === 'DELETED') continue;
      const kind = KINDS[object.reason];
      if (!kind) continue;
      // The descheduler's own records repeat the API server's.
      if (object.reason === 'Evicted' && !object.metadata.annotations?.['ksim.io/requested-by']) continue;
      if (object.reason === 'TaintManagerEviction' && /^Cancelling/.test(object.message || '')) continue;
      const involved = object.involvedObject || {};
      const time = object.eventTime || object.lastTimestamp || object.firstTimestamp || object.metadata.creationTimestamp || '';
      state.timeline.push({
        kind,
        time: time.replace(/^.*T/, '').replace(/\..*Z$|Z$/, ''),
        object: `${involved.namespace ? involved.namespace + '/' : ''}${involved.name || ''}`,
        by: who(object),
        message: object.message || '',
      });
    }
    if (state.timeline.length > 5000) state.timeline.splice(0, state.timeline.length - 5000);
    state.dirty.side = true;
    schedule();
  },
  status: connection('events'),
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

const boxes = new Map(); // node name → element

function renderPlacement() {
  const groups = new Map();
  const k = state.topologyKey;
  for (const n of state.nodes.values()) {
    const domain = n.labels[k] ?? '';
    let g = groups.get(domain);
    if (!g) groups.set(domain, (g = []));
    g.push(n);
  }
  const domains = [...groups.keys()].sort((a, b) => (a === '') - (b === '') || a.localeCompare(b, undefined, { numeric: true }));
  const v = view();
  let html = '';
  for (const domain of domains) {
    const nodes = groups.get(domain).sort((a, b) => a.name.localeCompare(b.name));
    let podCount = 0;
    let body = '';
    for (const n of nodes) {
      const pods = podsOf(n.name);
      podCount += pods.filter(active).length;
      body += `<div class="${nodeClass(n)}" data-node="${esc(n.name)}">${nodeInner(n, pods, v)}</div>`;
    }
    const title = domain === '' ? `no ${k}` : `${k}=${domain}`;
    html += `<section class="domain" data-domain="${esc(domain)}"><h3>${esc(title)} <small>${nodes.length} node(s), ${podCount} pod(s)</small></h3><div class="nodes">${body}</div></section>`;
  }
  const placement = $('placement');
  placement.innerHTML = html || '<p class="none">No nodes.</p>';
  boxes.clear();
  for (const el of placement.querySelectorAll('.node')) boxes.set(el.dataset.node, el);
}

function renderNodes(names) {
  const v = view();
  for (const name of names) {
    const el = boxes.get(name);
    const n = state.nodes.get(name);
    if (!el || !n) continue;
    el.className = nodeClass(n);
    el.innerHTML = nodeInner(n, podsOf(name), v);
  }
}

function renderSide() {
  const selectedPods = [];
  for (const p of state.pods.values()) {
    if (p.node && active(p) && (!state.filtered || state.selected.has(p.key))) selectedPods.push(p);
  }
  const spreadByKey = new Map();
  for (const k of state.keys || []) spreadByKey.set(k, spread(state.nodes, selectedPods, k));
  $('spread').innerHTML = spreadTable(state.topologyKey, spreadByKey, selectedPods.length);

  const pending = [];
  for (const p of state.pods.values()) if (!p.node && p.phase === 'Pending' && !p.terminating) pending.push(p);
  pending.sort((a, b) => a.key.localeCompare(b.key));
  $('pending-count').textContent = pending.length;
  $('pending').innerHTML = pendingList(pending, state.openDecisions);

  const budgets = [...state.budgets.values()].sort((a, b) => a.id.localeCompare(b.id));
  $('budget-count').textContent = budgets.length;
  $('budgets').innerHTML = budgetRows(budgets, state.pinnedBudget);

  $('timeline').innerHTML = timelineRows(state.timeline, state.timelineFilter);
  $('summary').textContent = `${state.nodes.size} nodes, ${state.pods.size} pods`;
}

function render() {
  const started = performance.now();
  const what = state.dirty.all ? 'render all' : 'render';
  if (state.dirty.keys) renderKeys();
  if (state.dirty.all) renderPlacement();
  else if (state.dirty.nodes.size) renderNodes(state.dirty.nodes);
  if (state.dirty.side || state.dirty.all) renderSide();
  state.dirty = { all: false, nodes: new Set(), side: false, keys: false };
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
$('timeline-kind').innerHTML = ['', ...new Set(Object.values(KINDS))].map((k) => `<option value="${k}">${k || 'all'}</option>`).join('');
$('timeline-kind').addEventListener('change', (e) => {
  state.timelineFilter.kind = e.target.value;
  state.dirty.side = true;
  schedule();
});
$('timeline-text').addEventListener('input', (e) => {
  state.timelineFilter.text = e.target.value.toLowerCase();
  state.dirty.side = true;
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
  state.dirty.side = true;
  refreshHighlight();
});
$('pending').addEventListener('click', (e) => {
  const button = e.target.closest('[data-explain]');
  if (!button) return;
  state.openDecisions.add(button.dataset.explain);
  state.dirty.side = true;
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
