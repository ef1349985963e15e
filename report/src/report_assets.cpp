// The style sheet and script of rosetta report's page (report.h). The script draws the curves
// and heatmaps from the page's JSON (#report-data) into inline SVG, shows values on hover, and
// switches runs, the x axis and the heatmap's layer and head. It writes text with textContent
// only, never as markup. When it has drawn everything it sets data-ok="rendered" on <html>;
// the page's window.onerror sets data-error instead.
#include "rosetta/report/report.h"

namespace rosetta::report {

const char* report_css() {
  return R"CSS(
:root { --fg: #1d2330; --muted: #6b7280; --line: #e3e6eb; --bg: #f6f7f9; --accent: #2458b3; }
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 1200px; padding: 16px 20px 40px; font: 14px/1.45 system-ui, -apple-system,
       "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; color: var(--fg); background: var(--bg); }
header h1 { margin: 4px 0 0; font-size: 22px; }
h2 { margin: 0 0 10px; font-size: 17px; }
h3 { margin: 12px 0 6px; font-size: 15px; }
section { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 14px 16px; margin: 14px 0; }
.sub, .note { color: var(--muted); font-size: 13px; font-weight: normal; }
.note { margin: 4px 0 8px; }
.swatch { display: inline-block; width: 11px; height: 11px; border-radius: 2px; margin-right: 6px;
          vertical-align: -1px; }
table { border-collapse: collapse; }
th, td { text-align: left; padding: 3px 10px 3px 0; vertical-align: top; }
table.summary td, table.summary th, table.eval td, table.eval th { padding-right: 18px; }
table.summary tr + tr td, table.eval tr + tr td { border-top: 1px solid var(--line); }
table.side { width: 100%; font-size: 13px; }
table.side th:first-child { width: 190px; color: var(--muted); font-weight: normal; }
table.side tr + tr > * { border-top: 1px solid var(--line); }
table.side td { word-break: break-word; font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12px; }
table.side tr.diff td, table.side tr.diff th { background: #fff4d6; }
#config-table.only-diff tr:not(.diff):not(:first-child) { display: none; }
table.single, table.single tbody { display: block; columns: 3 250px; column-gap: 28px; }
table.single tr { display: flex; break-inside: avoid; border-top: 1px solid var(--line); }
table.single tr:first-child { display: none; }
table.single tr > * { border: 0 !important; }
table.single th:first-child { width: 48%; flex: none; }
.controls { display: flex; gap: 8px; align-items: center; margin-bottom: 10px; flex-wrap: wrap; }
.controls button { font: inherit; padding: 3px 10px; border: 1px solid var(--line); background: #fff;
                   border-radius: 5px; cursor: pointer; }
.controls button.on { background: var(--accent); border-color: var(--accent); color: #fff; }
.controls select { font: inherit; padding: 2px 4px; }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(520px, 1fr)); gap: 12px; }
.chart-box { border: 1px solid var(--line); border-radius: 6px; padding: 4px; }
svg.chart { width: 100%; height: auto; display: block; }
svg text { font: 11px system-ui, sans-serif; fill: var(--muted); }
svg text.title { font-size: 13px; font-weight: 600; fill: var(--fg); }
svg text.empty { text-anchor: middle; }
svg .grid { stroke: #eef0f3; }
svg .axis { stroke: #9aa1ad; }
svg .line { fill: none; stroke-width: 1.6; stroke-linejoin: round; }
svg .line.dashed { stroke-dasharray: 5 3; stroke-width: 1.8; }
svg .guide { stroke: #9aa1ad; stroke-dasharray: 2 2; }
.tooltip { position: fixed; pointer-events: none; background: rgba(255, 255, 255, 0.97); border: 1px solid #c9ced6;
           border-radius: 6px; padding: 6px 8px; font-size: 12px; box-shadow: 0 2px 8px rgba(0, 0, 0, 0.12);
           z-index: 10; white-space: nowrap; }
.tooltip b { display: block; margin-bottom: 2px; }
details.sentence { margin: 4px 0; }
details.sentence summary { cursor: pointer; }
table.translations { width: 100%; margin: 4px 0 10px; font-size: 13px; }
table.translations th { width: 90px; color: var(--muted); font-weight: normal; white-space: nowrap; }
table.translations tr + tr > * { border-top: 1px solid var(--line); }
table.translations tr.src td, table.translations tr.ref td { font-weight: 600; }
.exact, table.translations tr.exact td { background: #e3f5e1; }
.heatmap-box { overflow-x: auto; }
svg.heatmap text { font-size: 11px; fill: var(--fg); }
.per-run.off, tr.per-run.off, th.per-run.off, td.per-run.off { display: none; }
.block { margin-bottom: 8px; }
.warnings { border-color: #f0c36d; background: #fffaf0; }
.warnings ul { margin: 0; padding-left: 18px; font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12px; }
.error { background: #fde8e8; border: 1px solid #e0a0a0; padding: 10px; border-radius: 6px; margin: 10px 0; }
code { font-size: 12px; }
.nowrap { white-space: nowrap; }
)CSS";
}

const char* report_js() {
  return R"JS(
(function () {
  'use strict';
  const DATA = JSON.parse(document.getElementById('report-data').textContent);
  const SVG = 'http://www.w3.org/2000/svg';
  const state = { x: 'step', on: DATA.runs.map(() => true) };

  // An element with attributes (and text), appended to parent.
  function make(ns, tag, attrs, text, parent) {
    const e = ns ? document.createElementNS(ns, tag) : document.createElement(tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text != null) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }
  const svg = (tag, attrs, parent, text) => make(SVG, tag, attrs, text, parent);
  const html = (tag, attrs, parent, text) => make(null, tag, attrs, text, parent);

  // ---------------------------------------------------------------- numbers

  function fmt(v) {
    const a = Math.abs(v);
    if (a === 0) return '0';
    if (a >= 1e6) return +(v / 1e6).toPrecision(3) + 'M';
    if (a >= 1e4) return +(v / 1e3).toPrecision(3) + 'k';
    if (a < 1e-3) return v.toExponential(2);
    return String(+v.toPrecision(4));
  }
  function timeUnit(span) { return span < 120 ? [1, 's'] : span < 7200 ? [60, 'min'] : [3600, 'h']; }
  function fmtTime(s) { const [d, u] = timeUnit(s); return +(s / d).toPrecision(3) + ' ' + u; }
  function fmtX(x) { return state.x === 'time' ? fmtTime(x) : 'step ' + Math.round(x); }

  // About n round values (1, 2 or 5 times a power of ten) from lo to hi.
  function ticks(lo, hi, n) {
    const raw = (hi - lo) / n, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map(m => m * mag).find(s => (hi - lo) / s <= n) || raw;
    const out = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(+v.toPrecision(12));
    return out;
  }
  // Ticks of a log axis given in log10 units: the powers of ten inside, or round values when few.
  function logTicks(lo, hi) {
    const out = [];
    for (let p = Math.ceil(lo); p <= hi; p++) out.push(Math.pow(10, p));
    if (out.length >= 2) return out;
    return ticks(Math.pow(10, lo), Math.pow(10, hi), 4).filter(v => v > 0);
  }

  // ---------------------------------------------------------------- curves

  const CHARTS = [
    { title: 'Loss (nats per token)', series: [['train', 'loss', 'training'], ['valid', 'loss', 'validation']] },
    { title: 'Perplexity (log scale)', log: true,
      series: [['train', 'ppl', 'training'], ['valid', 'ppl', 'validation']] },
    { title: 'Validation BLEU', series: [['valid', 'bleu', 'validation']] },
    { title: 'Validation chrF', series: [['valid', 'chrf', 'validation']] },
    { title: 'Learning rate', series: [['train', 'lr', 'training']] },
    { title: 'Gradient norm', series: [['train', 'grad_norm', 'training']] },
    { title: 'Tokens per second', series: [['train', 'tokens_per_s', 'training']] },
  ];
  const W = 560, H = 250, M = { l: 56, r: 16, t: 30, b: 36 };

  // [x, y, step] of one run's series on the current x axis; missing values left out.
  function points(run, kind, key, log) {
    const d = run[kind], out = [];
    const xs = state.x === 'time' ? d.elapsed : d.step, ys = d[key] || [];
    for (let i = 0; i < xs.length; i++)
      if (xs[i] != null && ys[i] != null && !(log && ys[i] <= 0)) out.push([xs[i], ys[i], d.step[i]]);
    return out;
  }

  // The index of the point whose x is nearest to x (points sorted by x).
  function nearest(p, x) {
    let lo = 0, hi = p.length - 1;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (p[mid][0] < x) lo = mid + 1; else hi = mid; }
    return lo > 0 && x - p[lo - 1][0] < p[lo][0] - x ? lo - 1 : lo;
  }

  function drawChart(box, spec) {
    box.textContent = '';
    const root = svg('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart' }, box);
    svg('text', { x: M.l, y: 18, class: 'title' }, root, spec.title);
    const lines = [];
    DATA.runs.forEach((run, r) => {
      if (!state.on[r]) return;
      spec.series.forEach(([kind, key, label], s) => {
        const p = points(run, kind, key, spec.log);
        if (p.length) lines.push({ r, kind, key, label, dashed: s > 0, p });
      });
    });
    if (!lines.length) { svg('text', { x: W / 2, y: H / 2, class: 'empty' }, root, 'no data'); return; }
    const fy = spec.log ? Math.log10 : v => v;
    let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
    for (const l of lines) for (const [x, y] of l.p) {
      x0 = Math.min(x0, x); x1 = Math.max(x1, x); y0 = Math.min(y0, fy(y)); y1 = Math.max(y1, fy(y));
    }
    if (x0 === x1) { x0 -= 1; x1 += 1; }
    if (y0 === y1) { y0 -= 0.5; y1 += 0.5; } else { const pad = (y1 - y0) * 0.06; y0 -= pad; y1 += pad; }
    const X = x => M.l + (x - x0) / (x1 - x0) * (W - M.l - M.r);
    const Y = y => H - M.b - (fy(y) - y0) / (y1 - y0) * (H - M.t - M.b);
    for (const v of spec.log ? logTicks(y0, y1) : ticks(y0, y1, 5)) {
      svg('line', { x1: M.l, x2: W - M.r, y1: Y(v), y2: Y(v), class: 'grid' }, root);
      svg('text', { x: M.l - 6, y: Y(v) + 4, 'text-anchor': 'end' }, root, fmt(v));
    }
    const [div, unit] = state.x === 'time' ? timeUnit(x1) : [1, ''];
    for (const v of ticks(x0 / div, x1 / div, 6)) {
      svg('line', { x1: X(v * div), x2: X(v * div), y1: H - M.b, y2: H - M.b + 4, class: 'axis' }, root);
      svg('text', { x: X(v * div), y: H - M.b + 16, 'text-anchor': 'middle' }, root, fmt(v));
    }
    svg('line', { x1: M.l, x2: W - M.r, y1: H - M.b, y2: H - M.b, class: 'axis' }, root);
    svg('text', { x: W - M.r, y: H - 4, 'text-anchor': 'end' }, root,
        state.x === 'time' ? `training time (${unit})` : 'update step');
    for (const l of lines) {
      const run = DATA.runs[l.r];
      const d = l.p.map(([x, y], i) => (i ? 'L' : 'M') + X(x).toFixed(1) + ' ' + Y(y).toFixed(1)).join('');
      svg('path', { d, class: 'line' + (l.dashed ? ' dashed' : ''), stroke: run.color, 'data-run': l.r,
                    'data-run-name': run.name, 'data-metric': l.kind + '.' + l.key, 'data-points': l.p.length }, root);
      if (l.kind === 'valid' && l.p.length <= 60)
        for (const [x, y] of l.p) svg('circle', { cx: X(x), cy: Y(y), r: 2.2, fill: run.color }, root);
    }
    // Hover: a guide at the mouse, each curve's nearest point marked and listed in the tooltip.
    const guide = svg('line', { y1: M.t, y2: H - M.b, class: 'guide', visibility: 'hidden' }, root);
    const marks = svg('g', {}, root);
    const tip = document.getElementById('tooltip');
    root.addEventListener('mousemove', ev => {
      const box = root.getBoundingClientRect();
      if (!box.width) return;
      const px = (ev.clientX - box.left) / box.width * W;
      const x = x0 + (px - M.l) / (W - M.l - M.r) * (x1 - x0);
      guide.setAttribute('x1', px); guide.setAttribute('x2', px); guide.setAttribute('visibility', 'visible');
      marks.textContent = '';
      tip.textContent = '';
      html('b', {}, tip, fmtX(Math.max(x0, Math.min(x1, x))));
      for (const l of lines) {
        const [px2, py, step] = l.p[nearest(l.p, x)], run = DATA.runs[l.r];
        svg('circle', { cx: X(px2), cy: Y(py), r: 4, fill: run.color, stroke: '#fff' }, marks);
        const row = html('div', {}, tip);
        html('span', { class: 'swatch', style: 'background:' + run.color }, row);
        row.appendChild(document.createTextNode(`${run.name}${spec.series.length > 1 ? ' · ' + l.label : ''}: ` +
            `${fmt(py)} (step ${step}${state.x === 'time' ? ', ' + fmtTime(px2) : ''})`));
      }
      tip.hidden = false;
      const right = ev.clientX + 16 + tip.offsetWidth <= window.innerWidth;
      tip.style.left = (right ? ev.clientX + 16 : ev.clientX - 16 - tip.offsetWidth) + 'px';
      tip.style.top = (ev.clientY + 14) + 'px';
    });
    root.addEventListener('mouseleave', () => {
      guide.setAttribute('visibility', 'hidden'); marks.textContent = ''; tip.hidden = true;
    });
  }

  function drawCharts() {
    const charts = document.getElementById('charts');
    charts.textContent = '';
    for (const spec of CHARTS) drawChart(html('div', { class: 'chart-box' }, charts), spec);
  }

  // ---------------------------------------------------------------- attention

  const shade = v => `hsl(217, 75%, ${Math.round(98 - 60 * v)}%)`;

  // Probabilities of one layer (one head, or the mean of all) as rows of values 0..1.
  function matrix(heads, head, rows, cols) {
    const use = head === 'mean' ? heads : [heads[+head]];
    const out = [];
    for (let i = 0; i < rows; i++) {
      const row = [];
      for (let j = 0; j < cols; j++) {
        let s = 0;
        for (const h of use) s += h[i * cols + j];
        row.push(s / use.length / 100);
      }
      out.push(row);
    }
    return out;
  }

  // Shades are relative to the largest value shown (long rows spread their attention thin).
  function heatmap(box, r, rowLabels, colLabels, m, what) {
    box.textContent = '';
    const top1 = Math.max(1e-9, ...m.map(row => Math.max(...row)));
    const longest = labels => Math.min(150, 10 + 6.5 * Math.max(...labels.map(l => l.length)));
    const cell = Math.max(12, Math.min(28, Math.floor(600 / Math.max(rowLabels.length, colLabels.length))));
    const upright = Math.max(...colLabels.map(l => l.length)) <= 2;  // short labels stay horizontal
    const left = longest(rowLabels), top = upright ? 20 : 12 + longest(colLabels) * 0.85;
    const root = svg('svg', { class: 'heatmap', 'data-run': r, 'data-rows': rowLabels.length,
                              'data-cols': colLabels.length, width: left + colLabels.length * cell + 8,
                              height: top + rowLabels.length * cell + 8 }, box);
    colLabels.forEach((l, j) => {
      const x = left + j * cell + cell / 2 + 4;
      if (upright) svg('text', { x: x - 4, y: top - 6, 'text-anchor': 'middle' }, root, l);
      else svg('text', { transform: `translate(${x},${top - 6}) rotate(-55)` }, root, l);
    });
    rowLabels.forEach((l, i) => {
      svg('text', { x: left - 6, y: top + i * cell + cell / 2 + 4, 'text-anchor': 'end' }, root, l);
      m[i].forEach((v, j) => {
        const rect = svg('rect', { x: left + j * cell, y: top + i * cell, width: cell - 1, height: cell - 1,
                                   fill: shade(v / top1) }, root);
        svg('title', {}, rect, `${what}: ${l} → ${colLabels[j]}: ${v.toFixed(2)}`);
      });
    });
  }

  const KINDS = {
    cross: ['cross-attention (decoder → source)', 'decoder_layers', s => [s.tgt_out, s.src]],
    dec_self: ['decoder self-attention', 'decoder_layers', s => [s.tgt_out, s.tgt_in]],
    enc_self: ['encoder self-attention', 'encoder_layers', s => [s.src, s.src]],
  };

  function attentionWidget(box, r) {
    const A = DATA.runs[r].attention;
    if (!A.sentences.length) { html('p', { class: 'note' }, box, 'no sentence to show'); return; }
    const controls = html('div', { class: 'controls' }, box);
    const select = (label, options) => {
      const l = html('label', {}, controls, label + ' ');
      const s = html('select', { 'data-control': label }, l);
      options.forEach(([v, t]) => html('option', { value: v }, s, t));
      return s;
    };
    const short = t => t.length > 50 ? t.slice(0, 49) + '…' : t;
    const sentence = select('sentence', A.sentences.map((s, i) => [i, `${i + 1}. ${short(s.text)}`]));
    const kind = select('attention', Object.keys(KINDS).map(k => [k, KINDS[k][0]]));
    const layer = select('layer', []);
    const head = select('head', [['mean', 'mean of heads']].concat(
        Array.from({ length: A.heads }, (_, h) => [h, `head ${h + 1}`])));
    const caption = html('p', { class: 'note' }, box);
    const out = html('div', { class: 'heatmap-box' }, box);
    const setLayers = () => {
      layer.textContent = '';
      const n = A[KINDS[kind.value][1]];
      for (let i = 0; i < n; i++) html('option', { value: i }, layer, `${i + 1} of ${n}`);
      layer.value = n - 1;
    };
    const draw = () => {
      const s = A.sentences[+sentence.value], k = kind.value;
      const [rows, cols] = KINDS[k][2](s);
      caption.textContent = `translation: ${s.hyp}`;
      heatmap(out, r, rows, cols, matrix(s[k][+layer.value], head.value, rows.length, cols.length), KINDS[k][0]);
    };
    kind.addEventListener('change', () => { setLayers(); draw(); });
    for (const s of [sentence, layer, head]) s.addEventListener('change', draw);
    setLayers();
    draw();
  }

  // ---------------------------------------------------------------- controls

  function showRun(r, on) {
    state.on[r] = on;
    document.querySelectorAll(`.per-run[data-run="${r}"]`).forEach(e => e.classList.toggle('off', !on));
    drawCharts();
  }

  document.querySelectorAll('input.run-toggle').forEach(box =>
    box.addEventListener('change', () => showRun(+box.dataset.run, box.checked)));
  document.querySelectorAll('button[data-x]').forEach(b => b.addEventListener('click', () => {
    state.x = b.dataset.x;
    document.querySelectorAll('button[data-x]').forEach(o => o.classList.toggle('on', o === b));
    drawCharts();
  }));
  const onlyDiff = document.getElementById('only-diff');
  if (onlyDiff) onlyDiff.addEventListener('change', () =>
    document.getElementById('config-table').classList.toggle('only-diff', onlyDiff.checked));

  drawCharts();
  document.querySelectorAll('div.attn').forEach(box => attentionWidget(box, +box.dataset.run));
  document.documentElement.setAttribute('data-ok', 'rendered');
})();
)JS";
}

}  // namespace rosetta::report
