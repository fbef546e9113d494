// HTML for each part of the page, built as strings from the records.

import {
  active, bytes, cores, decisionTable, numericOrder,
} from './model.js';

const ESCAPES = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
export const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ESCAPES[c]);

function bar(label, used, total, show) {
  const ratio = total > 0 ? Math.min(used / total, 1) : used > 0 ? 1 : 0;
  const level = ratio >= 0.9 ? ' full' : ratio >= 0.7 ? ' high' : '';
  // One element per bar (its fill a gradient): thousands of boxes parse and lay out faster.
  return `<div class="use${level}" style="--w:${(ratio * 100).toFixed(1)}%" title="${label} ${show(used)} of ${show(total)}">`
    + `${label} ${show(used)}/${show(total)}</div>`;
}

/** The inside of one node box. */
export function nodeInner(node, pods, view) {
  let cpu = 0;
  let memory = 0;
  let count = 0;
  let cells = '';
  for (const p of pods) {
    if (!active(p)) continue;
    cpu += p.cpu;
    memory += p.memory;
    count += 1;
    let cls = `p k-${p.kind}`;
    if (view.filtered && !view.selected.has(p.key)) cls += ' dim';
    if (view.highlight.has(p.key)) cls += ' hl';
    if (!p.ready) cls += ' nr';
    cells += `<i class="${cls}" data-pod="${esc(p.key)}" title="${esc(p.key)} (${p.kind})"></i>`;
  }
  const marks = [];
  if (node.cordoned) marks.push('<b class="mark cordoned">cordoned</b>');
  if (node.notReady) marks.push('<b class="mark notready">NotReady</b>');
  if (node.taints.length) marks.push(`<b class="mark tainted" title="${esc(node.taints.join('\n'))}">tainted</b>`);
  return `<div class="nh"><span class="nn">${esc(node.name)}</span>${marks.join('')}</div>`
    + bar('cpu', cpu, node.cpu, cores)
    + bar('mem', memory, node.memory, bytes)
    + bar('pods', count, node.pods, String)
    + `<div class="cells">${cells}</div>`;
}

export function nodeClass(node) {
  return `node${node.cordoned ? ' cordoned' : ''}${node.notReady ? ' notready' : ''}${node.taints.length ? ' tainted' : ''}`;
}

/** The per-domain counts and the skew of every key, for the selected pods. */
export function spreadTable(topologyKey, spreadByKey, selectedCount) {
  const current = spreadByKey.get(topologyKey);
  let html = `<p>${selectedCount} selected pod(s) scheduled.</p>`;
  if (current) {
    html += `<table class="counts"><thead><tr><th>${esc(topologyKey)}</th><th>pods</th></tr></thead><tbody>`;
    const entries = [...current.counts.entries()].sort((a, b) => numericOrder(a[0], b[0]));
    for (const [domain, count] of entries.slice(0, 200)) {
      html += `<tr data-domain-count="${esc(domain)}"><td>${esc(domain)}</td><td>${count}</td></tr>`;
    }
    if (entries.length > 200) html += `<tr><td colspan="2">… ${entries.length - 200} more domains</td></tr>`;
    html += '</tbody></table>';
  }
  html += '<table class="skew"><thead><tr><th>topology key</th><th>domains</th><th>skew</th></tr></thead><tbody>';
  for (const [k, s] of spreadByKey) {
    html += `<tr data-skew-key="${esc(k)}"${k === topologyKey ? ' class="cur"' : ''}><td>${esc(k)}</td><td>${s.counts.size}</td><td class="skewv">${s.skew}</td></tr>`;
  }
  return `${html}</tbody></table>`;
}

export function pendingList(pending, open) {
  if (!pending.length) return '<p class="none">No pending pods.</p>';
  let html = '';
  for (const p of pending.slice(0, 300)) {
    html += `<div class="pending" data-pending="${esc(p.key)}"><div class="pn">${esc(p.key)} <span class="kind k-${p.kind}">${p.kind}</span></div>`
      + `<div class="msg">${esc(p.unschedulable || 'waiting to be scheduled')}</div>`;
    if (p.decisions) {
      html += open.has(p.key) ? decisionsHtml(p) : `<button class="explain" data-explain="${esc(p.key)}">per-node decisions</button>`;
    }
    html += '</div>';
  }
  if (pending.length > 300) html += `<p>… ${pending.length - 300} more</p>`;
  return html;
}

/** The table `ksim explain pod` prints, from the pod's decision records. */
export function decisionsHtml(pod) {
  let table;
  try {
    table = decisionTable(pod.decisions);
  } catch (error) {
    return `<p class="error">decision records unreadable: ${esc(error.message)}</p>`;
  }
  let html = `<table class="decisions" data-decisions="${esc(pod.key)}"><thead><tr><th>NODE</th><th>FILTER</th>`;
  for (const p of table.plugins) html += `<th>${esc(p)}</th>`;
  html += '<th>TOTAL</th></tr></thead><tbody>';
  for (const r of table.rows.slice(0, 100)) {
    html += `<tr${r.selected ? ' class="chosen"' : ''}><td>${esc(r.node)}${r.selected ? ' *' : ''}</td><td>${esc(r.verdict)}</td>`;
    for (const s of r.scores) html += `<td>${esc(s)}</td>`;
    html += `<td>${r.total === null ? '-' : r.total}</td></tr>`;
  }
  if (table.rows.length > 100) html += `<tr><td colspan="${table.plugins.length + 3}">… ${table.rows.length - 100} more nodes</td></tr>`;
  return `${html}</tbody></table>`;
}

const num = (v) => (v === undefined || v === null ? '-' : v);

/** One row per budget (PodDisruptionBudget or DistributedPodDisruptionBudget). */
export function budgetRows(budgets, pinned) {
  if (!budgets.length) return '<p class="none">No budgets.</p>';
  let html = '<table class="budgets"><thead><tr><th>budget</th><th>expected</th><th>healthy</th><th>desired</th><th>allowed</th></tr></thead><tbody>';
  for (const b of budgets) {
    const s = b.status || {};
    html += `<tr class="budget${pinned === b.id ? ' pinned' : ''}" data-budget="${esc(b.id)}" data-allowed="${num(s.disruptionsAllowed)}">`
      + `<td>${esc(b.label)}</td><td>${num(s.expectedPods)}</td><td>${num(s.currentHealthy)}</td>`
      + `<td>${num(s.desiredHealthy)}</td><td class="allowed">${num(s.disruptionsAllowed)}</td></tr>`;
  }
  return `${html}</tbody></table>`;
}

export function timelineRows(entries, filter) {
  let html = '';
  let shown = 0;
  for (let i = entries.length - 1; i >= 0 && shown < 300; i -= 1) {
    const e = entries[i];
    if (filter.kind && e.kind !== filter.kind) continue;
    if (filter.by && e.by !== filter.by) continue;
    if (filter.text && !`${e.object} ${e.message} ${e.by}`.toLowerCase().includes(filter.text)) continue;
    shown += 1;
    html += `<tr class="t-${e.kind}" data-timeline="${esc(e.kind)}"><td>${esc(e.time)}</td><td>${esc(e.kind)}</td>`
      + `<td title="${esc(e.object)}">${esc(e.object)}</td><td title="${esc(e.by)}">${esc(e.by)}</td>`
      + `<td title="${esc(e.message)}">${esc(e.message)}</td></tr>`;
  }
  return html || '<tr><td colspan="5" class="none">Nothing yet.</td></tr>';
}
