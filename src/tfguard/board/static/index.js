// The tfguard tab of TensorBoard: one ES module, served by the plugin's own route.
//
// TensorBoard loads it in an iframe (data/plugin_entry.html, <base href="plugin/tfguard/">)
// and calls render(). Everything comes from the plugin's routes: `runs` (the diagnoses),
// `style.css`. Text from the logs (run names, hparams, layer names, messages) is only ever
// set with textContent or as an attribute value, never parsed as HTML.
//
// One bad run costs its own section, never the tab: each section is drawn on its own, and one
// that throws (a field of an unexpected type) is replaced by a note naming the run and the error.
// A run the plugin could not read or diagnose comes with kind "unreadable" and says why.
//
// Reloading: TensorBoard does not tell an iframe plugin about its reload button, so the tab
// watches the button (same origin) and asks again when a reload ends, which covers the
// button and TensorBoard's auto-reload; opened on its own (no TensorBoard around it), it
// asks again every REFRESH_MS while visible.

const REFRESH_MS = 30000;
const LIVE_S = 120; // a run not ended and written to within this many seconds is "being written"
const SVG = 'http://www.w3.org/2000/svg';

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function add(parent, ...children) {
  for (const child of children) if (child) parent.appendChild(child);
  return parent;
}

function child(parent, node) {
  parent.appendChild(node);
  return node;
}

function fmt(value) {
  if (value === null || value === undefined) return '-';
  if (typeof value === 'number') {
    if (Number.isInteger(value)) return String(value);
    return Number(value.toPrecision(4)).toString();
  }
  return String(value);
}

function list(value) {
  return Array.isArray(value) ? value : [];
}

function entries(value) {
  return value && typeof value === 'object' && !Array.isArray(value) ? Object.entries(value) : [];
}

function onsetText(f) {
  const parts = [];
  if (f.onset_epoch !== null && f.onset_epoch !== undefined) parts.push(`epoch ${f.onset_epoch}`);
  if (f.onset_step !== null && f.onset_step !== undefined) parts.push(`step ${f.onset_step}`);
  return parts.join(', ') || '-';
}

function table(head, rows, cls) {
  const t = el('table', cls);
  const tr = child(child(t, el('thead')), el('tr'));
  for (const h of head) tr.appendChild(el('th', null, h));
  const body = t.appendChild(el('tbody'));
  for (const row of rows) {
    const r = body.appendChild(el('tr'));
    for (const cell of row) {
      const td = r.appendChild(el('td'));
      if (cell instanceof Node) td.appendChild(cell);
      else td.textContent = fmt(cell);
    }
  }
  return t;
}

function badge(kind, text) {
  return el('span', `badge kind-${kind}`, text);
}

function findingItem(f, causes) {
  const item = el('li', `finding sev-${f.severity}`);
  const head = child(item, el('div', 'finding-head'));
  add(head, badge(f.severity, f.severity), el('span', 'symptom', f.id));
  if (Array.isArray(f.cause) && f.cause.length) {
    head.appendChild(el('span', 'caused-by', `caused by ${f.cause[0]}${f.cause[1] ? ` (${f.cause[1]})` : ''}`));
  } else if (causes.has(f.id)) {
    head.appendChild(el('span', 'root-cause', 'root cause'));
  }
  const facts = child(item, el('div', 'facts'));
  add(facts, el('span', 'where', `layer: ${f.where || '-'}`), el('span', 'onset', `onset: ${onsetText(f)}`));
  item.appendChild(el('p', 'message', f.message));
  if (f.suggestion) item.appendChild(el('p', 'fix', `fix: ${f.suggestion}`));
  const evidence = entries(f.evidence);
  if (evidence.length) {
    item.appendChild(el('p', 'evidence', 'evidence: ' + evidence.map(([k, v]) => `${k}=${fmt(v)}`).join(', ')));
  }
  return item;
}

function svg(tag, attributes, parent) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attributes)) node.setAttribute(k, v);
  if (parent) parent.appendChild(node);
  return node;
}

function timeline(violations, loss, spikes = []) {
  // The loss over steps (as the HTML report draws it), each flagged step a red band and a mark,
  // each loss spike a triangle above its step (filled: applied; hollow: rejected).
  const width = 640, height = 120, pad = 12, markY = height - 22, top = 8, bottom = height - 34;
  const lossSteps = loss ? loss.steps : [];
  const steps = [...lossSteps, ...violations.map((v) => Number(v.step)), ...spikes.map((s) => Number(s.step))]
    .filter(Number.isFinite);
  const lo = Math.min(...steps), hi = Math.max(...steps);
  const x = (step) => (hi > lo ? pad + ((step - lo) / (hi - lo)) * (width - 2 * pad) : width / 2);
  const chart = svg('svg', {viewBox: `0 0 ${width} ${height}`, class: 'timeline'});
  svg('line', {x1: pad, x2: width - pad, y1: markY + 8, y2: markY + 8, class: 'axis'}, chart);
  for (const v of violations) {
    svg('rect', {x: x(v.step) - 1.5, y: top, width: 3, height: bottom - top, class: 'band'}, chart);
  }
  const finite = loss ? loss.values.map((v, i) => [lossSteps[i], v]).filter(([, v]) => typeof v === 'number') : [];
  if (finite.length > 1) {
    const ys = finite.map(([, v]) => v);
    const ylo = Math.min(...ys), yhi = Math.max(...ys);
    const y = (v) => (yhi > ylo ? bottom - ((v - ylo) / (yhi - ylo)) * (bottom - top) : (top + bottom) / 2);
    svg('polyline', {points: finite.map(([s, v]) => `${x(s).toFixed(1)},${y(v).toFixed(1)}`).join(' '),
      class: 'loss'}, chart);
    const label = svg('text', {x: pad, y: top + 8}, chart);
    label.textContent = `${loss.tag} ${fmt(yhi)} … ${fmt(ylo)}`;
  }
  for (const v of violations) {
    const mark = svg('circle', {cx: x(v.step), cy: markY, r: 5, class: `mark action-${v.action || 'none'}`}, chart);
    const title = svg('title', {}, mark);
    title.textContent = `step ${v.step}: ${v.stage} · ${v.where} (${v.action})`;
  }
  for (const s of spikes) {
    const at = x(Number(s.step));
    if (!Number.isFinite(at)) continue;
    const mark = svg('polygon', {points: `${at - 5},${top} ${at + 5},${top} ${at},${top + 8}`,
      class: `spike action-${s.action || 'applied'}`}, chart);
    const title = svg('title', {}, mark);
    title.textContent = `step ${s.step}: loss spike ${fmt(s.value)} (${s.action || 'applied'})`;
  }
  for (const [at, label, anchor] of [[pad, lo, 'start'], [width - pad, hi, 'end']]) {
    const text = svg('text', {x: at, y: height - 1, 'text-anchor': anchor}, chart);
    text.textContent = `step ${label}`;
  }
  return chart;
}

const DONE = {skipped: 'skipped: update not applied', warned: 'warned: update applied', raised: 'raised: training stopped'};

function firewall(run) {
  const box = el('div', 'firewall');
  const actions = [...new Set(list(run.violations).map((v) => v.action).filter(Boolean))].sort();
  box.appendChild(el('h3', null, 'Firewall'));
  box.appendChild(el('p', null, `${run.violation_count} violation(s) recorded` + (actions.length ? ` (${actions.join(', ')})` : '')
    + (run.violation_count > run.violations.length ? `; the first ${run.violations.length} are listed` : '')));
  box.appendChild(timeline(run.violations, run.loss, list(run.spikes)));
  const rows = run.violations.map((v) => [
    v.step,
    v.batch === null ? '-' : `batch ${v.batch}` + (v.epoch === null ? '' : ` (epoch ${v.epoch})`),
    `${v.stage || '-'} · ${v.check || '-'}`,
    v.where || '-',
    v.values || '-',
    DONE[v.action] || v.action || '-',
    v.quarantine || (v.quarantine_error ? `not saved: ${v.quarantine_error}` : '-'),
    v.replay || '-',
  ]);
  box.appendChild(table(['step', 'batch', 'stage · check', 'tensor / layer / variable', 'values',
    'what was done', 'quarantined', 'replay localized'], rows, 'violations'));
  return box;
}

function spikeBox(run) {
  // A run the firewall did not guard: its loss spikes, on the loss timeline.
  const box = el('div', 'firewall');
  box.appendChild(el('h3', null, 'Loss spikes'));
  const spikes = list(run.spikes);
  box.appendChild(el('p', null, `${spikes.length} loss spike(s) found in the logged batch losses; `
    + 'none was rejected (guard the training with spikes=True to skip them)'));
  box.appendChild(timeline([], run.loss, spikes));
  return box;
}

function runSection(run) {
  const section = el('section', `run kind-${run.kind}`);
  section.id = 'run-' + encodeURIComponent(run.run);
  const head = child(section, el('div', 'run-head'));
  add(head, el('h2', 'run-name', run.run), badge(run.kind, run.headline), el('span', 'source', run.source));
  if (run.age_s !== null && run.age_s < LIVE_S && run.ended !== true) {
    head.appendChild(el('span', 'live', `being written: last write ${Math.round(run.age_s)} s ago, showing what is known so far`));
  }
  const hparams = entries(run.hparams);
  if (hparams.length) section.appendChild(el('p', 'hparams', 'hparams: ' + hparams.map(([k, v]) => `${k}=${fmt(v)}`).join(', ')));
  const metrics = entries(run.metrics).filter(([, m]) => m && typeof m === 'object');
  if (metrics.length) {
    section.appendChild(el('p', 'metrics', metrics.map(([tag, m]) => `${tag} final ${fmt(m.final)}`
      + (m.best === null ? '' : `, best ${fmt(m.best)}` + (m.best_epoch === null ? '' : ` @ epoch ${m.best_epoch}`))).join(' · ')));
  }
  const symptoms = list(run.symptoms).filter((f) => f && typeof f === 'object');
  if (symptoms.length) {
    const causes = new Set(symptoms.filter((f) => Array.isArray(f.cause)).map((f) => f.cause[0]));
    const findings = child(section, el('ol', 'findings'));
    for (const f of symptoms) findings.appendChild(findingItem(f, causes));
  }
  if (list(run.violations).length) section.appendChild(firewall(run));
  else if (list(run.spikes).length) section.appendChild(spikeBox(run));
  if (run.status && list(run.status.missing).length) {
    section.appendChild(el('p', 'muted', 'missing: ' + run.status.missing.join('; ')));
  }
  for (const note of list(run.notes)) section.appendChild(el('p', 'note', 'note: ' + note));
  return section;
}

function rankingSection(ranking) {
  const section = el('section', 'ranking');
  section.appendChild(el('h2', null, `Comparison of ${ranking.rows.length} runs, ranked by best ${ranking.sort_by}`));
  const names = [...new Set(ranking.rows.flatMap((r) => Object.keys(r.hparams || {})))];
  const differ = names.filter((n) => new Set(ranking.rows.map((r) => JSON.stringify(r.hparams[n]))).size > 1);
  const rows = ranking.rows.map((r) => {
    const link = el('a', null, r.run);
    link.href = '#run-' + encodeURIComponent(r.run);
    return [r.rank, link, ...differ.map((n) => r.hparams[n]), r.sort_value, badge(r.state !== 'completed' ? r.state : (r.worst || 'healthy'), r.summary)];
  });
  section.appendChild(table(['#', 'run', ...differ, `best ${ranking.sort_by}`, 'findings'], rows, 'compare'));
  return section;
}

function trialsSection(report) {
  const section = el('section', 'trials');
  section.appendChild(el('h2', null, `Tried fixes (${report.report}, run ${list(report.runs).join(', ') || '-'})`));
  if (report.error) {
    section.appendChild(el('p', 'error', report.error));
    return section;
  }
  const trials = list(report.trials).filter((t) => t && typeof t === 'object');
  const rows = trials.map((t, i) => [i + 1, (t.finding || '-') + (t.where ? ` (${t.where})` : ''), t.change, t.measure,
    `${fmt(t.before)} → ${fmt(t.after)}`, badge(t.verdict === 'improved' ? 'healthy' : 'warning', t.verdict === 'improved' ? 'improved: fix' : `${t.verdict || '-'}: not a fix`)]);
  section.appendChild(table(['#', 'finding', 'change tried', 'measure', 'before → after', 'verdict'], rows, 'trial-table'));
  const more = (report.trial_count || trials.length) - trials.length;
  if (more > 0) section.appendChild(el('p', 'note', `${more} more trial(s) in the file are not listed`));
  return section;
}

function guarded(what, drawSection) {
  // One section that throws becomes a note naming it; the rest of the tab is drawn.
  try {
    return drawSection();
  } catch (error) {
    const section = el('section', 'run kind-unreadable');
    section.appendChild(el('p', 'error', `tfguard could not show ${what}: ${error.message}`));
    return section;
  }
}

function draw(root, doc) {
  const page = el('div', 'page');
  const header = child(page, el('header'));
  header.appendChild(el('h1', null, 'tfguard'));
  const runs = list(doc.runs);
  const healthy = runs.filter((r) => r && r.kind === 'healthy').length;
  header.appendChild(el('p', 'summary', `${runs.length} run(s) in ${doc.logdir}: ${healthy} healthy · answered in ${doc.seconds} s · ${new Date().toLocaleTimeString()}`));
  if (!runs.length) page.appendChild(el('p', 'empty', 'No runs with event files under the logdir yet.'));
  if (doc.ranking) page.appendChild(guarded('the comparison of the runs', () => rankingSection(doc.ranking)));
  for (const report of list(doc.trials)) {
    page.appendChild(guarded(`the tried fixes of ${report && report.report}`, () => trialsSection(report)));
  }
  for (const run of runs) page.appendChild(guarded(`run ${run && run.run}`, () => runSection(run)));
  root.replaceChildren(page);
}

let busy = null;

async function refresh(root) {
  if (busy) return busy;
  busy = (async () => {
    try {
      const response = await fetch('runs', {cache: 'no-store'});
      if (!response.ok) throw new Error(`the tfguard plugin answered HTTP ${response.status}`);
      draw(root, await response.json());
    } catch (error) {
      root.replaceChildren(el('p', 'error', `tfguard could not read the diagnoses: ${error.message}`));
    } finally {
      busy = null;
    }
  })();
  return busy;
}

function hearReload(root) {
  // TensorBoard's reload button (class "reload-button") has the class "loading" while the
  // plugins listing is fetched again, after a click or on auto-reload: ask again when it ends.
  try {
    const doc = window.parent && window.parent !== window ? window.parent.document : null;
    if (!doc || !doc.body) return false;
    new MutationObserver((changes) => {
      for (const change of changes) {
        const t = change.target;
        if (t.classList && t.classList.contains('reload-button') && String(change.oldValue).includes('loading')
            && !t.classList.contains('loading')) {
          refresh(root);
          return;
        }
      }
    }).observe(doc.body, {subtree: true, attributes: true, attributeFilter: ['class'], attributeOldValue: true});
    return true;
  } catch (error) {
    return false; // another origin: fall back to asking every REFRESH_MS
  }
}

export async function render() {
  const style = document.createElement('link');
  style.rel = 'stylesheet';
  style.href = 'style.css';
  document.head.appendChild(style);
  const root = document.body.appendChild(el('main', 'tfguard', 'Reading the event files…'));
  if (!hearReload(root)) {
    setInterval(() => { if (document.visibilityState === 'visible') refresh(root); }, REFRESH_MS);
  }
  await refresh(root);
}
