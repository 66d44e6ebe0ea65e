// The graph drawing of the exporter's HTML report: the module hierarchy as nested boxes with
// the dataflow between them, expandable down to single ops.
//
// The layout is our own and runs in the page, so expanding a box only lays out again what is
// visible (a 32-layer LLaMA starts as a chain of 32 layer boxes, not 3,000 ops). Each open
// module lays out its direct items (child modules and its own ops) in layers: an item sits one
// layer below the lowest item it reads from; edges between items in different modules count
// in their lowest common open module. Data: graph_data.py.
"use strict";

(function () {
  const OP_H = 22, MOD_H = 36, HEAD = 22, PAD = 10, GAP_X = 14, GAP_Y = 26, CHAR = 6.6;
  const BUDGET = 70; // items visible at first
  const FAN = 4; // edges from one box to more than this many draw faintly
  const FIND_MAX = 50; // matches a search opens and marks

  function esc(text) {
    return String(text).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  }

  const OWN_OPS = 6; // a module with submodules and more ops of its own shows them as one box

  class GraphView {
    constructor(host, data) {
      this.host = host;
      this.mods = data.modules.map((m, i) => ({ id: i, path: m[0], cls: m[1], parent: m[2], kids: [], ops: [], total: 0, first: Infinity }));
      this.nodes = data.nodes.map((n, i) => ({ id: i, name: n[0], label: n[1], mod: n[2], args: n[3], shape: n[4], kind: n[5], target: n[6] }));
      this.groupOwnOps();
      for (const m of this.mods) {
        if (m.parent >= 0) this.mods[m.parent].kids.push(m.id);
        m.chain = m.parent >= 0 ? this.mods[m.parent].chain.concat([m.id]) : [m.id]; // parents come first
        const parent = m.parent >= 0 ? this.mods[m.parent] : null;
        if (m.own) m.name = "own ops";
        else m.name = parent && parent.path ? m.path.slice(parent.path.length + 1) : m.path || "(model)";
      }
      for (const n of this.nodes) {
        this.mods[n.mod].ops.push(n.id);
        for (const id of this.mods[n.mod].chain) {
          const m = this.mods[id];
          if (n.kind === "op") m.total++;
          m.first = Math.min(m.first, n.id);
        }
      }
      this.expanded = new Set();
      this.reset();
      this.hits = new Set();
      host.addEventListener("click", (event) => this.onClick(event));
      const search = host.querySelector(".graph-find");
      if (search) search.addEventListener("change", () => this.find(search.value));
    }

    // Mark every op whose name, op or target holds the text, and every module whose path or
    // class does (the first FIND_MAX), and open the modules down to them (a found module too).
    find(text) {
      const query = text.trim().toLowerCase();
      this.hits = new Set();
      if (query) {
        const matches = (...fields) => fields.some((f) => f && String(f).toLowerCase().includes(query));
        for (const n of this.nodes) {
          if (this.hits.size >= FIND_MAX) break;
          if (matches(n.name, n.label, n.target)) {
            this.hits.add("n" + n.id);
            for (const id of this.mods[n.mod].chain) this.expanded.add(id);
          }
        }
        for (const m of this.mods) {
          if (this.hits.size >= FIND_MAX) break;
          if (!m.own && m.id && matches(m.path, m.cls)) {
            this.hits.add("m" + m.id);
            for (const id of m.chain) this.expanded.add(id); // open, to show what it holds
          }
        }
      }
      this.render();
      const first = this.host.querySelector(".hit");
      if (first && first.scrollIntoView) first.scrollIntoView({ block: "center" });
    }

    // LlamaModel's 27 mask and position ops would crowd out its layers: put them in a box of
    // their own, opened like a module.
    groupOwnOps() {
      const hasKids = new Set(this.mods.map((m) => m.parent));
      const own = new Map();
      for (const n of this.nodes) {
        if (n.kind !== "op" || !hasKids.has(n.mod)) continue;
        if (!own.has(n.mod)) own.set(n.mod, []);
        own.get(n.mod).push(n);
      }
      for (const [id, ops] of own) {
        if (ops.length <= OWN_OPS) continue;
        const m = this.mods[id];
        const box = { id: this.mods.length, path: m.path, cls: m.cls, parent: id, kids: [], ops: [], total: 0, first: Infinity, own: true };
        this.mods.push(box);
        for (const n of ops) n.mod = box.id;
      }
    }

    reset() {
      // Open modules breadth first while what shows stays within the budget.
      this.expanded = new Set([0]);
      let visible = this.mods[0].kids.length + this.mods[0].ops.length;
      // A stack of numbered layers opens together or not at all.
      const queue = this.stacks(this.mods[0].kids);
      while (queue.length) {
        const group = queue.shift().map((id) => this.mods[id]);
        const more = group.reduce((sum, m) => sum + m.kids.length + m.ops.length - 1, 0);
        if (visible + more > BUDGET) continue;
        for (const m of group) {
          this.expanded.add(m.id);
          queue.push(...this.stacks(m.kids));
        }
        visible += more;
      }
    }

    stacks(ids) {
      const numbered = ids.filter((id) => /^\d+$/.test(this.mods[id].path.split(".").pop()) && !this.mods[id].own);
      const rest = ids.filter((id) => !numbered.includes(id)).map((id) => [id]);
      return numbered.length ? rest.concat([numbered]) : rest;
    }

    expandAll() {
      this.expanded = new Set(this.mods.map((m) => m.id));
    }

    onClick(event) {
      const target = event.target.closest("[data-mod]");
      if (target) {
        const id = Number(target.getAttribute("data-mod"));
        if (this.expanded.has(id)) this.expanded.delete(id);
        else this.expanded.add(id);
        if (id === 0) this.expanded.add(0);
        this.render();
        return;
      }
      const button = event.target.closest("[data-action]");
      if (button) {
        const action = button.getAttribute("data-action");
        if (action === "expand-all") this.expandAll();
        if (action === "reset") this.reset();
        if (action === "collapse-all") this.expanded = new Set([0]);
        this.render();
      }
    }

    // The open module in which two nodes' items meet, and the item of each in it; null when
    // both sit in one closed box (nothing to draw).
    meet(a, b) {
      const ca = this.mods[a.mod].chain, cb = this.mods[b.mod].chain;
      let i = 0;
      while (i < ca.length && i < cb.length && ca[i] === cb[i]) {
        if (!this.expanded.has(ca[i])) return null;
        i++;
      }
      const home = ca[i - 1];
      const item = (node, chain) => (chain.length > i ? "m" + chain[i] : "n" + node.id);
      return { home, from: item(a, ca), to: item(b, cb) };
    }

    // The box a node shows as: the outermost closed module around it, or the node itself.
    shownAs(node) {
      for (const id of this.mods[node.mod].chain) if (!this.expanded.has(id)) return "m" + id;
      return "n" + node.id;
    }

    layout(id, edges) {
      const m = this.mods[id];
      const items = [];
      for (const k of m.kids) items.push(this.itemBox("m" + k, edges));
      for (const n of m.ops) items.push(this.itemBox("n" + n, edges));
      items.sort((x, y) => x.order - y.order);
      const byKey = new Map(items.map((it) => [it.key, it]));
      const preds = new Map(items.map((it) => [it.key, []]));
      for (const [from, to] of edges.get(id) || []) {
        const f = byKey.get(from), t = byKey.get(to);
        if (f && t && f.order < t.order) preds.get(to).push(f);
      }
      const layers = [];
      for (const it of items) {
        it.layer = 0;
        for (const p of preds.get(it.key)) it.layer = Math.max(it.layer, p.layer + 1);
        (layers[it.layer] = layers[it.layer] || []).push(it);
      }
      let y = 0, width = 0;
      const rows = [];
      for (const layer of layers) {
        if (!layer) continue;
        for (const it of layer) {
          const ps = preds.get(it.key);
          it.bary = ps.length ? ps.reduce((s, p) => s + p.cx, 0) / ps.length : it.order;
        }
        if (layer.some((it) => preds.get(it.key).length)) layer.sort((a, b) => a.bary - b.bary);
        let x = 0, h = 0;
        for (const it of layer) {
          it.x = x;
          it.cx = x + it.w / 2;
          x += it.w + GAP_X;
          h = Math.max(h, it.h);
        }
        rows.push({ layer, w: x - GAP_X, y, h });
        width = Math.max(width, x - GAP_X);
        y += h + GAP_Y;
      }
      for (const row of rows) {
        const shift = (width - row.w) / 2;
        for (const it of row.layer) {
          it.x += shift;
          it.y = row.y;
        }
      }
      return { items, w: Math.max(width, 80), h: Math.max(y - GAP_Y, 0) };
    }

    itemBox(key, edges) {
      if (key[0] === "n") {
        const n = this.nodes[Number(key.slice(1))];
        const text = n.kind === "op" ? n.label : n.label + "  " + n.shape;
        return { key, node: n, order: n.id, w: Math.max(44, text.length * CHAR + 16), h: OP_H };
      }
      const m = this.mods[Number(key.slice(1))];
      const title = `${m.name} (${m.cls})`;
      if (!this.expanded.has(m.id)) {
        const w = Math.max(title.length, 12) * CHAR + 24;
        return { key, mod: m, order: m.first, w, h: MOD_H };
      }
      const inner = this.layout(m.id, edges);
      const w = Math.max(inner.w + 2 * PAD, (title.length + 12) * CHAR);
      return { key, mod: m, open: true, inner, order: m.first, w, h: inner.h + HEAD + 2 * PAD };
    }

    render() {
      const started = performance.now();
      const edges = new Map(); // open module -> [fromKey, toKey]
      const drawn = new Map(); // shown-as pair -> count
      for (const b of this.nodes) {
        for (const ai of b.args) {
          const a = this.nodes[ai];
          const meet = this.meet(a, b);
          if (!meet) continue;
          if (!edges.has(meet.home)) edges.set(meet.home, []);
          edges.get(meet.home).push([meet.from, meet.to]);
          const pair = this.shownAs(a) + ">" + this.shownAs(b);
          drawn.set(pair, (drawn.get(pair) || 0) + 1);
        }
      }
      const root = this.itemBox("m0", edges);
      const boxes = [], leaves = [], where = new Map();
      const place = (it, ox, oy, depth) => {
        const x = ox + it.x, y = oy + it.y;
        where.set(it.key, { x, y, w: it.w, h: it.h });
        if (it.node) {
          const n = it.node;
          const tip = `${n.name}: ${n.target || n.kind}\n${n.shape}\n${this.mods[n.mod].path || "(model)"}`;
          const text = n.kind === "op" ? n.label : n.label + "  " + n.shape;
          leaves.push(`<g class="op ${n.kind}${this.hits.has(it.key) ? " hit" : ""}"><title>${esc(tip)}</title><rect x="${x}" y="${y}" width="${it.w}" height="${it.h}" rx="6"/>` +
            `<text x="${x + it.w / 2}" y="${y + 15}">${esc(text)}</text></g>`);
        } else if (!it.open) {
          const m = it.mod;
          leaves.push(`<g class="mod closed${this.hits.has(it.key) ? " hit" : ""}" data-mod="${m.id}"><title>${esc(m.path)}: click to open</title>` +
            `<rect x="${x}" y="${y}" width="${it.w}" height="${it.h}" rx="4"/>` +
            `<text x="${x + it.w / 2}" y="${y + 15}">${esc(m.name)} (${esc(m.cls)})</text>` +
            `<text class="sub" x="${x + it.w / 2}" y="${y + 29}">${m.total} ops  +</text></g>`);
        } else {
          const m = it.mod;
          boxes.push(`<g class="mod open depth${depth % 4}${this.hits.has(it.key) ? " hit" : ""}" data-mod="${m.id}"><title>${esc(m.path || "(model)")}: click the title to close</title>` +
            `<rect x="${x}" y="${y}" width="${it.w}" height="${it.h}" rx="4"/>` +
            `<text class="head" x="${x + 6}" y="${y + 15}">− ${esc(m.name)} (${esc(m.cls)}) · ${m.total} ops</text></g>`);
          for (const child of it.inner.items) place(child, x + PAD + (it.w - 2 * PAD - it.inner.w) / 2, y + HEAD + PAD, depth + 1);
        }
      };
      root.x = 0;
      root.y = 0;
      place(root, 8, 8, 0);
      // A value read all over (the attention mask, the position embeddings) draws faintly.
      const fanOut = new Map();
      for (const pair of drawn.keys()) {
        const from = pair.split(">")[0];
        fanOut.set(from, (fanOut.get(from) || 0) + 1);
      }
      const lines = [];
      for (const [pair, count] of drawn) {
        const [from, to] = pair.split(">");
        const a = where.get(from), b = where.get(to);
        if (!a || !b || from === to) continue;
        const x1 = a.x + a.w / 2, y1 = a.y + a.h, x2 = b.x + b.w / 2, y2 = b.y;
        const bend = Math.max(12, Math.abs(y2 - y1) / 3);
        const cls = (y2 > y1 ? "edge" : "edge back") + (fanOut.get(from) > FAN ? " fan" : "");
        lines.push(`<path class="${cls}" d="M${x1},${y1} C${x1},${y1 + bend} ${x2},${y2 - bend} ${x2},${y2}"><title>${count} value(s)</title></path>`);
      }
      const w = root.w + 16, h = root.h + 16;
      const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${w}" height="${h}" viewBox="0 0 ${w} ${h}">` +
        `<defs><marker id="arrow" viewBox="0 0 8 8" refX="8" refY="4" markerWidth="6" markerHeight="6" orient="auto">` +
        `<path d="M0,0 L8,4 L0,8 z"/></marker></defs>` + boxes.join("") + lines.join("") + leaves.join("") + `</svg>`;
      this.host.querySelector(".graph-canvas").innerHTML = svg;
      const ms = performance.now() - started;
      const shown = leaves.length;
      this.host.setAttribute("data-render-ms", ms.toFixed(1));
      this.host.setAttribute("data-boxes", String(shown + boxes.length));
      const found = this.hits.size ? `${this.hits.size} found; ` : "";
      this.host.querySelector(".graph-status").textContent =
        `${found}${shown} boxes, ${boxes.length} open modules, ${lines.length} edges; drawn in ${ms.toFixed(0)} ms`;
    }
  }

  function start(host) {
    if (host.graphView) return;
    const data = JSON.parse(document.getElementById(host.getAttribute("data-graph")).textContent);
    host.graphView = new GraphView(host, data);
    const hash = decodeURIComponent(window.location.hash);
    if (hash === "#open-all") host.graphView.expandAll(); // a link to every op
    if (hash.startsWith("#find=")) {
      host.querySelector(".graph-find").value = hash.slice(6); // a link to some ops: #find=sdpa
      host.graphView.find(hash.slice(6));
    } else host.graphView.render();
  }

  window.addEventListener("DOMContentLoaded", () => {
    for (const host of document.querySelectorAll(".graph")) {
      const details = host.closest("details");
      if (!details || details.open) start(host);
      if (details) details.addEventListener("toggle", () => details.open && start(host));
    }
  });
})();
