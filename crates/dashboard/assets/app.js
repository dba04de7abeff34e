// The dashboard's page: it asks the server for one page of clusters, the selected
// cluster's tree, the charts' samples and the infrastructure, and asks again when the
// server's event stream says something changed. Everything user-supplied is set as text,
// never as markup.
"use strict";

const state = { q: "", offset: 0, limit: 50, total: 0, selected: null };
const COLORS = ["#326ce5", "#1a7f37", "#c62828", "#a66a00", "#7b3fbf", "#00838f", "#d81b60", "#5d4037"];

function $(id) { return document.getElementById(id); }

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v; else node.setAttribute(k, v);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function badge(text) { return el("span", { class: "badge " + text }, text); }

async function getJSON(url) {
  // Bounded: a request that never answers would hold its refresh, and every later one, back.
  const resp = await fetch(url, { credentials: "same-origin", cache: "no-store", signal: AbortSignal.timeout(30000) });
  if (resp.status === 401) {
    $("live").textContent = "signed out";
    $("live").className = "badge down";
    throw new Error("signed out");
  }
  if (!resp.ok) throw new Error(url + " answered " + resp.status);
  return resp.json();
}

function age(created) {
  if (!created) return "";
  const s = Math.max(0, (Date.now() - Date.parse(created)) / 1000);
  if (s < 120) return Math.round(s) + "s";
  if (s < 7200) return Math.round(s / 60) + "m";
  if (s < 172800) return Math.round(s / 3600) + "h";
  return Math.round(s / 86400) + "d";
}

// ---- the list ----

async function loadClusters() {
  const params = new URLSearchParams({ q: state.q, offset: state.offset, limit: state.limit });
  const page = await getJSON("/api/clusters?" + params);
  state.total = page.total;
  const body = $("clusters").tBodies[0];
  body.replaceChildren(...page.items.map(row));
  const last = Math.min(page.offset + page.items.length, page.total);
  $("range").textContent = page.total ? `${page.offset + 1}–${last} of ${page.total}` : "no clusters";
  $("prev").disabled = state.offset === 0;
  $("next").disabled = last >= page.total;
}

function row(c) {
  const key = c.namespace + "/" + c.name;
  const tr = el("tr", { "data-cluster": key },
    el("td", {}, c.namespace), el("td", {}, c.name), el("td", {}, badge(c.phase)),
    el("td", {}, c.available ? badge(c.available) : ""),
    el("td", {}, `${c.controlPlane.ready}/${c.controlPlane.desired}`),
    el("td", {}, `${c.workers.ready}/${c.workers.desired}`),
    el("td", {}, c.version || ""), el("td", {}, age(c.created)));
  if (state.selected === key) tr.classList.add("selected");
  tr.addEventListener("click", () => select(c.namespace, c.name));
  return tr;
}

async function loadOverview() {
  const o = await getJSON("/api/overview");
  const counts = Object.entries(o.phases);
  const total = counts.reduce((n, [, v]) => n + v, 0);
  $("total").textContent = total + (total === 1 ? " cluster" : " clusters");
  $("phases").replaceChildren(...counts.map(([phase, n]) => {
    const b = badge(phase);
    b.textContent = `${phase} ${n}`;
    return b;
  }));
}

// ---- the tree ----

function select(ns, name) {
  state.selected = ns + "/" + name;
  for (const tr of $("clusters").tBodies[0].rows) {
    tr.classList.toggle("selected", tr.dataset.cluster === state.selected);
  }
  loadTree().catch(report);
}

async function loadTree() {
  if (!state.selected) return;
  const [ns, name] = state.selected.split("/");
  $("tree-title").textContent = "Cluster " + state.selected;
  let tree;
  try {
    tree = await getJSON(`/api/clusters/${encodeURIComponent(ns)}/${encodeURIComponent(name)}`);
  } catch (e) {
    $("tree").replaceChildren(el("p", { class: "muted" }, "This cluster is gone."));
    $("events").replaceChildren();
    return;
  }
  $("tree").replaceChildren(el("ul", { class: "tree" }, treeNode(tree.root)));
  $("events").replaceChildren(...tree.events.map((e) => el("li", {},
    el("span", { class: "muted" }, age(e.lastSeen) + " ago"), " ", eventType(e.type),
    el("strong", {}, e.reason), " ", el("span", { class: "kind" }, e.object),
    e.count > 1 ? el("span", { class: "muted" }, ` ×${e.count}`) : null,
    el("div", { class: "message" }, e.message))));
}

// Cluster API's conditions whose normal state is False (v1beta2's negative polarity).
const NEGATIVE = new Set(["Paused", "Deleting", "RollingOut", "ScalingUp", "ScalingDown",
  "Remediating", "Updating", "Stalled"]);

// A condition's colour: green when as it should be, red when not, grey for a negative
// condition that is False (nothing is happening), amber for Unknown or a True negative one.
function conditionClass(c) {
  if (c.status === "Unknown") return "Unknown";
  if (NEGATIVE.has(c.type)) return c.status === "True" ? "Unknown" : "quiet";
  return c.status;
}

function eventType(type) {
  const b = badge(type === "Warning" ? "False" : "quiet");
  b.textContent = type;
  return b;
}

function treeNode(n) {
  const conditions = el("span", { class: "conditions" }, ...n.conditions.map((c) => {
    const b = badge(conditionClass(c));
    b.textContent = c.type;
    b.title = [c.status, c.reason, c.message].filter(Boolean).join(": ");
    return b;
  }));
  const li = el("li", { "data-kind": n.kind },
    el("span", { class: "kind" }, n.kind), el("strong", {}, n.name),
    n.phase ? el("span", {}, " ", badge(n.phase)) : null,
    n.note ? el("span", { class: "note" }, n.note) : null,
    n.conditions.length ? conditions : null);
  if (n.children.length) li.append(el("ul", { class: "tree" }, ...n.children.map(treeNode)));
  return li;
}

// ---- the charts ----

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  return node;
}

function format(v) {
  if (v >= 1000) return (v / 1000).toFixed(1) + "k";
  if (v >= 10 || v === 0) return v.toFixed(0);
  return v.toFixed(2);
}

// Draws lines (`series`: [{name, points: [[ms, value]]}]) with axes and a legend.
function lineChart(target, series, empty) {
  const W = 420, H = 200, L = 40, R = 10, T = 10, B = 40;
  const points = series.flatMap((s) => s.points);
  target.replaceChildren();
  if (!points.length) {
    const t = svg("text", { x: W / 2, y: H / 2, "text-anchor": "middle" });
    t.textContent = empty || "no samples yet";
    target.append(t);
    return;
  }
  const t0 = Math.min(...points.map((p) => p[0])), t1 = Math.max(...points.map((p) => p[0]));
  const top = Math.max(1e-9, ...points.map((p) => p[1]));
  const x = (t) => L + (t1 === t0 ? 0 : (t - t0) / (t1 - t0)) * (W - L - R);
  const y = (v) => T + (1 - v / top) * (H - T - B);
  target.append(svg("line", { class: "axis", x1: L, y1: y(0), x2: W - R, y2: y(0) }));
  target.append(svg("line", { class: "axis", x1: L, y1: T, x2: L, y2: y(0) }));
  for (const [v, at] of [[top, T + 4], [0, y(0)]]) {
    const label = svg("text", { x: L - 4, y: at, "text-anchor": "end" });
    label.textContent = format(v);
    target.append(label);
  }
  const span = svg("text", { x: W - R, y: y(0) + 12, "text-anchor": "end" });
  span.textContent = `last ${Math.max(1, Math.round((t1 - t0) / 60000))} min`;
  target.append(span);
  series.slice(0, COLORS.length).forEach((s, i) => {
    const d = s.points.map((p, j) => `${j ? "L" : "M"}${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join("");
    target.append(svg("path", { class: "series", d, stroke: COLORS[i] }));
    const key = svg("text", { x: L + (i % 4) * 95, y: H - 14 + Math.floor(i / 4) * 11 });
    key.textContent = s.name.length > 15 ? s.name.slice(0, 14) + "…" : s.name;
    // Through the CSSOM: the page's policy forbids style attributes.
    key.style.fill = COLORS[i];
    target.append(key);
  });
}

function duration(seconds) {
  if (seconds >= 3600) return seconds / 3600 + "h";
  if (seconds >= 60) return seconds / 60 + "m";
  return seconds + "s";
}

// Bars of the clusters that became Available within each bucket of the latest sample.
function barChart(target, buckets) {
  const W = 420, H = 200, L = 30, B = 30, T = 10;
  target.replaceChildren();
  const counts = buckets.map(([le, n], i) => [le, n - (i ? buckets[i - 1][1] : 0)]);
  if (!counts.length || !buckets[buckets.length - 1][1]) {
    const t = svg("text", { x: W / 2, y: H / 2, "text-anchor": "middle" });
    t.textContent = "no cluster has become Available yet";
    target.append(t);
    return;
  }
  const top = Math.max(1, ...counts.map((c) => c[1]));
  const w = (W - L) / counts.length;
  counts.forEach(([le, n], i) => {
    const h = (n / top) * (H - T - B);
    target.append(svg("rect", { x: L + i * w + 2, y: H - B - h, width: w - 4, height: h, fill: COLORS[0] }));
    const label = svg("text", { x: L + i * w + w / 2, y: H - B + 12, "text-anchor": "middle" });
    label.textContent = le === "+Inf" ? "more" : duration(Number(le));
    target.append(label);
    if (n) {
      const count = svg("text", { x: L + i * w + w / 2, y: H - B - h - 2, "text-anchor": "middle" });
      count.textContent = n;
      target.append(count);
    }
  });
}

// Per-second rates between consecutive samples of `pick(sample)` (a number).
function rate(samples, pick) {
  const out = [];
  for (let i = 1; i < samples.length; i++) {
    const dt = (samples[i].at - samples[i - 1].at) / 1000;
    const dv = pick(samples[i]) - pick(samples[i - 1]);
    if (dt > 0) out.push([samples[i].at, Math.max(0, dv / dt)]);
  }
  return out;
}

function meanLatency(samples, which) {
  const out = [];
  for (let i = 1; i < samples.length; i++) {
    const a = samples[i - 1][which], b = samples[i][which];
    const n = b.count - a.count;
    out.push([samples[i].at, n > 0 ? ((b.seconds - a.seconds) / n) * 1000 : 0]);
  }
  return out;
}

// The keys of a per-label map across the samples, busiest last-sample first.
function keys(samples, field) {
  const last = samples[samples.length - 1][field];
  const all = new Set(samples.flatMap((s) => Object.keys(s[field])));
  return [...all].sort((a, b) => (last[b] || 0) - (last[a] || 0));
}

function perLabel(samples, field, asRate) {
  if (!samples.length) return [];
  return keys(samples, field).map((k) => ({
    name: k || "(none)",
    points: asRate ? rate(samples, (s) => s[field][k] || 0) : samples.map((s) => [s.at, s[field][k] || 0]),
  }));
}

async function loadSeries() {
  const samples = await getJSON("/api/series");
  lineChart($("chart-phases"), perLabel(samples, "clusters", false));
  barChart($("chart-available"), samples.length ? samples[samples.length - 1].timeToAvailable : []);
  lineChart($("chart-requests"), [
    { name: "management plane", points: rate(samples, (s) => s.plane.total) },
    { name: "workload clusters", points: rate(samples, (s) => s.workload.total) },
  ]);
  lineChart($("chart-latency"), [
    { name: "management plane", points: meanLatency(samples, "plane") },
    { name: "workload clusters", points: meanLatency(samples, "workload") },
  ]);
  lineChart($("chart-reconciles"), perLabel(samples, "reconciles", true));
  lineChart($("chart-errors"), perLabel(samples, "errors", true));
  lineChart($("chart-queues"), perLabel(samples, "queueDepth", false),
    samples.length ? "no controller runs here" : "");
}

// ---- the infrastructure ----

// Fault injection rules in force on a vCenter: "2 failing, 1 delaying", or "none".
function faults(byEffect) {
  const parts = [];
  if (byEffect.fault) parts.push(`${byEffect.fault} failing`);
  if (byEffect.delay) parts.push(`${byEffect.delay} delaying`);
  return parts.join(", ") || "none";
}

async function loadInfra() {
  const infra = await getJSON("/api/infrastructure");
  const ready = (r) => (r ? badge(r) : "");
  $("vcenters").tBodies[0].replaceChildren(...infra.vcenters.map((v) => el("tr", {},
    el("td", {}, v.namespace + "/" + v.name), el("td", {}, ready(v.ready)), el("td", {}, v.host),
    el("td", {}, v.vms.poweredOn || 0), el("td", {}, v.vms.poweredOff || 0), el("td", {}, v.vms.suspended || 0),
    el("td", {}, faults(v.faults)))));
  $("vmgroups").tBodies[0].replaceChildren(...infra.vm_groups.map((g) => el("tr", {},
    el("td", {}, g.namespace + "/" + g.name), el("td", {}, g.ready), el("td", {}, g.desired))));
  $("sipclusters").tBodies[0].replaceChildren(...infra.sip_clusters.map((s) => el("tr", {},
    el("td", {}, s.namespace + "/" + s.name), el("td", {}, ready(s.ready)),
    el("td", { class: "message" }, s.hosts.map(([role, hosts]) => `${role}: ${hosts.join(", ") || "none"}`).join("; ")))));
}

// ---- wiring ----

function report(e) {
  if (e && e.message !== "signed out") console.warn(e);
}

// At most one refresh of each kind in flight, and one more queued behind it.
function coalesced(fn) {
  let running = null, again = false;
  return function run() {
    if (running) { again = true; return running; }
    running = fn().catch(report).finally(() => {
      running = null;
      if (again) { again = false; run(); }
    });
    return running;
  };
}

const refreshClusters = coalesced(() => Promise.all([loadClusters(), loadOverview(), loadTree()]));
const refreshSamples = coalesced(() => Promise.all([loadSeries(), loadInfra()]));

function listen() {
  const events = new EventSource("/api/stream");
  events.addEventListener("open", () => { $("live").textContent = "live"; $("live").className = "badge live"; });
  events.addEventListener("error", () => {
    if ($("live").textContent !== "signed out") { $("live").textContent = "reconnecting"; $("live").className = "badge down"; }
  });
  events.addEventListener("clusters", refreshClusters);
  events.addEventListener("sample", refreshSamples);
}

function start() {
  let typing = null;
  $("search").addEventListener("input", (e) => {
    clearTimeout(typing);
    typing = setTimeout(() => { state.q = e.target.value; state.offset = 0; refreshClusters(); }, 250);
  });
  $("prev").addEventListener("click", () => { state.offset = Math.max(0, state.offset - state.limit); refreshClusters(); });
  $("next").addEventListener("click", () => { state.offset += state.limit; refreshClusters(); });
  refreshClusters();
  refreshSamples();
  listen();
}

document.addEventListener("DOMContentLoaded", start);
