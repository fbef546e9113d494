// The Kubernetes API as the page reads it: a list (paged), then a watch
// read as a fetch stream from the list's resourceVersion, resumed from the
// last one seen when the stream ends, and listed again on 410 Gone.

const PAGE = 5000;

/** Timing marks (what, start and duration in ms since navigation) for benchmarks. */
export const timings = [];
export function mark(what, start, extra) {
  timings.push({ what, at: Math.round(start), ms: Math.round(performance.now() - start), ...extra });
  if (timings.length > 500) timings.splice(0, timings.length - 500);
}

function withQuery(path, params) {
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== '') query.set(k, v);
  }
  const s = query.toString();
  return s ? `${path}${path.includes('?') ? '&' : '?'}${s}` : path;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

class Gone extends Error {}

/** GET a path as JSON; a Status on failure becomes an Error with its message. */
export async function getJSON(path, { accept, signal } = {}) {
  const response = await fetch(path, {
    headers: { Accept: accept || 'application/json' },
    signal,
  });
  const body = await response.json().catch(() => null);
  if (!response.ok) {
    const error = new Error((body && body.message) || `${response.status} ${response.statusText}`);
    error.code = response.status;
    throw error;
  }
  return body;
}

// Each page is asked for before the previous one is mapped (`map`, when
// given), so the server prepares it while the page works.
async function listAll(path, opts, signal, map) {
  const items = [];
  let resourceVersion;
  const get = (cont) => {
    const started = performance.now();
    return getJSON(
      withQuery(path, { limit: PAGE, continue: cont, labelSelector: opts.labelSelector, fieldSelector: opts.fieldSelector }),
      { accept: opts.accept, signal },
    ).then((page) => {
      mark(`list ${path}`, started, { items: (page.items || []).length });
      return page;
    });
  };
  let next = get(undefined);
  while (next) {
    const page = await next;
    const cont = page.metadata && page.metadata.continue;
    resourceVersion = page.metadata && page.metadata.resourceVersion;
    next = cont ? get(cont) : null;
    // A failed page still fails the list when it is awaited; until then it is handled.
    if (next) next.catch(() => {});
    for (const item of page.items || []) items.push(map ? map(item) : item);
  }
  return { items, resourceVersion };
}

async function watch(path, opts, state, handlers, signal) {
  const url = withQuery(path, {
    watch: 1,
    allowWatchBookmarks: 'true',
    resourceVersion: state.resourceVersion,
    labelSelector: opts.labelSelector,
    fieldSelector: opts.fieldSelector,
  });
  const response = await fetch(url, { headers: { Accept: opts.accept || 'application/json' }, signal });
  if (response.status === 410) throw new Gone();
  if (!response.ok) {
    const body = await response.json().catch(() => null);
    throw new Error((body && body.message) || `${response.status} ${response.statusText}`);
  }
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    // Each line once: the buffer is cut after the last complete one.
    let start = 0;
    let newline;
    const batch = [];
    while ((newline = buffer.indexOf('\n', start)) >= 0) {
      const line = buffer.slice(start, newline);
      start = newline + 1;
      if (!line.trim()) continue;
      const event = JSON.parse(line);
      if (event.type === 'ERROR') {
        if (event.object && event.object.code === 410) throw new Gone();
        throw new Error((event.object && event.object.message) || 'watch error');
      }
      const rv = event.object && event.object.metadata && event.object.metadata.resourceVersion;
      if (rv) state.resourceVersion = rv;
      if (event.type !== 'BOOKMARK') batch.push(event);
    }
    buffer = buffer.slice(start);
    if (batch.length) handlers.events(batch);
  }
}

/**
 * Keeps `handlers` fed with the objects at `path`: `reset(items)` after
 * each (re)list (each item through `handlers.map` when given), `events([{type, object}])` for each chunk of the watch,
 * `status(text)` when the connection changes. `opts.skipList` starts from
 * the current resourceVersion without delivering the existing objects.
 * Returns a function that stops it.
 */
export function informer(path, handlers, opts = {}) {
  const controller = new AbortController();
  const state = { resourceVersion: undefined };
  (async () => {
    let listed = false;
    while (!controller.signal.aborted) {
      try {
        if (!listed) {
          if (opts.skipList) {
            const page = await getJSON(withQuery(path, { limit: 1 }), { signal: controller.signal });
            state.resourceVersion = page.metadata.resourceVersion;
            handlers.reset([]);
          } else {
            const { items, resourceVersion } = await listAll(path, opts, controller.signal, handlers.map);
            state.resourceVersion = resourceVersion;
            handlers.reset(items);
          }
          listed = true;
          handlers.status && handlers.status('');
        }
        await watch(path, opts, state, handlers, controller.signal);
      } catch (error) {
        if (controller.signal.aborted) return;
        if (error instanceof Gone) {
          listed = false;
          continue;
        }
        handlers.status && handlers.status(`${path}: ${error.message}`);
        if (error.code && error.code >= 400 && error.code < 500 && error.code !== 429) {
          listed = false;
        }
        await sleep(1000);
      }
    }
  })();
  return () => controller.abort();
}

/** The served resources of a group version, or null when it is not served. */
export async function discover(groupVersion) {
  try {
    return await getJSON(`/apis/${groupVersion}`);
  } catch {
    return null;
  }
}
