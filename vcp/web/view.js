// The web view: GET /view every second, drawn as a picture and tables.
// Read-only; text goes in with textContent, never as markup.
"use strict";

const SVGNS = "http://www.w3.org/2000/svg";

function el(tag, attrs, text) {
  const e = tag.startsWith("svg:") ? document.createElementNS(SVGNS, tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function fmt(n, digits) {
  if (n >= 1e6) return (n / 1e6).toFixed(1) + "M";
  if (n >= 1e3) return (n / 1e3).toFixed(1) + "k";
  return n.toFixed(digits || 0);
}

function stateOf(e) {
  if (!e.alive) return "dead";
  if (e.drained) return "drained";
  return "alive";
}

function fill(tbody, rows) {
  tbody.replaceChildren(...rows);
}

function row(cells, attrs) {
  const tr = el("tr", attrs);
  for (const c of cells) {
    const td = el("td", c.cls ? { class: c.cls } : {}, c.text);
    tr.append(td);
  }
  return tr;
}

// compactLBs: past this many LBs the picture draws each as a small box
// in columns, with its ports counted rather than drawn one by one.
const compactLBs = 6;
// groupsCollapsed: past this many ports the ports table shows each LB's
// ports only when its group is opened or the filter names them.
const groupsCollapsed = 64;

function draw(v) {
  const svg = document.getElementById("picture");
  svg.replaceChildren();
  const lbs = v.elements.filter((e) => e.role === "lb");
  if (lbs.length > compactLBs) return drawCompact(v, svg, lbs);
  const routers = v.elements.filter((e) => e.role === "router");
  const vcps = v.elements.filter((e) => e.role === "vcp");
  const sw = { x: 400, y: 160, w: 100, h: 60 };
  const col = (list, x, top, gap) => list.map((e, i) => ({ e, x, y: top + i * gap, w: 150, h: 54 }));
  const lbBoxes = col(lbs, 110, 40, Math.max(70, 300 / Math.max(lbs.length, 1)));
  const rBoxes = col(routers, 620, 20, Math.max(64, 340 / Math.max(routers.length, 1)));
  const vBoxes = vcps.map((e, i) => ({ e, x: 330 + i * 170, y: 330, w: 150, h: 54 }));
  const line = (a, b, down) => svg.append(el("svg:line", { class: "link" + (down ? " down" : ""), x1: a.x + a.w / 2, y1: a.y + a.h / 2, x2: b.x + b.w / 2, y2: b.y + b.h / 2 }));
  for (const b of [...lbBoxes, ...rBoxes, ...vBoxes]) line(b, sw, !b.e.alive);
  svg.append(el("svg:rect", { class: "box switch", x: sw.x, y: sw.y, width: sw.w, height: sw.h, rx: 6 }));
  svg.append(el("svg:text", { x: sw.x + 12, y: sw.y + 34 }, "switch"));
  const box = (b, lines, extra) => {
    const g = el("svg:g", Object.assign({ "data-name": b.e.name, "data-role": b.e.role }, extra || {}));
    g.append(el("svg:rect", { class: "box " + stateOf(b.e), x: b.x, y: b.y, width: b.w, height: b.h, rx: 6 }));
    lines.forEach((t, i) => g.append(el("svg:text", { x: b.x + 8, y: b.y + 17 + i * 16 }, t)));
    svg.append(g);
  };
  for (const b of lbBoxes) {
    const ext = (b.e.ports || []).filter((p) => p.role === "external");
    box(b, [b.e.name + (b.e.alive ? "" : " (dead)"), "table gen " + b.e.installed, fmt(ext.reduce((s, p) => s + p.rx_pps, 0)) + " pps in"]);
    ext.forEach((p, i) => {
      const y = b.y + 12 + i * 18;
      svg.append(el("svg:line", { class: "link" + (p.up ? "" : " down"), x1: 20, y1: y, x2: b.x, y2: y }));
      svg.append(el("svg:text", { x: 4, y: y - 3, class: p.up ? "up" : "down" }, p.name.split("/")[1] + " " + fmt(p.rx_pps) + "pps"));
    });
  }
  for (const b of rBoxes) {
    box(b, [b.e.name + (b.e.alive ? "" : " (dead)"), (b.e.share * 100).toFixed(1) + "% of the traffic", b.e.installed + " routes"], { "data-share": b.e.share.toFixed(4) });
  }
  for (const b of vBoxes) box(b, [b.e.name, b.e.active ? "active" : "standby"]);
}

// drawCompact draws a large router: its LBs in columns of 16 small boxes,
// each with its external ports up of all, beside the switch, back-ends
// and VCPs.
function drawCompact(v, svg, lbs) {
  const perCol = 16, rowH = 24;
  const cols = Math.ceil(lbs.length / perCol);
  const height = Math.max(420, 40 + perCol * rowH);
  svg.setAttribute("viewBox", "0 0 " + Math.max(900, 560 + cols * 130) + " " + height);
  const x0 = 10 + cols * 130;
  const sw = { x: x0 + 60, y: height / 2 - 30, w: 100, h: 60 };
  const routers = v.elements.filter((e) => e.role === "router");
  const vcps = v.elements.filter((e) => e.role === "vcp");
  lbs.forEach((e, i) => {
    const ext = (e.ports || []).filter((p) => p.role === "external");
    const up = ext.filter((p) => p.up).length;
    const x = 10 + Math.floor(i / perCol) * 130, y = 20 + (i % perCol) * rowH;
    const g = el("svg:g", { "data-name": e.name, "data-role": e.role, "data-ports": ext.length, "data-up": up });
    g.append(el("svg:rect", { class: "box " + stateOf(e), x, y, width: 120, height: rowH - 4, rx: 4 }));
    g.append(el("svg:text", { x: x + 6, y: y + 14 }, e.name + "  " + up + "/" + ext.length + " up"));
    svg.append(g);
  });
  svg.append(el("svg:rect", { class: "box switch", x: sw.x, y: sw.y, width: sw.w, height: sw.h, rx: 6 }));
  svg.append(el("svg:text", { x: sw.x + 12, y: sw.y + 34 }, "switch"));
  svg.append(el("svg:line", { class: "link", x1: x0 - 10, y1: sw.y + 30, x2: sw.x, y2: sw.y + 30 }));
  const gap = Math.min(64, (height - 40) / Math.max(routers.length, 1));
  routers.forEach((e, i) => {
    const y = 20 + i * gap;
    svg.append(el("svg:line", { class: "link" + (e.alive ? "" : " down"), x1: sw.x + sw.w, y1: sw.y + 30, x2: sw.x + 200, y2: y + 20 }));
    const g = el("svg:g", { "data-name": e.name, "data-role": e.role, "data-share": e.share.toFixed(4) });
    g.append(el("svg:rect", { class: "box " + stateOf(e), x: sw.x + 200, y, width: 170, height: Math.min(40, gap - 4), rx: 6 }));
    g.append(el("svg:text", { x: sw.x + 208, y: y + 16 }, e.name + "  " + (e.share * 100).toFixed(1) + "%, " + e.installed + " routes"));
    svg.append(g);
  });
  vcps.forEach((e, i) => {
    const g = el("svg:g", { "data-name": e.name, "data-role": e.role });
    g.append(el("svg:rect", { class: "box alive", x: sw.x - 40 + i * 100, y: sw.y + 100, width: 90, height: 40, rx: 6 }));
    g.append(el("svg:text", { x: sw.x - 32 + i * 100, y: sw.y + 124 }, e.name + (e.active ? " active" : "")));
    svg.append(g);
  });
}

// filter is the ports table's filter, from the box or the page's
// ?ports=... (a link to a view of some ports).
function portsFilter() {
  return document.getElementById("port-filter").value.trim().toLowerCase();
}

// groups the LBs whose ports the operator opened.
const opened = new Set();

// portRows are the ports table's rows: a group row for each LB (its
// ports, up, packets in) and, when shown, its ports' rows. A port shows
// when it matches the filter (its name, LB or state), or, with no filter,
// when its group is open or the router is small.
function portRows(v) {
  const filter = portsFilter();
  const lbs = v.elements.filter((e) => e.role === "lb");
  const all = lbs.flatMap((e) => e.ports || []);
  const collapsed = all.length > groupsCollapsed;
  const rows = [];
  for (const lb of lbs) {
    const ports = lb.ports || [];
    const shown = ports.filter((p) => filter ? (p.name + " " + p.role + " " + (p.up ? "up" : "down")).toLowerCase().includes(filter)
      : !collapsed || opened.has(lb.name));
    if (filter && shown.length === 0) continue;
    const ext = ports.filter((p) => p.role === "external");
    const head = row([{ text: (shown.length > 0 ? "▾ " : "▸ ") + lb.name + (lb.alive ? "" : " (dead)") },
      { text: ext.length + " external" }, { text: ext.filter((p) => p.up).length + " up", cls: lb.alive ? "up" : "down" },
      { text: fmt(ext.reduce((s, p) => s + p.rx_pps, 0)), cls: "num" }, { text: (ext.reduce((s, p) => s + p.rx_bps, 0) / 1e6).toFixed(2), cls: "num" }],
      { class: "lbgroup", "data-lb": lb.name });
    head.addEventListener("click", () => { opened.has(lb.name) ? opened.delete(lb.name) : opened.add(lb.name); render(last); });
    rows.push(head);
    for (const p of shown) {
      rows.push(row([{ text: p.name }, { text: p.role }, { text: p.up ? "up" : "down", cls: p.up ? "up" : "down" },
        { text: fmt(p.rx_pps), cls: "num" }, { text: (p.rx_bps / 1e6).toFixed(2), cls: "num" }], { class: "port", "data-name": p.name }));
    }
  }
  document.getElementById("ports-count").textContent = all.length + " ports on " + lbs.length + " LBs";
  return rows;
}

let last = null;

function render(v) {
  last = v;
  document.getElementById("vcp").textContent = "— " + v.name + (v.active ? " (active VCP)" : " (standby VCP)");
  document.getElementById("status").textContent = "updated " + new Date(v.at).toLocaleTimeString();
  draw(v);
  const routers = v.elements.filter((e) => e.role === "router");
  fill(document.querySelector("#backends tbody"), routers.map((e) =>
    row([{ text: e.name }, { text: stateOf(e), cls: stateOf(e) }, { text: (e.share * 100).toFixed(1) + "%", cls: "num" },
      { text: fmt(e.rx_pps), cls: "num" }, { text: String(e.installed), cls: "num" }],
      { class: "backend", "data-name": e.name, "data-share": e.share.toFixed(4) })));
  fill(document.querySelector("#ports tbody"), portRows(v));
  fill(document.querySelector("#routes tbody"), Object.keys(v.routes).sort().map((k) =>
    row([{ text: k }, { text: String(v.routes[k]), cls: "num" }])));
  fill(document.querySelector("#sessions tbody"), (v.sessions || []).map((s) =>
    row([{ text: s.name }, { text: s.proto }, { text: s.info || s.state, cls: s.state === "up" ? "up" : "down" }, { text: String(s.routes), cls: "num" }])));
  // The LBs' sFlow samples, scaled by their rate, over the last minute.
  fill(document.querySelector("#talkers tbody"), (v.talkers || []).map((k) =>
    row([{ text: k.src }, { text: k.dst }, { text: k.proto }, { text: fmt(8 * k.bytes / Math.max(k.seconds, 1) / 1e6, 1), cls: "num" },
      { text: fmt(k.frames / Math.max(k.seconds, 1)), cls: "num" }], { class: "talker" })));
  // msr ctl trace's last walks: each stage's element and verdict.
  fill(document.querySelector("#traces tbody"), (v.traces || []).map((w) =>
    row([{ text: w.packet }, { text: w.stages.map((e) => e.element + " " + (e.verdict === "sent" ? (e.decision || "sent") : e.verdict + " " + (e.reason || ""))).join(" → ") },
      { text: w.ends }], { class: "trace" })));
  const ol = document.getElementById("events");
  ol.replaceChildren(...(v.events || []).map((e) => {
    const li = el("li");
    li.append(el("time", {}, new Date(e.at).toLocaleTimeString()), document.createTextNode(e.text));
    return li;
  }));
}

async function refresh() {
  try {
    const r = await fetch("/view", { cache: "no-store" });
    if (!r.ok) throw new Error(r.status + " " + r.statusText);
    render(await r.json());
  } catch (err) {
    document.getElementById("status").textContent = "no answer from the VCP: " + err.message;
  }
}

const filterBox = document.getElementById("port-filter");
filterBox.value = new URLSearchParams(location.search).get("ports") || "";
filterBox.addEventListener("input", () => { if (last) render(last); });
refresh();
setInterval(refresh, 1000);
