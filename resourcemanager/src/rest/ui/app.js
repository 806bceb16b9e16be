// Spindle web UI: a single-page application over the RM's public REST API
// (/ws/v1/cluster/...). Plain JavaScript, no framework, no network access beyond the RM.
// Hash routes: #/overview, #/queues, #/apps?state=&queue=&user=&tag=&sort=&page=,
// #/app/{id}, #/nodes?state=&page=, #/node/{id}. The page shown refreshes every
// REFRESH_MS by fetching again and replacing its content (no full reload).
"use strict";

const REFRESH_MS = 5000;
const PAGE_SIZE = 50;
const GPU = "yarn.io/gpu";
const GPU_MODEL = "nm.yarn.io/gpu-model";
const API = "/ws/v1/cluster";

// ------------------------------------------------------------------ helpers

function esc(v) {
  return String(v === undefined || v === null ? "" : v)
    .replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;").replace(/'/g, "&#39;");
}

// YARN's lists are an array, a single object, or null.
function list(v) {
  if (v === undefined || v === null) return [];
  return Array.isArray(v) ? v : [v];
}

// A resource value of a ResourceInfo ({memory, vCores, resourceInformations}).
function res(ri, name) {
  if (!ri) return 0;
  if (name === "memory-mb") return ri.memory || 0;
  if (name === "vcores") return ri.vCores || 0;
  const infos = list(ri.resourceInformations && ri.resourceInformations.resourceInformation);
  const i = infos.find((x) => x.name === name);
  return i ? i.value || 0 : 0;
}

function fmtMb(mb) {
  if (mb >= 1024 * 1024) return (mb / 1024 / 1024).toFixed(1) + " TB";
  if (mb >= 1024) return (mb / 1024).toFixed(1) + " GB";
  return mb + " MB";
}

function fmtTime(ms) {
  if (!ms || ms <= 0) return "";
  return new Date(ms).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

function fmtDuration(ms) {
  if (!ms || ms < 0) return "";
  const s = Math.floor(ms / 1000);
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = s % 60;
  return h > 0 ? `${h}h ${m}m` : m > 0 ? `${m}m ${r}s` : `${r}s`;
}

function state(s) {
  return `<span class="state ${esc(s)}">${esc(s)}</span>`;
}

function card(label, value, id) {
  return `<div class="card"><div class="label">${esc(label)}</div>` +
    `<div class="value" id="${esc(id)}">${esc(value)}</div></div>`;
}

// A usage bar: used against a maximum, with the guarantee marked.
function bar(used, guarantee, max) {
  const scale = Math.max(max, guarantee, used, 1);
  const u = Math.min(100, (used * 100) / scale);
  const g = Math.min(100, (guarantee * 100) / scale);
  const over = used > guarantee ? " over" : "";
  return `<span class="bar" title="used ${used} / guarantee ${guarantee} / max ${max}">` +
    `<span class="used${over}" style="width:${u.toFixed(1)}%"></span>` +
    `<span class="guarantee" style="left:${g.toFixed(1)}%"></span></span>`;
}

// Token authentication (the RM's hadoop.http.authentication.type=token): the user's token,
// kept in this tab's sessionStorage, goes with every read as a bearer token. The first 401
// asks for it once (`spindle token -issue` or `-fetch` prints one); the read is then retried.
const TOKEN_KEY = "spindle.token";
let tokenAsked = false;

async function getJson(path, retried) {
  const used = sessionStorage.getItem(TOKEN_KEY);
  const headers = { Accept: "application/json" };
  if (used) headers.Authorization = `Bearer ${used}`;
  const r = await fetch(path, { headers, cache: "no-store" });
  if (r.status === 401 && !retried) {
    if (sessionStorage.getItem(TOKEN_KEY) === used && !tokenAsked) {
      tokenAsked = true;
      const t = window.prompt("This ResourceManager requires a token. Paste yours " +
        "(`spindle token -issue -user YOU` by an operator, or `spindle token -fetch`):");
      if (t && t.trim()) sessionStorage.setItem(TOKEN_KEY, t.trim());
    }
    if (sessionStorage.getItem(TOKEN_KEY) !== used) return getJson(path, true);
  }
  if (!r.ok) {
    let msg = `${r.status} ${r.statusText}`;
    try {
      const b = await r.json();
      if (b && b.RemoteException) msg = b.RemoteException.message;
    } catch (_) { /* not JSON */ }
    throw new Error(`${path}: ${msg}`);
  }
  return { body: await r.json(), total: Number(r.headers.get("X-Total-Count") || "0") };
}

async function get(path) {
  return (await getJson(path)).body;
}

function query(params) {
  const q = Object.entries(params).filter(([, v]) => v !== undefined && v !== null && v !== "");
  return q.length ? "?" + q.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join("&") : "";
}

// The current route: {page, arg, params}.
function route() {
  const h = decodeURIComponent((location.hash || "#/overview").slice(1));
  const [path, qs] = h.split("?");
  const parts = path.split("/").filter((p) => p);
  const params = {};
  new URLSearchParams(qs || "").forEach((v, k) => { params[k] = v; });
  return { page: parts[0] || "overview", arg: parts.slice(1).join("/"), params };
}

function go(page, params) {
  location.hash = "#/" + page + query(params);
}

function pager(total, page, size, target) {
  const pages = Math.max(1, Math.ceil(total / size));
  return `<div class="pager" id="pager" data-total="${total}" data-pages="${pages}" data-page="${page}">` +
    `<button data-page="0" ${page <= 0 ? "disabled" : ""}>&laquo; First</button>` +
    `<button data-page="${page - 1}" ${page <= 0 ? "disabled" : ""}>&lsaquo; Prev</button>` +
    `<span>Page <b id="page-number">${page + 1}</b> of <b id="page-count">${pages}</b> ` +
    `(<span id="${esc(target)}-total">${total}</span> in all)</span>` +
    `<button data-page="${page + 1}" ${page + 1 >= pages ? "disabled" : ""}>Next &rsaquo;</button>` +
    `<button data-page="${pages - 1}" ${page + 1 >= pages ? "disabled" : ""}>Last &raquo;</button></div>`;
}

function wirePager(el, onPage) {
  el.querySelectorAll("#pager button").forEach((b) => {
    b.addEventListener("click", () => onPage(Number(b.dataset.page)));
  });
}

// Fields a view does not show by name, as key/value rows (new REST fields show up here).
function otherFields(obj, shown) {
  const rows = Object.entries(obj || {})
    .filter(([k, v]) => !shown.includes(k) && v !== null && v !== "" &&
      (typeof v !== "object" || Object.keys(v).length > 0))
    .map(([k, v]) => `<tr><th>${esc(k)}</th><td class="wrap small">` +
      `${esc(typeof v === "object" ? JSON.stringify(v, null, 1) : v)}</td></tr>`);
  return rows.length ? `<table class="kv">${rows.join("")}</table>` : "";
}

// ------------------------------------------------------------------ pages

const pages = {};

// Overview: GPUs (total, used, free, reserved; by model), memory, vcores, nodes and
// applications by state. Three calls, each independent of the cluster's size in rows.
pages.overview = async function () {
  const [m, summary, stats] = await Promise.all([
    get(`${API}/metrics`),
    get(`${API}/nodes-summary${query({ groupBy: GPU_MODEL })}`),
    get(`${API}/appstatistics`),
  ]);
  const c = m.clusterMetrics;
  const total = c.totalClusterResourcesAcrossPartition;
  const used = c.totalUsedResourcesAcrossPartition;
  const reserved = c.totalReservedResourcesAcrossPartition;
  const gTotal = res(total, GPU), gUsed = res(used, GPU), gRes = res(reserved, GPU);
  let h = `<h1>Cluster overview</h1><h2>GPUs</h2><div class="cards">` +
    card("GPUs total", gTotal, "gpu-total") + card("GPUs used", gUsed, "gpu-used") +
    card("GPUs free", Math.max(0, gTotal - gUsed), "gpu-free") +
    card("GPUs reserved", gRes, "gpu-reserved") + `</div>`;
  const groups = list(summary.nodesSummary && summary.nodesSummary.group);
  h += `<h2>GPUs by model</h2><table id="gpu-models"><tr><th>Model</th><th class="num">Nodes</th>` +
    `<th class="num">GPUs total</th><th class="num">used</th><th class="num">free</th><th>Usage</th></tr>`;
  for (const g of groups) {
    const t = res(g.totalResource, GPU), u = res(g.usedResource, GPU);
    h += `<tr data-model="${esc(g.value)}"><td>${esc(g.value || "(no GPU model)")}</td>` +
      `<td class="num">${g.nodes}</td><td class="num model-total">${t}</td>` +
      `<td class="num model-used">${u}</td><td class="num model-free">${Math.max(0, t - u)}</td>` +
      `<td>${bar(u, t, t)}</td></tr>`;
  }
  h += `</table><h2>Memory and vcores</h2><div class="cards">` +
    card("Memory total", fmtMb(c.totalMB), "mem-total") +
    card("Memory used", fmtMb(c.allocatedMB), "mem-used") +
    card("Memory free", fmtMb(c.availableMB), "mem-free") +
    card("VCores total", c.totalVirtualCores, "vcores-total") +
    card("VCores used", c.allocatedVirtualCores, "vcores-used") +
    card("Containers", c.containersAllocated, "containers") +
    card("Pending containers", c.containersPending, "containers-pending") + `</div>`;
  const nodeStates = [["RUNNING", c.activeNodes], ["UNHEALTHY", c.unhealthyNodes],
    ["DECOMMISSIONING", c.decommissioningNodes], ["DECOMMISSIONED", c.decommissionedNodes],
    ["LOST", c.lostNodes], ["REBOOTED", c.rebootedNodes], ["SHUTDOWN", c.shutdownNodes]];
  h += `<h2>Nodes by state</h2><table id="nodes-by-state"><tr>` +
    nodeStates.map(([s]) => `<th>${state(s)}</th>`).join("") + `</tr><tr>` +
    nodeStates.map(([s, n]) => `<td class="num"><a href="#/nodes?state=${s}">${n}</a></td>`).join("") +
    `</tr></table>`;
  const items = list(stats.appStatInfo && stats.appStatInfo.statItem);
  h += `<h2>Applications by state</h2><table id="apps-by-state"><tr>` +
    items.map((i) => `<th>${state(i.state)}</th>`).join("") + `</tr><tr>` +
    items.map((i) => `<td class="num"><a href="#/apps?state=${esc(i.state)}">${i.count}</a></td>`).join("") +
    `</tr></table>`;
  return h;
};

// Queues: the tree with usage against guarantee and maximum per resource (GPUs too),
// pending and reserved, user and AM limits; click a parent to fold it.
const folded = new Set();
pages.queues = async function () {
  const s = await get(`${API}/scheduler`);
  const root = s.scheduler.schedulerInfo;
  const resources = ["memory-mb", "vcores", GPU];
  let h = `<h1>Queues</h1><p class="muted small">Bars: used against the maximum; the dark mark is ` +
    `the guarantee (effective minimum). Click &#9662; to fold a parent.</p>` +
    `<table id="queue-tree"><tr><th>Queue</th><th>State</th><th class="num">Apps</th>` +
    `<th class="num">Pending apps</th>` +
    resources.map((r) => `<th>${esc(r)}: used / guarantee / max</th>`).join("") +
    `<th>Pending</th><th>Reserved</th><th>User limit</th><th>AM used / limit</th>` +
    `<th>Fair share (decayed usage, factor)</th></tr>`;
  const rows = [];
  const walk = (q, depth, path) => {
    const children = list(q.queues && q.queues.queue);
    const p = q.queuePath || path;
    const part = list(q.resources && q.resources.resourceUsagesByPartition)
      .find((x) => !x.partitionName) || {};
    const cells = resources.map((r) => {
      const u = res(q.resourcesUsed || part.used, r);
      const g = res(q.minEffectiveCapacity, r), mx = res(q.maxEffectiveCapacity, r);
      const fmt = (v) => (r === "memory-mb" ? fmtMb(v) : v);
      return `<td class="res" data-resource="${esc(r)}" data-used="${u}" data-guarantee="${g}" ` +
        `data-max="${mx}">${bar(u, g, mx)} <span class="small">${fmt(u)} / ${fmt(g)} / ${fmt(mx)}</span></td>`;
    }).join("");
    const fold = children.length
      ? `<span class="fold" data-queue="${esc(p)}">${folded.has(p) ? "&#9656;" : "&#9662;"}</span>`
      : `<span class="fold"></span>`;
    const short = (ri) => `${fmtMb(res(ri, "memory-mb"))}, ${res(ri, "vcores")} vc, ${res(ri, GPU)} GPU`;
    const userLimit = q.userLimit !== undefined
      ? `${q.userLimit}% &times; ${q.userLimitFactor}` +
        list(q.users && q.users.user).map((u) => `<div class="small">${esc(u.username)}: ` +
          `${short(u.resourcesUsed)} of ${short(u.userResourceLimit)}</div>`).join("")
      : "";
    const am = q.AMResourceLimit ? `${short(q.usedAMResource)} / ${short(q.AMResourceLimit)}` : "";
    const fs = q.fairShare || {};
    const fair = `<span class="fs-usage">${Number(fs.decayedUsage || 0).toFixed(1)}</span>` +
      list(fs.users).map((u) => `<div class="small fs-user" data-user="${esc(u.username)}">` +
        `${esc(u.username)}: ${Number(u.decayedUsage).toFixed(1)} (raw ${Number(u.rawUsage).toFixed(1)}), ` +
        `share ${u.weight}, factor ${Number(u.fairShareFactor).toFixed(3)}</div>`).join("");
    rows.push(`<tr data-queue="${esc(p)}"><td class="tree-name" style="padding-left:${0.5 + depth * 1.4}em">` +
      `${fold}<a href="#/apps?queue=${esc(q.queueName)}">${esc(q.queueName)}</a></td>` +
      `<td>${state(q.state || "RUNNING")}</td><td class="num">${q.numApplications || 0}</td>` +
      `<td class="num">${q.numPendingApplications || 0}</td>${cells}` +
      `<td class="small">${q.pendingContainers || 0} containers; ${short(part.pending)}</td>` +
      `<td class="small">${q.reservedContainers || 0} containers; ${short(part.reserved)}</td>` +
      `<td class="small">${userLimit}</td><td class="small">${am}</td>` +
      `<td class="small fair-share">${fair}</td></tr>`);
    if (!folded.has(p)) children.forEach((c) => walk(c, depth + 1, p + "." + c.queueName));
  };
  list(root.queues && root.queues.queue).forEach((q) => walk(q, 0, "root." + q.queueName));
  return h + rows.join("") + `</table>`;
};
pages.queues.wire = function (el) {
  el.querySelectorAll(".fold[data-queue]").forEach((f) => f.addEventListener("click", () => {
    const q = f.dataset.queue;
    if (folded.has(q)) folded.delete(q); else folded.add(q);
    refresh();
  }));
};

// Applications: filters (state, queue, user, tag), sorting and paging, all on the server.
const APP_STATES = ["", "NEW", "NEW_SAVING", "SUBMITTED", "ACCEPTED", "RUNNING", "FINISHED",
  "FAILED", "KILLED"];
const APP_COLUMNS = [["id", "ID"], ["user", "User"], ["name", "Name"], ["queue", "Queue"],
  ["state", "State"], [null, "FinalStatus"], ["priority", "Priority"], ["startedTime", "Started"],
  ["elapsedTime", "Elapsed"], [null, "Containers"], [null, "GPU-hours"], [null, "Progress"]];
pages.apps = async function (r) {
  const p = r.params;
  const page = Math.max(0, Number(p.page || 0));
  const sort = p.sort || "-id";
  const { body, total } = await getJson(`${API}/apps` + query({
    states: p.state, queue: p.queue, user: p.user, applicationTags: p.tag, sort,
    offset: page * PAGE_SIZE, limit: PAGE_SIZE, deSelects: "resourceRequests",
  }));
  const apps = list(body.apps && body.apps.app);
  let h = `<h1>Applications</h1><form class="filters" id="app-filters">` +
    `<label>State<select name="state">${APP_STATES.map((s) =>
      `<option ${s === (p.state || "") ? "selected" : ""} value="${s}">${s || "any"}</option>`).join("")}` +
    `</select></label>` +
    ["queue", "user", "tag"].map((k) => `<label>${k[0].toUpperCase() + k.slice(1)}` +
      `<input name="${k}" value="${esc(p[k] || "")}"></label>`).join("") +
    `<button type="submit">Filter</button></form>` + pager(total, page, PAGE_SIZE, "apps") +
    `<table id="apps-table"><tr>` + APP_COLUMNS.map(([k, l]) => {
      if (!k) return `<th>${l}</th>`;
      const cls = sort === k ? "sorted-asc" : sort === "-" + k ? "sorted-desc" : "";
      return `<th class="sortable ${cls}" data-sort="${k}">${l}</th>`;
    }).join("") + `</tr>`;
  for (const a of apps) {
    h += `<tr class="app-row" data-id="${esc(a.id)}"><td><a href="#/app/${esc(a.id)}">${esc(a.id)}</a></td>` +
      `<td>${esc(a.user)}</td><td>${esc(a.name)}</td><td>${esc(a.queue)}</td><td>${state(a.state)}</td>` +
      `<td>${esc(a.finalStatus)}</td><td class="num">${a.priority}</td><td>${fmtTime(a.startedTime)}</td>` +
      `<td>${fmtDuration(a.elapsedTime)}</td>` +
      `<td class="num">${a.runningContainers >= 0 ? a.runningContainers : ""}</td>` +
      `<td class="num">${appGpus(a)}</td><td class="num">${Math.round(a.progress || 0)}%</td></tr>`;
  }
  return h + `</table>` + (apps.length ? "" : `<p class="muted">No applications match.</p>`);
};
// resourceSecondsMap ({"entry":[{"key","value"}]}) as {type: seconds}.
function secondsMap(m) {
  const out = {};
  list(m && m.entry).forEach((e) => { out[e.key] = e.value; });
  return out;
}
function appGpus(a) {
  if (!a.resourceSecondsMap) return "";
  const s = secondsMap(a.resourceSecondsMap)[GPU];
  return s ? (s / 3600).toFixed(2) : "0";
}
pages.apps.wire = function (el, r) {
  const p = Object.assign({}, r.params);
  el.querySelector("#app-filters").addEventListener("submit", (e) => {
    e.preventDefault();
    const f = new FormData(e.target);
    go("apps", { state: f.get("state"), queue: f.get("queue"), user: f.get("user"),
      tag: f.get("tag"), sort: p.sort });
  });
  el.querySelectorAll("th[data-sort]").forEach((th) => th.addEventListener("click", () => {
    const k = th.dataset.sort;
    p.sort = (p.sort || "-id") === "-" + k ? k : "-" + k;
    p.page = 0;
    go("apps", p);
  }));
  wirePager(el, (n) => { p.page = n; go("apps", p); });
};
// The filter form keeps what the user is typing: a refresh redraws only the data.
pages.apps.keepsFocus = true;

// One application: its fields, gangs (why pending, reservation, members, preemptions),
// attempts and their containers (node, GPUs, state, times, logs).
pages.app = async function (r) {
  const id = r.arg;
  const [{ app: a }, atts] = await Promise.all([
    get(`${API}/apps/${encodeURIComponent(id)}`),
    get(`${API}/apps/${encodeURIComponent(id)}/appattempts`),
  ]);
  const attempts = list(atts.appAttempts && atts.appAttempts.appAttempt);
  const recent = attempts.slice(-3);
  const conts = await Promise.all(recent.map((t) =>
    get(`${API}/apps/${encodeURIComponent(id)}/appattempts/${encodeURIComponent(t.appAttemptId)}/containers`)
      .then((b) => list(b.containers && b.containers.container)).catch(() => [])));
  let h = `<h1>Application ${esc(a.id)}</h1><table class="kv" id="app-summary">` +
    [["Name", esc(a.name)], ["User", esc(a.user)], ["Queue", esc(a.queue)], ["Type", esc(a.applicationType)],
      ["Tags", esc(a.applicationTags)], ["State", state(a.state)], ["Final status", esc(a.finalStatus)],
      ["Priority", a.priority], ["Started", fmtTime(a.startedTime)], ["Finished", fmtTime(a.finishedTime)],
      ["Elapsed", fmtDuration(a.elapsedTime)], ["Progress", `${Math.round(a.progress || 0)}%`],
      ["Running containers", a.runningContainers], ["Allocated", `${fmtMb(a.allocatedMB)}, ${a.allocatedVCores} vcores`],
      ["GPU utilization", a.gpuUtilization === undefined || a.gpuUtilization === null ? "" : `${Number(a.gpuUtilization).toFixed(0)}%`],
      ["Idle GPU time", a.idleGpuSeconds === undefined || a.idleGpuSeconds === null ? "" : `${(a.idleGpuSeconds / 3600).toFixed(2)} GPU-hours`],
      ["Aggregate allocation", `${a.memorySeconds} MB-seconds, ${a.vcoreSeconds} vcore-seconds`],
      ["AM logs", a.amContainerLogs ? `<a href="${esc(a.amContainerLogs)}">AM container logs</a>` : ""]]
      .filter(([k, v]) => !(k.includes("GPU") && v === ""))
      .map(([k, v]) => `<tr><th>${k}</th><td>${v === undefined ? "" : v}</td></tr>`).join("") + `</table>`;
  h += `<h2>Diagnostics</h2><pre class="diag wrap" id="app-diagnostics">${esc(a.diagnostics || "")}</pre>`;
  const gangs = list(a.gangs);
  if (gangs.length) {
    h += `<h2>Gangs</h2>`;
    const amContainers = new Set(attempts.map((t) => t.containerId));
    for (const g of gangs) {
      // Live containers other than the AM's (members of the app's gangs).
      const members = conts.flat()
        .filter((c) => c.containerState !== "COMPLETE" && !amContainers.has(c.containerId));
      h += `<div class="gang ${esc(g.state)}" data-gang="${esc(g.id)}"><b>Gang ${esc(g.id)}</b> ${state(g.state)} ` +
        `<span class="small">size ${g.size}${g.currentSize ? `, running ${g.currentSize}` : ""}` +
        `${g.resizes ? `, resized ${g.resizes} times` : ""}</span>` +
        (g.diagnostics ? `<div class="small muted">Why pending</div>` +
          `<pre class="diag wrap gang-reason">${esc(g.diagnostics)}</pre>` : "") +
        `<div class="small">Reserved nodes: ${list(g.reservedNodes).map((n) =>
          `<a href="#/node/${esc(n)}">${esc(n)}</a>`).join(", ") || "none"}</div>` +
        `<div class="small">Live members: ${members.length}` +
        (members.length ? ` on ${[...new Set(members.map((c) => c.nodeId))].map((n) =>
          `<a href="#/node/${esc(n)}">${esc(n)}</a>`).join(", ")}` : "") + `</div>` +
        (list(g.failedContainers).length ? `<div class="small">Failed members: ` +
          `${list(g.failedContainers).map(esc).join(", ")}</div>` : "") + `</div>`;
    }
  }
  const pre = a.preemption;
  if (a.numNonAMContainerPreempted || a.numAMContainerPreempted || (pre && Object.keys(pre).length)) {
    h += `<h2>Preemption</h2><table class="kv" id="app-preemption">` +
      `<tr><th>Containers preempted</th><td>${a.numNonAMContainerPreempted || 0} (AM: ${a.numAMContainerPreempted || 0})</td></tr>` +
      `<tr><th>Preempted resource</th><td>${fmtMb(a.preemptedResourceMB || 0)}, ${a.preemptedResourceVCores || 0} vcores</td></tr>` +
      `<tr><th>Lost work</th><td>${a.preemptedMemorySeconds || 0} MB-seconds, ${a.preemptedVcoreSeconds || 0} vcore-seconds</td></tr>` +
      `</table>` + otherFields(pre, []);
  }
  const fp = a.fairSharePriority;
  if (fp) {
    const u = fp.user || {};
    h += `<h2>Fair-share priority</h2><table class="kv" id="app-fair-share">` +
      `<tr><th>Position</th><td>${fp.position} of ${fp.waitingApplications} waiting in ${esc(fp.queue)}` +
      `${fp.overdue ? " (waited past the bound)" : ""}</td></tr>` +
      `<tr><th>User's fair share</th><td>factor ${Number(u.fairShareFactor).toFixed(3)}, share ${u.weight}, ` +
      `decayed usage ${Number(u.decayedUsage).toFixed(1)} (raw ${Number(u.rawUsage).toFixed(1)})</td></tr>` +
      `<tr><th>Age</th><td>${fmtDuration(fp.ageMs)}${fp.maxWaitMs ? ` (bound ${fmtDuration(fp.maxWaitMs)})` : ""}</td></tr>` +
      `<tr><th>Attained service</th><td>${Number(fp.attainedServiceSeconds).toFixed(1)} GPU-seconds</td></tr></table>`;
  }
  if (a.resourceSecondsMap || a.preemptedResourceSecondsMap) {
    const secs = (m) => Object.entries(secondsMap(m))
      .map(([k, v]) => `${esc(k)}: ${esc(v)} s` + (k === GPU ? ` (${(v / 3600).toFixed(2)} GPU-hours)` : ""))
      .join(", ");
    h += `<h2>Resource-seconds</h2><table class="kv" id="app-resource-seconds">` +
      `<tr><th>Used</th><td class="wrap">${secs(a.resourceSecondsMap)}</td></tr>` +
      `<tr><th>Preempted</th><td class="wrap">${secs(a.preemptedResourceSecondsMap)}</td></tr></table>`;
  }
  h += `<h2>Attempts</h2><table id="app-attempts"><tr><th>Attempt</th><th>State</th><th>Started</th>` +
    `<th>Finished</th><th>AM container</th><th>Node</th><th>Logs</th><th>Diagnostics</th></tr>` +
    attempts.map((t) => `<tr><td>${esc(t.appAttemptId)}</td><td>${state(t.appAttemptState)}</td>` +
      `<td>${fmtTime(t.startTime)}</td><td>${fmtTime(t.finishedTime)}</td><td>${esc(t.containerId)}</td>` +
      `<td>${t.nodeId ? `<a href="#/node/${esc(t.nodeId)}">${esc(t.nodeId)}</a>` : ""}</td>` +
      `<td>${t.logsLink ? `<a href="${esc(t.logsLink)}">logs</a>` : ""}</td>` +
      `<td class="wrap small">${esc(t.diagnosticsInfo)}</td></tr>`).join("") + `</table>`;
  const all = conts.flat();
  h += `<h2>Containers</h2><table id="app-containers"><tr><th>Container</th><th>Node</th>` +
    `<th class="num">GPUs</th><th>Memory</th><th class="num">VCores</th><th>State</th><th>Started</th>` +
    `<th>Finished</th><th>Exit</th><th>Logs</th><th>Diagnostics</th></tr>` +
    all.map((c) => `<tr><td>${esc(c.containerId)}</td>` +
      `<td><a href="#/node/${esc(c.nodeId || c.assignedNodeId)}">${esc(c.nodeId || c.assignedNodeId)}</a></td>` +
      `<td class="num">${(c.allocatedResources && c.allocatedResources[GPU]) || 0}</td>` +
      `<td>${fmtMb(c.allocatedMB)}</td><td class="num">${c.allocatedVCores}</td>` +
      `<td>${state(c.containerState)}</td><td>${fmtTime(c.startedTime)}</td><td>${fmtTime(c.finishedTime)}</td>` +
      `<td>${c.containerState === "COMPLETE" ? c.containerExitStatus : ""}</td>` +
      `<td>${c.logUrl ? `<a href="${esc(c.logUrl)}">logs</a>` : ""}</td>` +
      `<td class="wrap small">${esc(c.diagnosticsInfo)}</td></tr>`).join("") + `</table>` +
    (attempts.length > recent.length ? `<p class="muted small">Containers of the last ${recent.length} attempts.</p>` : "");
  h += `<h2>Other fields</h2>` + otherFields(a, ["id", "name", "user", "queue", "applicationType",
    "applicationTags", "state", "finalStatus", "priority", "startedTime", "finishedTime", "elapsedTime",
    "progress", "runningContainers", "allocatedMB", "allocatedVCores", "memorySeconds", "vcoreSeconds",
    "amContainerLogs", "diagnostics", "gangs", "preemption", "resourceSecondsMap",
    "preemptedResourceSecondsMap", "resourceRequests", "timeouts", "gpuUtilization", "idleGpuSeconds",
    "fairSharePriority"]);
  return h;
};

// Nodes: paged on the server; GPUs used and free per node.
const NODE_STATES = ["", "NEW", "RUNNING", "UNHEALTHY", "DECOMMISSIONING", "DECOMMISSIONED", "LOST",
  "REBOOTED", "SHUTDOWN"];
function attr(n, name) {
  const infos = list(n.nodeAttributesInfo && n.nodeAttributesInfo.nodeAttributeInfo);
  const i = infos.find((x) => (x.prefix ? x.prefix + "/" : "") + x.name === name);
  return i ? i.value : "";
}
pages.nodes = async function (r) {
  const p = r.params;
  const page = Math.max(0, Number(p.page || 0));
  const { body, total } = await getJson(`${API}/nodes` + query({
    states: p.state, offset: page * PAGE_SIZE, limit: PAGE_SIZE,
  }));
  const nodes = list(body.nodes && body.nodes.node);
  let h = `<h1>Nodes</h1><form class="filters" id="node-filters"><label>State<select name="state">` +
    NODE_STATES.map((s) => `<option ${s === (p.state || "") ? "selected" : ""} value="${s}">${s || "any"}</option>`).join("") +
    `</select></label><button type="submit">Filter</button></form>` + pager(total, page, PAGE_SIZE, "nodes") +
    `<table id="nodes-table"><tr><th>Node</th><th>Rack</th><th>State</th><th>GPU model</th>` +
    `<th class="num">GPUs used</th><th class="num">GPUs free</th><th class="num">GPUs total</th>` +
    `<th>Memory used / total</th><th>VCores used / total</th><th class="num">Containers</th>` +
    `<th>Labels</th><th>Health</th></tr>`;
  for (const n of nodes) {
    const t = res(n.totalResource, GPU), u = res(n.usedResource, GPU);
    h += `<tr class="node-row" data-id="${esc(n.id)}"><td><a href="#/node/${esc(n.id)}">${esc(n.id)}</a></td>` +
      `<td>${esc(n.rack)}</td><td>${state(n.state)}</td><td>${esc(attr(n, GPU_MODEL))}</td>` +
      `<td class="num">${u}</td><td class="num">${Math.max(0, t - u)}</td><td class="num">${t}</td>` +
      `<td>${bar(n.usedMemoryMB, n.usedMemoryMB + n.availMemoryMB, n.usedMemoryMB + n.availMemoryMB)} ` +
      `${fmtMb(n.usedMemoryMB)} / ${fmtMb(n.usedMemoryMB + n.availMemoryMB)}</td>` +
      `<td>${n.usedVirtualCores} / ${n.usedVirtualCores + n.availableVirtualCores}</td>` +
      `<td class="num">${n.numContainers}</td><td>${esc(list(n.nodeLabels).join(","))}</td>` +
      `<td class="wrap small">${esc(n.healthReport)}</td></tr>`;
  }
  return h + `</table>`;
};
pages.nodes.wire = function (el, r) {
  const p = Object.assign({}, r.params);
  el.querySelector("#node-filters").addEventListener("submit", (e) => {
    e.preventDefault();
    go("nodes", { state: new FormData(e.target).get("state") });
  });
  wirePager(el, (n) => { p.page = n; go("nodes", p); });
};

// One node: its resources (GPUs total, used, free), attributes, and each GPU where the
// node's REST view carries per-device records.
pages.node = async function (r) {
  const { node: n } = await get(`${API}/nodes/${encodeURIComponent(r.arg)}`);
  const t = res(n.totalResource, GPU), u = res(n.usedResource, GPU);
  let h = `<h1>Node ${esc(n.id)}</h1><div class="cards">` +
    card("GPUs total", t, "node-gpu-total") + card("GPUs used", u, "node-gpu-used") +
    card("GPUs free", Math.max(0, t - u), "node-gpu-free") +
    card("GPU model", attr(n, GPU_MODEL) || "-", "node-gpu-model") + `</div>`;
  h += `<h2>Resources</h2><table id="node-resources"><tr><th>Resource</th><th class="num">Used</th>` +
    `<th class="num">Available</th><th class="num">Total</th><th>Usage</th></tr>`;
  const names = ["memory-mb", "vcores"].concat(list(n.totalResource && n.totalResource.resourceInformations &&
    n.totalResource.resourceInformations.resourceInformation).map((x) => x.name)
    .filter((x) => x !== "memory-mb" && x !== "vcores"));
  for (const name of names) {
    const tt = res(n.totalResource, name), uu = res(n.usedResource, name);
    h += `<tr><td>${esc(name)}</td><td class="num">${uu}</td><td class="num">${res(n.availableResource, name)}</td>` +
      `<td class="num">${tt}</td><td>${bar(uu, tt, tt)}</td></tr>`;
  }
  h += `</table><table class="kv" id="node-info">` +
    [["State", state(n.state)], ["Rack", esc(n.rack)], ["HTTP address", n.nodeHTTPAddress ?
      `<a href="http://${esc(n.nodeHTTPAddress)}/ws/v1/node/resources/${GPU}">${esc(n.nodeHTTPAddress)}</a> ` +
      `<span class="small muted">(the NM's GPU devices)</span>` : ""],
    ["Containers", n.numContainers], ["Version", esc(n.version)], ["Labels", esc(list(n.nodeLabels).join(","))],
    ["Last health update", fmtTime(n.lastHealthUpdate)], ["Health", `<span class="wrap">${esc(n.healthReport)}</span>`],
    ["Attributes", list(n.nodeAttributesInfo && n.nodeAttributesInfo.nodeAttributeInfo)
      .map((x) => `${esc((x.prefix ? x.prefix + "/" : "") + x.name)}=${esc(x.value)}`).join(", ")]]
      .map(([k, v]) => `<tr><th>${k}</th><td>${v === undefined ? "" : v}</td></tr>`).join("") + `</table>`;
  // Per-device records (model, minor, assigned container, utilization, memory, temperature)
  // where the node's view carries them: every array of objects is shown as a table.
  for (const [k, v] of Object.entries(n)) {
    const rows = list(v && typeof v === "object" && !Array.isArray(v) && Object.keys(v).length === 1
      ? Object.values(v)[0] : v);
    if (!Array.isArray(v) && !(v && typeof v === "object" && Object.keys(v).length === 1)) continue;
    if (!rows.length || typeof rows[0] !== "object" || ["nodeAttributesInfo", "allocationTags",
      "totalResource", "usedResource", "availableResource", "resourceUtilization"].includes(k)) continue;
    const cols = [...new Set(rows.flatMap((x) => Object.keys(x)))];
    h += `<h2>${esc(k)}</h2><table class="node-devices" data-field="${esc(k)}"><tr>` +
      cols.map((c) => `<th>${esc(c)}</th>`).join("") + `</tr>` +
      rows.map((x) => `<tr>${cols.map((c) => `<td>${esc(typeof x[c] === "object" ? JSON.stringify(x[c]) : x[c])}</td>`).join("")}</tr>`).join("") +
      `</table>`;
  }
  h += await nmGpus(n);
  const util = otherFields(n.resourceUtilization, []);
  if (util) h += `<h2>Resource utilization</h2>` + util;
  return h;
};

// Each GPU of a node as its NM reports it (YARN's NMGpuResourceInfo at
// /ws/v1/node/resources/yarn.io%2Fgpu: model, minor, utilization, memory, temperature, and
// which container holds it). The NM is another origin: where the browser may not read it
// (no CORS header, or the NM is unreachable from the browser) the page says so and links it.
async function nmGpus(n) {
  if (!n.nodeHTTPAddress || res(n.totalResource, GPU) <= 0) return "";
  const url = `http://${n.nodeHTTPAddress}/ws/v1/node/resources/${encodeURIComponent(GPU)}`;
  let info;
  try {
    const ctl = new AbortController();
    const t = setTimeout(() => ctl.abort(), 2000);
    const r = await fetch(url, { signal: ctl.signal, cache: "no-store" });
    clearTimeout(t);
    if (!r.ok) throw new Error(String(r.status));
    info = await r.json();
  } catch (_) {
    return `<h2>GPUs</h2><p class="muted small" id="node-gpus-unavailable">The NM's per-GPU view ` +
      `could not be read from this page; open <a href="${esc(url)}">${esc(url)}</a>.</p>`;
  }
  const gpus = list(info.gpuDeviceInformation && info.gpuDeviceInformation.gpus);
  const holder = {};
  list(info.assignedGpuDevices).forEach((a) => { holder[a.minorNumber] = a.containerId; });
  const num = (v, unit) => (v === undefined || v === null ? "" : `${v}${unit}`);
  return `<h2>GPUs</h2><table id="node-gpus"><tr><th class="num">Minor</th><th>Model</th><th>UUID</th>` +
    `<th>Container</th><th class="num">Utilization</th><th>Memory used / total</th>` +
    `<th class="num">Temperature</th></tr>` +
    gpus.map((g) => `<tr><td class="num">${g.minorNumber}</td><td>${esc(g.productName)}</td>` +
      `<td class="small">${esc(g.uuid)}</td><td>${esc(holder[g.minorNumber] || "free")}</td>` +
      `<td class="num">${num(g.gpuUtilizations && g.gpuUtilizations.overallGpuUtilization, "%")}</td>` +
      `<td>${num(g.gpuMemoryUsage && g.gpuMemoryUsage.usedMemoryMiB, "")} / ` +
      `${num(g.gpuMemoryUsage && g.gpuMemoryUsage.totalMemoryMiB, " MiB")}</td>` +
      `<td class="num">${num(g.temperature && g.temperature.currentGpuTemp, " &deg;C")}</td></tr>`).join("") +
    `</table>`;
}

// ------------------------------------------------------------------ router and refresh

let timer = null;
let generation = 0;
let lastRoute = "";

async function refresh() {
  const r = route();
  const render = pages[r.page] || pages.overview;
  const gen = ++generation;
  const main = document.getElementById("main");
  const status = document.getElementById("status");
  document.querySelectorAll("#nav a[data-route]").forEach((a) => {
    const active = a.dataset.route === r.page || (a.dataset.route + "s") === r.page ||
      a.dataset.route === r.page + "s";
    a.classList.toggle("active", active);
  });
  const key = location.hash;
  const t0 = performance.now();
  try {
    const html = await render(r);
    if (gen !== generation) return; // a newer navigation won
    // Keep the user's typing: do not redraw a form that has focus on a timed refresh.
    const focused = document.activeElement;
    if (key === lastRoute && render.keepsFocus && focused && main.contains(focused) &&
        (focused.tagName === "INPUT" || focused.tagName === "SELECT")) {
      const tmp = document.createElement("div");
      tmp.innerHTML = html;
      const fresh = tmp.querySelector("table");
      const old = main.querySelector("table");
      if (fresh && old) old.replaceWith(fresh);
    } else {
      main.innerHTML = html;
    }
    if (render.wire) render.wire(main, r);
    lastRoute = key;
    // The time from the first fetch to the DOM updated: what one refresh of this page costs.
    const ms = Math.round(performance.now() - t0);
    main.dataset.renderMs = String(ms);
    status.textContent = `Updated ${new Date().toLocaleTimeString()} (${ms} ms)`;
    status.classList.remove("error");
    document.title = `${r.page[0].toUpperCase() + r.page.slice(1)} - Spindle`;
    main.dataset.loaded = String(Number(main.dataset.loaded || "0") + 1);
  } catch (e) {
    if (gen !== generation) return;
    status.textContent = String(e.message || e);
    status.classList.add("error");
    if (key !== lastRoute) main.innerHTML = `<p class="wrap" id="error">${esc(e.message || e)}</p>`;
  }
}

function schedule() {
  if (timer) clearInterval(timer);
  timer = setInterval(() => { if (!document.hidden) refresh(); }, REFRESH_MS);
}

window.addEventListener("hashchange", () => { refresh(); schedule(); });
refresh();
schedule();
