// The dashboard page: a token prompt, then one view at a time, refreshed
// every 2 s while it is shown (and not at all while the tab is hidden).
//
// The page talks only to its own origin. The session is an HttpOnly cookie
// set by POST /api/login; the page never stores the token. Lists are read a
// page at a time with limit/offset, so no view renders more than a few
// hundred rows however large the cluster. API errors land in the status
// line; 401/403 bring the token prompt back.
'use strict';

(function () {
  const POLL_MS = 2000;
  const NODE_PAGE = 200;
  const MAX_CUSTOM = 16;
  const LIST_PAGE = 100;
  const JOB_PAGE = 100;
  const RUN_PAGE = 4;
  const PLOT_HEIGHT = 220;
  // Tick spacings of the step axis: whole steps only.
  const STEP_INCRS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6];
  const SLICE_LABEL = 'manta.io/tpu-slice-name';
  const WORKER_LABEL = 'manta.io/tpu-worker-id';
  const POD_LABEL = 'manta.io/tpu-pod-type';
  const ACCEL_LABEL = 'manta.io/accelerator-type';
  // Metric keys read as "tokens per second", first found wins.
  const TPS_KEYS = ['tokens_per_second', 'tokens_per_sec', 'tokens_per_s', 'tokens_per_second_per_device'];

  // ---------------------------------------------------------------- DOM

  function $(id) { return document.getElementById(id); }

  // An element with attributes ("class", "on<event>", others as given) and
  // children (nodes, or text; null and false are skipped).
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === 'class') el.className = v;
      else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children.flat()) {
      if (c !== null && c !== undefined && c !== false) el.append(c instanceof Node ? c : String(c));
    }
    return el;
  }

  // A table; a header given as [text, class] sets the class of its column's
  // heading (e.g. 'num' to align it with right-aligned numbers).
  function table(headers, rows, cls) {
    const head = headers.map((t) => (Array.isArray(t) ? h('th', {scope: 'col', class: t[1]}, t[0]) :
      h('th', {scope: 'col'}, t)));
    return h('table', {class: 'grid ' + (cls || '')}, h('thead', null, h('tr', null, head)), h('tbody', null, rows));
  }

  // What each element last showed; cleared when the view changes.
  const shown = new Map();

  // Rebuilds `el` from build() only when `key` differs from what it shows,
  // so unchanged data costs no DOM work and keeps clicks and selections.
  function update(el, key, build) {
    if (shown.get(el) === key) return;
    shown.set(el, key);
    el.replaceChildren(...[build()].flat().filter(Boolean));
  }

  // ---------------------------------------------------------------- format

  function shortId(id) { return id ? String(id).slice(0, 12) : ''; }

  function idCell(id) { return h('td', {class: 'id', title: id || ''}, shortId(id)); }

  function num(v) {
    if (typeof v !== 'number' || !isFinite(v)) return '';
    return String(Math.round(v * 1e4) / 1e4);
  }

  function bytes(v) {
    const units = [['TiB', 2 ** 40], ['GiB', 2 ** 30], ['MiB', 2 ** 20], ['KiB', 2 ** 10]];
    for (const [suffix, size] of units) if (v >= size) return (v / size).toFixed(2) + ' ' + suffix;
    return num(v) + ' B';
  }

  function isMemory(name) { return name === 'memory' || name === 'object_store_memory'; }

  function quantity(name, v) { return isMemory(name) ? bytes(v) : num(v); }

  function shape(resources) {
    const parts = Object.entries(resources || {}).map(([k, v]) => k + ': ' + quantity(k, v));
    return '{' + parts.join(', ') + '}';
  }

  function pad(n) { return String(n).padStart(2, '0'); }

  function time(ms) {
    if (!ms) return '';
    const d = new Date(ms);
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
      `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  }

  function firstLine(s) { return s ? String(s).split(/\r?\n/, 1)[0] : ''; }

  function stateCell(state, title) {
    return h('td', {class: 'state state-' + String(state || '').toLowerCase(), title: title || null}, state || '');
  }

  // ---------------------------------------------------------------- HTTP

  class HttpError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  function isAuthError(e) { return e instanceof HttpError && (e.status === 401 || e.status === 403); }

  // The body of a same-origin request as text; HttpError for a failed one
  // (status 0 when the dashboard could not be reached at all).
  async function request(path, init) {
    let res;
    try {
      res = await fetch(path, Object.assign({credentials: 'same-origin', cache: 'no-store'}, init));
    } catch (e) {
      throw new HttpError(0, 'the dashboard cannot be reached (' + e.message + ')');
    }
    const text = await res.text();
    if (!res.ok) throw new HttpError(res.status, text.trim() || res.statusText);
    return text;
  }

  async function getJson(path) {
    const text = await request(path);
    return {text, json: JSON.parse(text)};
  }

  // A State API list page: {text, total, entries}.
  async function listPage(route, offset, limit) {
    const {text, json} = await getJson(`${route}?limit=${limit}&offset=${offset}`);
    const answer = (json.data && json.data.result) || {};
    return {text, total: answer.total || 0, entries: answer.result || []};
  }

  function describe(e) {
    if (!(e instanceof HttpError)) return 'Error: ' + e.message;
    if (e.status === 0) return 'Error: ' + e.message;
    if (e.status === 503) return 'The GCS is unavailable (503): ' + e.message;
    return `Error ${e.status}: ${e.message}`;
  }

  function setStatus(text, kind) {
    const el = $('status');
    el.textContent = text;
    el.className = 'status ' + (kind || '');
  }

  // ---------------------------------------------------------------- pager

  // State of a paged list: its offset, changed by the pager's buttons.
  function pagerState(size) { return {offset: 0, size}; }

  // Moves `state` back to the last page when the list shrank under it;
  // true when it did (the caller reloads).
  function clampPage(state, total) {
    if (state.offset === 0 || state.offset < total) return false;
    state.offset = Math.max(0, Math.floor((total - 1) / state.size) * state.size);
    return true;
  }

  function renderPager(el, state, total, count, what) {
    const first = count ? state.offset + 1 : 0;
    const last = state.offset + count;
    update(el, [state.offset, total, count].join(), () => [
      h('button', {type: 'button', class: 'prev', disabled: state.offset === 0,
        onclick: () => goPage(state, state.offset - state.size)}, '‹ Previous'),
      h('span', {class: 'range'}, `${first}–${last} of ${total} ${what}`),
      h('button', {type: 'button', class: 'next', disabled: last >= total,
        onclick: () => goPage(state, state.offset + state.size)}, 'Next ›'),
    ]);
  }

  function goPage(state, offset) {
    state.offset = Math.max(0, offset);
    refreshNow();
  }

  // ---------------------------------------------------------------- overview

  function resourceRank(name) {
    const order = ['CPU', 'TPU', 'GPU', 'memory', 'object_store_memory'];
    if (order.includes(name)) return order.indexOf(name);
    if (/^TPU-.*-head$/.test(name)) return 10;
    if (name.startsWith('accelerator_type:')) return 11;
    return 20;
  }

  function resourceKind(name) {
    if (/^TPU-.*-head$/.test(name)) return 'pod head';
    if (name.startsWith('accelerator_type:')) return 'accelerator';
    return resourceRank(name) < 10 ? '' : 'slice / custom';
  }

  function usageRow(name, used, total) {
    const bar = h('div', {class: 'meter'}, h('div', {class: 'fill'}));
    bar.firstChild.style.width = (total > 0 ? Math.min(100, (100 * used) / total) : 0) + '%';
    return h('tr', {'data-resource': name},
      h('td', null, name), h('td', {class: 'muted'}, resourceKind(name)),
      h('td', {class: 'num'}, quantity(name, used)), h('td', {class: 'num'}, quantity(name, total)),
      h('td', null, bar));
  }

  // Usage rows as `manta status` lists them (plain resources only), with at
  // most MAX_CUSTOM slice names and custom resources: a cluster of many
  // slices has one per slice.
  function usageRows(usage) {
    const names = Object.keys(usage || {}).filter((n) => !n.includes('node:') && !/_group_/.test(n));
    names.sort((a, b) => resourceRank(a) - resourceRank(b) || a.localeCompare(b, undefined, {numeric: true}));
    const custom = names.filter((n) => resourceRank(n) >= 20);
    const shownNames = names.slice(0, names.length - Math.max(0, custom.length - MAX_CUSTOM));
    const rows = shownNames.map((name) => usageRow(name, usage[name][0], usage[name][1]));
    if (shownNames.length < names.length) {
      rows.push(h('tr', null, h('td', {class: 'muted', colspan: 5},
        `… and ${names.length - shownNames.length} more slice / custom resources`)));
    }
    return rows;
  }

  function card(label, value, kind) {
    return h('div', {class: 'card ' + (kind || '')}, h('div', {class: 'value'}, String(value)),
      h('div', {class: 'label'}, label));
  }

  function renderOverview(status) {
    const nodes = (status.autoscalerReport || {});
    const load = (status.loadMetricsReport || {});
    const active = Object.keys(nodes.activeNodes || {}).length;
    const failed = nodes.failedNodes || [];
    const demands = (load.resourceDemand || []).length + (load.pgDemand || []).length;
    return [
      h('div', {class: 'cards'}, card('nodes alive', active, 'good'),
        card('nodes failed', failed.length, failed.length ? 'bad' : ''), card('pending demands', demands)),
      h('h3', null, 'Resources (used of total)'),
      table(['Resource', 'Kind', ['Used', 'num'], ['Total', 'num'], ''], usageRows(load.usage), 'compact'),
      failed.length ? h('h3', null, 'Recent failures') : null,
      failed.length ? table(['Node', 'IP'], failed.map(([ip, node]) =>
        h('tr', null, idCell(node.replace(/^node_/, '')), h('td', null, ip))), 'compact') : null,
    ];
  }

  const overview = {
    async load() {
      const {text, json} = await getJson('/api/cluster_status');
      let formatted = null;
      if ($('status-text-box').open) {
        formatted = (await getJson('/api/cluster_status?format=1')).json.data.clusterStatus;
      }
      return () => {
        update($('overview-body'), text, () => renderOverview(json.data.clusterStatus || {}));
        if (formatted !== null) $('status-text').textContent = formatted;
      };
    },
  };

  // ---------------------------------------------------------------- nodes

  function labelOf(node, key) { return (node.labels || {})[key] || ''; }

  function workerId(node) {
    const w = parseInt(labelOf(node, WORKER_LABEL), 10);
    return isNaN(w) ? Infinity : w;
  }

  // [used, total] TPU chips of a node; used is null when the node does not
  // report what is available.
  function chips(node) {
    const total = (node.resources_total || {}).TPU || 0;
    const avail = (node.resources_available || {}).TPU;
    return [typeof avail === 'number' ? Math.max(0, total - avail) : null, total];
  }

  function chipsText([used, total]) {
    if (!total) return '';
    return (used === null ? '?' : num(used)) + ' / ' + num(total);
  }

  // Groups in display order: the hosts without a slice (head first), then
  // the slices by name, each sorted by worker id.
  function groupNodes(nodes) {
    const groups = new Map([['', []]]);
    for (const n of nodes) {
      const slice = labelOf(n, SLICE_LABEL);
      if (!groups.has(slice)) groups.set(slice, []);
      groups.get(slice).push(n);
    }
    const names = [...groups.keys()].filter(Boolean).sort((a, b) => a.localeCompare(b, undefined, {numeric: true}));
    const out = names.map((name) => ({name, nodes: groups.get(name).sort((a, b) => workerId(a) - workerId(b))}));
    const loose = groups.get('').sort((a, b) => (b.is_head_node ? 1 : 0) - (a.is_head_node ? 1 : 0));
    if (loose.length) out.unshift({name: '', nodes: loose});
    return out;
  }

  function nodeRow(n) {
    const w = labelOf(n, WORKER_LABEL);
    const name = n.node_name && n.node_name !== n.node_ip ? n.node_name : '';
    return h('tr', {'data-node-id': n.node_id},
      idCell(n.node_id), h('td', null, n.node_ip || ''), h('td', {class: 'num'}, n.is_head_node ? 'head' : w),
      stateCell(n.state, n.state_message), h('td', {class: 'num'}, chipsText(chips(n))),
      h('td', {class: 'num'}, num((n.resources_total || {}).CPU)), h('td', null, name),
      h('td', {class: 'muted'}, firstLine(n.state_message)));
  }

  function groupSummary(group) {
    const first = group.nodes[0] || {};
    let used = 0, total = 0, known = true, alive = 0;
    for (const n of group.nodes) {
      const [u, t] = chips(n);
      total += t;
      if (u === null) known = false; else used += u;
      if (n.state === 'ALIVE') alive++;
    }
    const parts = [`${group.nodes.length} host${group.nodes.length === 1 ? '' : 's'} (${alive} alive)`];
    if (group.name) parts.push(labelOf(first, POD_LABEL), labelOf(first, ACCEL_LABEL));
    if (total) parts.push(`TPU chips ${chipsText([known ? used : null, total])}`);
    return parts.filter(Boolean).join(' · ');
  }

  const NODE_COLUMNS = ['Node', 'IP', ['Worker', 'num'], 'State', ['Chips used/total', 'num'], ['CPU', 'num'], 'Name',
    'Message'];

  // One table body per group, headed by the slice's name and summary.
  function renderNodeGroup(group) {
    const title = group.name ? 'Slice ' + group.name : 'No slice (head and CPU hosts)';
    return h('tbody', {class: 'group' + (group.name ? '' : ' no-slice'), 'data-slice': group.name},
      h('tr', {class: 'group-head'}, h('th', {colspan: NODE_COLUMNS.length, scope: 'rowgroup'}, title,
        h('span', {class: 'muted'}, ' — ' + groupSummary(group)))),
      group.nodes.map(nodeRow));
  }

  function renderNodes(nodes) {
    const t = table(NODE_COLUMNS, [], 'nodes');
    t.querySelector('tbody').replaceWith(...groupNodes(nodes).map(renderNodeGroup));
    return t;
  }

  const nodesView = {
    page: pagerState(NODE_PAGE),
    async load() {
      const p = await listPage('/api/v0/nodes', this.page.offset, this.page.size);
      if (clampPage(this.page, p.total)) return this.load();
      return () => {
        renderPager($('nodes-pager'), this.page, p.total, p.entries.length, 'nodes (grouped within the page)');
        update($('nodes-body'), p.text, () => renderNodes(p.entries));
      };
    },
  };

  // ---------------------------------------------------------------- jobs

  function jobRow(job, selected) {
    const id = job.submission_id;
    const entry = job.entrypoint || '';
    return h('tr', {'data-submission-id': id, class: 'clickable' + (id === selected ? ' selected' : ''),
      tabindex: '0', title: 'Show the logs of ' + id},
    h('td', {class: 'id'}, id), stateCell(job.status), h('td', {class: 'code', title: entry}, entry.slice(0, 80)),
    h('td', null, time(job.start_time)), h('td', null, time(job.end_time)),
    h('td', {class: 'muted'}, firstLine(job.message)));
  }

  function pickJob(ev) {
    const row = ev.target.closest('tr[data-submission-id]');
    if (!row || (ev.type === 'keydown' && ev.key !== 'Enter')) return;
    jobsView.selected = row.getAttribute('data-submission-id');
    $('job-logs').textContent = '';
    refreshNow();
  }

  // Replaces the log text, keeping the view at the end when it was there.
  function showLogs(pre, id, logs) {
    const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    pre.setAttribute('data-job-id', id);
    if (pre.textContent !== logs) pre.textContent = logs;
    pre.toggleAttribute('data-empty', !logs);
    if (atEnd) pre.scrollTop = pre.scrollHeight;
  }

  function renderJobDetail(job, logs) {
    const detail = $('job-detail');
    detail.hidden = !jobsView.selected;
    if (!jobsView.selected) return null;
    const id = jobsView.selected;
    $('job-title').textContent = 'Logs of ' + id;
    $('job-message').textContent = job ? `${job.status}: ${firstLine(job.message)}` : 'This job is not listed.';
    if (logs.status === 'rejected') return logs.reason;
    showLogs($('job-logs'), id, logs.value.json.logs || '');
    return null;
  }

  const jobsView = {
    page: pagerState(JOB_PAGE),
    selected: null,
    async load() {
      // The log's last megabyte: what the page shows of a running job.
      const path = this.selected ? `/api/jobs/${encodeURIComponent(this.selected)}/logs?max_bytes=1048576` : null;
      const [list, logs] = await Promise.allSettled([getJson('/api/jobs/'), path ? getJson(path) : null]);
      if (list.status === 'rejected') throw list.reason;
      const jobs = (Array.isArray(list.value.json) ? list.value.json : []).slice();
      jobs.sort((a, b) => (b.start_time || 0) - (a.start_time || 0));
      clampPage(this.page, jobs.length);
      const page = jobs.slice(this.page.offset, this.page.offset + this.page.size);
      return () => {
        renderPager($('jobs-pager'), this.page, jobs.length, page.length, 'jobs');
        update($('jobs-body'), list.value.text + this.page.offset + '|' + this.selected, () =>
          table(['Submission id', 'Status', 'Entrypoint', 'Started', 'Ended', 'Message'],
            page.map((j) => jobRow(j, this.selected))));
        return renderJobDetail(jobs.find((j) => j.submission_id === this.selected), logs);
      };
    },
  };

  // ---------------------------------------------------------------- actors

  function actorRow(a) {
    return h('tr', {'data-actor-id': a.actor_id},
      idCell(a.actor_id), h('td', null, a.class_name || ''), h('td', null, a.name || ''),
      stateCell(a.state, a.death_cause ? String(a.death_cause) : ''), idCell(a.node_id),
      h('td', {class: 'num'}, a.pid > 0 ? String(a.pid) : ''), h('td', {class: 'num'}, String(a.num_restarts || 0)));
  }

  const actorsView = {
    page: pagerState(LIST_PAGE),
    async load() {
      const p = await listPage('/api/v0/actors', this.page.offset, this.page.size);
      if (clampPage(this.page, p.total)) return this.load();
      return () => {
        renderPager($('actors-pager'), this.page, p.total, p.entries.length, 'actors');
        update($('actors-body'), p.text, () =>
          table(['Actor', 'Class', 'Name', 'State', 'Node', ['PID', 'num'], ['Restarts', 'num']],
            p.entries.map(actorRow)));
      };
    },
  };

  // ---------------------------------------------------------------- placement groups

  // "4 × {TPU: 4} on slice tpu-group-0 (4 placed)": bundles by shape.
  function bundleLines(bundles) {
    const byShape = new Map();
    for (const b of bundles || []) {
      const sel = Object.entries(b.label_selector || {}).map(([k, v]) =>
        k === SLICE_LABEL ? 'slice ' + v : k + '=' + v).join(', ');
      const key = shape(b.unit_resources) + (sel ? ' on ' + sel : '');
      const e = byShape.get(key) || {count: 0, placed: 0};
      e.count++;
      if (b.node_id) e.placed++;
      byShape.set(key, e);
    }
    return [...byShape].map(([key, e]) => h('div', null, `${e.count} × ${key} (${e.placed} placed)`));
  }

  function groupRow(g) {
    return h('tr', {'data-placement-group-id': g.placement_group_id},
      idCell(g.placement_group_id), h('td', null, g.name || ''), h('td', null, g.strategy || ''),
      stateCell(g.state), h('td', null, bundleLines(g.bundles)),
      h('td', {class: 'muted'}, g.state === 'CREATED' ? '' : firstLine(g.state_message)));
  }

  const groupsView = {
    page: pagerState(LIST_PAGE),
    async load() {
      const p = await listPage('/api/v0/placement_groups', this.page.offset, this.page.size);
      if (clampPage(this.page, p.total)) return this.load();
      return () => {
        renderPager($('placement-groups-pager'), this.page, p.total, p.entries.length, 'placement groups');
        update($('placement-groups-body'), p.text, () =>
          table(['Group', 'Name', 'Strategy', 'State', 'Bundles', 'Message'], p.entries.map(groupRow)));
      };
    },
  };

  // ---------------------------------------------------------------- training

  function tpsKey(metrics) {
    for (const k of TPS_KEYS) if (metrics.some((p) => typeof p[k] === 'number')) return k;
    for (const p of metrics) {
      const k = Object.keys(p).find((name) => /tokens/.test(name) && typeof p[name] === 'number');
      if (k) return k;
    }
    return null;
  }

  // [steps, values] of one metric, by step ascending; a step reported again
  // (after a restart from a checkpoint) keeps its newest value.
  function series(metrics, key) {
    const byStep = new Map();
    if (key) {
      for (const p of metrics) {
        if (typeof p.step === 'number' && typeof p[key] === 'number') byStep.set(p.step, p[key]);
      }
    }
    const steps = [...byStep.keys()].sort((a, b) => a - b);
    return [steps, steps.map((s) => byStep.get(s))];
  }

  function plotWidth(el) { return Math.max(240, el.clientWidth || 480); }

  function newPlot(el, label, color, data) {
    if (typeof window.uPlot !== 'function') {
      el.textContent = 'The plot library did not load.';
      return null;
    }
    const opts = {
      width: plotWidth(el), height: PLOT_HEIGHT,
      scales: {x: {time: false}},
      series: [{label: 'step'}, {label, stroke: color, width: 1.5, spanGaps: true}],
      axes: [{incrs: STEP_INCRS}, {size: 64}],
    };
    return new window.uPlot(opts, data, el);
  }

  // The card of one run: its plots are created once and fed new data.
  function runCard(run) {
    const lossEl = h('div', {class: 'plot loss-plot', 'data-run': run.name || run.id, 'data-run-id': run.id});
    const tpsEl = h('div', {class: 'plot tps-plot', 'data-run': run.name || run.id, 'data-run-id': run.id});
    const el = h('article', {class: 'run', 'data-run-id': run.id},
      h('h3', null), h('p', {class: 'meta'}), h('div', {class: 'plots'},
        h('figure', null, h('figcaption', {class: 'loss-caption'}), lossEl),
        h('figure', null, h('figcaption', {class: 'tps-caption'}), tpsEl)));
    return {el, lossEl, tpsEl, loss: null, tps: null};
  }

  function runMeta(run) {
    const attempts = run.attempts || [];
    const last = attempts[attempts.length - 1];
    const workers = last ? (last.workers || []).length : 0;
    const failures = `${run.num_failures || 0}/${run.max_failures < 0 ? 'inf' : run.max_failures}`;
    return [`job ${run.job_id || '-'}`, `started ${time(run.start_time_ms)}`,
      run.end_time_ms ? `ended ${time(run.end_time_ms)}` : '', `${attempts.length} attempt(s)`,
      `${workers} worker(s)`, `failures ${failures}`,
      run.latest_checkpoint ? `checkpoint ${run.latest_checkpoint}` : '', firstLine(run.status_detail)]
      .filter(Boolean).join(' · ');
  }

  function feedPlot(c, which, el, label, color, data) {
    el.setAttribute('data-points', String(data[0].length));
    const n = data[0].length;
    c.el.querySelector(`.${which}-caption`).textContent = `${label} by step (${n ? n + ' points' : 'no points yet'})`;
    if (c[which]) c[which].setData(data);
    else c[which] = newPlot(el, label, color, data);
  }

  function updateRunCard(c, run) {
    const title = c.el.querySelector('h3');
    title.replaceChildren(run.name || run.id, ' ', h('span', {class: 'state state-' +
      String(run.status || '').toLowerCase()}, run.status || ''));
    c.el.querySelector('.meta').textContent = runMeta(run);
    const metrics = run.metrics || [];
    const key = tpsKey(metrics);
    feedPlot(c, 'loss', c.lossEl, 'loss', '#c0392b', series(metrics, 'loss'));
    feedPlot(c, 'tps', c.tpsEl, key || 'tokens/s', '#2471a3', series(metrics, key));
  }

  const trainView = {
    page: pagerState(RUN_PAGE),
    cards: new Map(),  // run id -> card on the current page
    async load() {
      const {json} = await getJson('/api/train/v2/runs/v1');
      const runs = json.train_runs || [];
      clampPage(this.page, runs.length);
      const page = runs.slice(this.page.offset, this.page.offset + this.page.size);
      return () => {
        renderPager($('train-pager'), this.page, runs.length, page.length, 'runs');
        this.show(page);
      };
    },
    show(runs) {
      const body = $('train-body');
      const ids = new Set(runs.map((r) => r.id));
      for (const [id, c] of this.cards) if (!ids.has(id)) this.drop(id, c);
      if (!runs.length) body.replaceChildren(h('p', {class: 'muted'}, 'No training runs.'));
      else if (!body.querySelector('.run')) body.replaceChildren();
      for (const run of runs) {
        if (!this.cards.has(run.id)) this.cards.set(run.id, runCard(run));
        const c = this.cards.get(run.id);
        body.append(c.el);  // appends new cards and keeps the order
        updateRunCard(c, run);
      }
    },
    drop(id, c) {
      if (c.loss) c.loss.destroy();
      if (c.tps) c.tps.destroy();
      c.el.remove();
      this.cards.delete(id);
    },
    leave() { for (const [id, c] of this.cards) this.drop(id, c); },
    resize() {
      for (const c of this.cards.values()) {
        for (const [plot, el] of [[c.loss, c.lossEl], [c.tps, c.tpsEl]]) {
          if (plot) plot.setSize({width: plotWidth(el), height: PLOT_HEIGHT});
        }
      }
    },
  };

  // ---------------------------------------------------------------- app

  const VIEWS = {
    'overview': overview,
    'nodes': nodesView,
    'jobs': jobsView,
    'actors': actorsView,
    'placement-groups': groupsView,
    'train': trainView,
  };

  // `gen` changes whenever what is shown changes; a load started under an
  // older gen is dropped, so a slow answer never paints over a newer view.
  const app = {view: null, gen: 0, timer: 0, signedIn: false};

  async function tick() {
    clearTimeout(app.timer);
    const gen = app.gen;
    if (!app.signedIn || !app.view) return;
    if (!document.hidden) {
      try {
        const render = await VIEWS[app.view].load();
        if (gen !== app.gen) return;
        const problem = render();  // an error of a part of the view, shown after it
        markStale(false);
        if (problem) reportError(problem);
        else setStatus('Updated ' + time(Date.now()), 'ok');
      } catch (e) {
        if (gen !== app.gen) return;
        reportError(e);
      }
    }
    if (gen === app.gen && app.signedIn) app.timer = setTimeout(tick, POLL_MS);
  }

  function refreshNow() {
    app.gen++;
    tick();
  }

  function reportError(e) {
    if (isAuthError(e)) {
      showLogin(`The dashboard refused the session (${e.status}): ${e.message.replace(/\.$/, '')}. Sign in again.`);
      setStatus(describe(e), 'error');
      return;
    }
    markStale(true);
    setStatus(describe(e), 'error');
  }

  // Dims the shown view while what it shows may be out of date.
  function markStale(stale) {
    const section = app.view && $('view-' + app.view);
    if (section) section.classList.toggle('stale', stale);
  }

  function viewFromHash() {
    const name = decodeURIComponent(location.hash.slice(1));
    return Object.prototype.hasOwnProperty.call(VIEWS, name) ? name : 'overview';
  }

  function showView(name) {
    if (app.view && app.view !== name && VIEWS[app.view].leave) VIEWS[app.view].leave();
    app.view = name;
    shown.clear();
    for (const s of document.querySelectorAll('.view')) s.hidden = s.id !== 'view-' + name;
    for (const a of document.querySelectorAll('#nav a')) {
      if (a.dataset.view === name) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    }
    refreshNow();
  }

  function showLogin(message) {
    app.signedIn = false;
    app.gen++;
    clearTimeout(app.timer);
    if (app.view && VIEWS[app.view].leave) VIEWS[app.view].leave();
    app.view = null;
    for (const s of document.querySelectorAll('.view')) s.hidden = true;
    $('nav').hidden = true;
    $('login-form').hidden = false;
    $('login-error').textContent = message || '';
    $('token-input').focus();
  }

  function enterApp() {
    app.signedIn = true;
    $('login-form').hidden = true;
    $('nav').hidden = false;
    showView(viewFromHash());
  }

  async function onLogin(ev) {
    ev.preventDefault();
    const input = $('token-input');
    const body = JSON.stringify({token: input.value});
    input.value = '';
    $('login-error').textContent = '';
    try {
      await request('/api/login', {method: 'POST', headers: {'Content-Type': 'application/json'}, body});
    } catch (e) {
      $('login-error').textContent = isAuthError(e) ? `Sign-in refused (${e.status}): ${e.message}` : describe(e);
      input.focus();
      return;
    }
    setStatus('Signed in.', 'ok');
    enterApp();
  }

  // Whether the session (or no-auth cluster) lets us in: the token prompt on
  // 401/403, the views otherwise (a 503 only means the GCS is away).
  async function probe() {
    try {
      await request('/api/gcs_healthz');
    } catch (e) {
      if (isAuthError(e)) {
        setStatus('Not signed in.', '');
        return showLogin('');
      }
      if (e.status !== 503) {
        setStatus(describe(e) + ' (retrying)', 'error');
        setTimeout(probe, POLL_MS);
        return;
      }
      setStatus(describe(e), 'error');
    }
    enterApp();
  }

  function start() {
    $('login-form').addEventListener('submit', onLogin);
    $('jobs-body').addEventListener('click', pickJob);
    $('jobs-body').addEventListener('keydown', pickJob);
    $('status-text-box').addEventListener('toggle', () => app.signedIn && refreshNow());
    window.addEventListener('hashchange', () => app.signedIn && showView(viewFromHash()));
    window.addEventListener('resize', () => trainView.resize());
    document.addEventListener('visibilitychange', () => !document.hidden && app.signedIn && refreshNow());
    probe();
  }

  start();
})();
