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

function draw(v) {
  const svg = document.getElementById("picture");
  svg.replaceChildren();
  const lbs = v.elements.filter((e) => e.role === "lb");
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

function render(v) {
  document.getElementById("vcp").textContent = "— " + v.name + (v.active ? " (active VCP)" : " (standby VCP)");
  document.getElementById("status").textContent = "updated " + new Date(v.at).toLocaleTimeString();
  draw(v);
  const routers = v.elements.filter((e) => e.role === "router");
  fill(document.querySelector("#backends tbody"), routers.map((e) =>
    row([{ text: e.name }, { text: stateOf(e), cls: stateOf(e) }, { text: (e.share * 100).toFixed(1) + "%", cls: "num" },
      { text: fmt(e.rx_pps), cls: "num" }, { text: String(e.installed), cls: "num" }],
      { class: "backend", "data-name": e.name, "data-share": e.share.toFixed(4) })));
  const ports = v.elements.filter((e) => e.role === "lb").flatMap((e) => e.ports || []);
  fill(document.querySelector("#ports tbody"), ports.map((p) =>
    row([{ text: p.name }, { text: p.role }, { text: p.up ? "up" : "down", cls: p.up ? "up" : "down" },
      { text: fmt(p.rx_pps), cls: "num" }, { text: (p.rx_bps / 1e6).toFixed(2), cls: "num" }], { class: "port", "data-name": p.name })));
  fill(document.querySelector("#routes tbody"), Object.keys(v.routes).sort().map((k) =>
    row([{ text: k }, { text: String(v.routes[k]), cls: "num" }])));
  fill(document.querySelector("#sessions tbody"), (v.sessions || []).map((s) =>
    row([{ text: s.name }, { text: s.proto }, { text: s.info || s.state, cls: s.state === "up" ? "up" : "down" }, { text: String(s.routes), cls: "num" }])));
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

refresh();
setInterval(refresh, 1000);
