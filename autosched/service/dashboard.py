# ruff: noqa: E501  (the page is kept as written: one CSS rule / JS statement group per line)
"""The dashboard: one HTML page with plain JS that polls the JSON API (no build step).

Kept as a string in a module so it ships with the package whatever the packaging config. It
shows jobs with live progress, the selected job's tuning curve as an inline SVG, and the best
schedule per workload with its generated source. A token typed into the page (kept in the
browser's localStorage) is sent as a bearer token: for cancelling, and for reads on a server
started with read auth. Text from the API is inserted with textContent, never as HTML.
"""

from __future__ import annotations

PAGE = r"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>autosched dashboard</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
 body{font:14px system-ui,sans-serif;margin:1.2em;color:#222;background:#fafafa}
 h1{font-size:1.3em;margin:0 0 .4em} h2{font-size:1.05em;margin:1.2em 0 .4em}
 table{border-collapse:collapse;width:100%;background:#fff} th,td{border-bottom:1px solid #ddd;padding:4px 6px;text-align:left}
 th{background:#f0f0f0} tr.sel{background:#eef5ff} tr.job{cursor:pointer}
 .bar{width:140px;height:12px;background:#e5e5e5;border-radius:6px;overflow:hidden;display:inline-block;vertical-align:middle}
 .bar>div{height:100%;background:#3b82f6} .st-done{color:#15803d} .st-failed{color:#b91c1c} .st-running{color:#1d4ed8}
 .st-cancelled{color:#777} .muted{color:#777} pre{background:#fff;border:1px solid #ddd;padding:.6em;max-height:24em;overflow:auto}
 #curve{background:#fff;border:1px solid #ddd} .row{display:flex;gap:1.5em;flex-wrap:wrap} .err{color:#b91c1c}
</style></head><body>
<h1>autosched <span class="muted" id="health"></span></h1>
<div>token <input id="token" type="password" size="28" placeholder="bearer token (cancel / read auth)">
 <span id="msg" class="err"></span></div>
<h2>Jobs</h2>
<table id="jobs"><thead><tr><th>job</th><th>workload</th><th>target</th><th>state</th><th>progress</th>
<th>best GFLOP/s</th><th>searcher</th><th>prio</th><th>owner</th><th></th></tr></thead><tbody></tbody></table>
<div class="row"><div><h2>Tuning curve <span id="curve-title" class="muted"></span></h2>
<svg id="curve" width="520" height="260" viewBox="0 0 520 260"></svg></div>
<div style="flex:1;min-width:320px"><h2>Job detail</h2><pre id="detail" class="muted">click a job</pre></div></div>
<h2>Best schedules</h2>
<table id="best"><thead><tr><th>workload</th><th>args</th><th>target</th><th>median ms</th><th>GFLOP/s</th><th></th></tr></thead>
<tbody></tbody></table>
<pre id="source" class="muted">select "source" to see a best schedule's primitives and generated code</pre>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
let selected = null;
$("token").value = localStorage.getItem("autosched-token") || "";
$("token").addEventListener("change", () => localStorage.setItem("autosched-token", $("token").value));
function headers() { const t = $("token").value.trim(); return t ? {"Authorization": "Bearer " + t} : {}; }
async function api(path, opts) {
  const r = await fetch(path, Object.assign({headers: headers()}, opts || {}));
  if (!r.ok) { let d = r.statusText; try { d = (await r.json()).detail; } catch (e) {} throw new Error(r.status + ": " + JSON.stringify(d)); }
  return r.json();
}
function cell(tr, text, cls) { const td = document.createElement("td"); td.textContent = text; if (cls) td.className = cls; tr.appendChild(td); return td; }
function fmt(x, d) { return (x === null || x === undefined) ? "-" : Number(x).toFixed(d); }
// The tables are rebuilt only when what they show changed: a row replaced under the pointer
// would swallow the user's click (and a test's), so an unchanged poll leaves the DOM alone.
let jobsShown = null, bestShown = null;
async function refreshJobs(force) {
  const data = await api("/v1/jobs?limit=100");
  const sig = JSON.stringify([selected, data.jobs]);
  if (!force && sig === jobsShown) return;
  jobsShown = sig;
  const body = $("jobs").tBodies[0]; body.textContent = "";
  for (const j of data.jobs) {
    const tr = document.createElement("tr"); tr.className = "job" + (j.id === selected ? " sel" : ""); tr.dataset.id = j.id;
    cell(tr, j.id.slice(0, 8)); cell(tr, j.workload_name); cell(tr, j.target.split("|")[0]);
    cell(tr, j.state, "st-" + j.state);
    const td = cell(tr, ""); const bar = document.createElement("span"); bar.className = "bar";
    const fill = document.createElement("div"); fill.style.width = Math.min(100, 100 * j.trials_done / Math.max(1, j.trials)) + "%";
    bar.appendChild(fill); td.appendChild(bar); td.appendChild(document.createTextNode(" " + j.trials_done + "/" + j.trials));
    cell(tr, fmt(j.best_gflops, 2)); cell(tr, j.searcher + "/" + j.cost_model); cell(tr, String(j.priority)); cell(tr, j.owner);
    const act = cell(tr, "");
    if (j.state === "queued" || j.state === "running") {
      const b = document.createElement("button"); b.textContent = "cancel";
      b.onclick = async (ev) => { ev.stopPropagation(); try { await api("/v1/jobs/" + j.id, {method: "DELETE"}); say(""); } catch (e) { say(e.message); } refreshJobs(true); };
      act.appendChild(b);
    }
    tr.onclick = () => { selected = j.id; refreshJobs(true); refreshCurve(); };
    body.appendChild(tr);
  }
  if (!selected && data.jobs.length) { selected = data.jobs[0].id; }
}
function svgEl(name, attrs, text) {
  const e = document.createElementNS("http://www.w3.org/2000/svg", name);
  for (const k in attrs) e.setAttribute(k, attrs[k]); if (text !== undefined) e.textContent = text; return e;
}
async function refreshCurve() {
  if (!selected) return;
  const [c, j] = await Promise.all([api("/v1/jobs/" + selected + "/curve"), api("/v1/jobs/" + selected)]);
  $("detail").textContent = JSON.stringify(j, null, 1); $("detail").className = "";
  $("curve-title").textContent = c.workload_name + " (job " + c.job_id.slice(0, 8) + ")";
  const svg = $("curve"); svg.textContent = "";
  const W = 520, H = 260, L = 50, B = 30, T = 10, R = 10;
  const pts = c.points; const xmax = Math.max(1, pts.length ? pts[pts.length - 1][0] : 1);
  const ymax = Math.max(1e-9, ...pts.map(p => p[1]));
  svg.appendChild(svgEl("line", {x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: "#999"}));
  svg.appendChild(svgEl("line", {x1: L, y1: T, x2: L, y2: H - B, stroke: "#999"}));
  svg.appendChild(svgEl("text", {x: W / 2, y: H - 6, "font-size": 11, "text-anchor": "middle"}, "measurements"));
  svg.appendChild(svgEl("text", {x: 4, y: T + 10, "font-size": 11}, fmt(ymax, 2)));
  svg.appendChild(svgEl("text", {x: 4, y: H - B, "font-size": 11}, "0"));
  svg.appendChild(svgEl("text", {x: W - R, y: H - B + 14, "font-size": 11, "text-anchor": "end"}, String(xmax)));
  if (pts.length) {
    const d = pts.map((p, i) => (i ? "L" : "M") + (L + (W - L - R) * p[0] / xmax).toFixed(1) + "," + (H - B - (H - B - T) * p[1] / ymax).toFixed(1)).join(" ");
    svg.appendChild(svgEl("path", {d: d, fill: "none", stroke: "#3b82f6", "stroke-width": 2, id: "curve-path"}));
  }
}
async function showSource(key, target) {
  const s = await api("/v1/schedules/" + key + "?target=" + encodeURIComponent(target));
  $("source").className = "";
  $("source").textContent = "# " + s.workload_name + "  " + fmt(s.median_ms, 4) + " ms  " + fmt(s.gflops, 2) + " GFLOP/s on " + s.target +
    (s.verified ? "  (verified, " : "  (UNVERIFIED, ") + s.n_valid + " valid measurements here" +
    (s.n_imported ? ", " + s.n_imported + " imported" : "") + ")" +
    "\n\n" + (s.primitives || "") + "\n\n" + (s.source ? s.source.code : "(no source for this target)");
}
async function refreshBest() {
  const data = await api("/v1/workloads");
  const sig = JSON.stringify(data.workloads);
  if (sig === bestShown) return;
  bestShown = sig;
  const body = $("best").tBodies[0]; body.textContent = "";
  for (const w of data.workloads) for (const b of w.best) {
    const tr = document.createElement("tr"); tr.className = "best";
    cell(tr, w.name); cell(tr, JSON.stringify(w.args)); cell(tr, b.target); cell(tr, fmt(b.median_ms, 4)); cell(tr, fmt(b.gflops, 2));
    const btn = document.createElement("button"); btn.textContent = "source"; btn.onclick = () => showSource(w.key, b.target).catch(e => say(e.message));
    cell(tr, "").appendChild(btn); body.appendChild(tr);
  }
}
// A user action's message (a refused cancel) stays until the next action; the poller only
// shows and clears its own errors, so a 401 does not vanish on the next tick.
let pollError = false;
function say(text) { pollError = false; $("msg").textContent = text; }
async function tick() {
  try { const h = await api("/healthz"); $("health").textContent = h.status + " · " + h.executor + " · " + h.records + " records";
        await refreshJobs(); await refreshCurve(); await refreshBest();
        if (pollError) { $("msg").textContent = ""; pollError = false; } }
  catch (e) { $("msg").textContent = e.message; pollError = true; }
}
tick(); setInterval(tick, 2000);
</script></body></html>
"""
