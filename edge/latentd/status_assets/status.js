// latentd's status page. The token comes from the URL fragment (never sent
// to the server) or the password field, is kept in memory only, and goes
// to /v1/admin/status as a bearer token once a second. Everything is built
// with DOM calls and textContent: nothing from the answer is parsed as HTML.
"use strict";
(function () {
  const SVG = "http://www.w3.org/2000/svg";
  const INTERVAL_MS = 1000;
  let token = "";
  let timer = null;
  let generation = 0;
  let refreshes = 0;

  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const k in attrs || {}) e.setAttribute(k, String(attrs[k]));
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function svg(tag, attrs) {
    const e = document.createElementNS(SVG, tag);
    for (const k in attrs) e.setAttribute(k, String(attrs[k]));
    return e;
  }
  function setState(state, text) {
    const p = document.getElementById("state");
    p.dataset.state = state;
    p.textContent = text;
  }
  function bytes(n) {
    const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let i = 0;
    let v = n;
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return (i === 0 ? String(v) : v.toFixed(v < 10 ? 1 : 0)) + " " + units[i];
  }
  function count(n) { return Number(n).toLocaleString("en-US"); }
  function fmt(dimension, n) {
    return dimension === "memory-bytes" ? bytes(n) : count(n);
  }
  // bar is one row: a label, an SVG bar of value against max (a marker at
  // mark when given), and the numbers. Data attributes hold the exact
  // values for whoever reads the page mechanically.
  function bar(label, value, max, text, data, mark) {
    const row = el("div", Object.assign({ class: "row" }, data || {}));
    row.dataset.value = String(value);
    row.dataset.max = String(max);
    const frac = max > 0 ? Math.min(1, value / max) : (value > 0 ? 1 : 0);
    row.dataset.full = String(max > 0 && value >= max);
    row.appendChild(el("span", { class: "label", title: label }, label));
    const s = svg("svg", { viewBox: "0 0 1000 10", preserveAspectRatio: "none", role: "img" });
    s.appendChild(svg("rect", { class: "track", x: 0, y: 0, width: 1000, height: 10 }));
    s.appendChild(svg("rect", { class: "fill", x: 0, y: 0, width: (frac * 1000).toFixed(1), height: 10, "data-fraction": frac }));
    if (mark !== undefined && max > 0) {
      s.appendChild(svg("rect", { class: "mark", x: (Math.min(1, mark / max) * 1000 - 2).toFixed(1), y: 0, width: 4, height: 10 }));
    }
    const title = svg("title", {});
    title.textContent = label + ": " + text;
    s.appendChild(title);
    row.appendChild(s);
    row.appendChild(el("span", { class: "nums" }, text));
    return row;
  }
  function replace(id, children) {
    const box = document.getElementById(id);
    box.replaceChildren(...children);
  }

  function renderScopes(scopes) {
    const cards = scopes.map(function (sc) {
      const card = el("div", { class: "card scope", "data-kind": sc.kind, "data-name": sc.name });
      card.appendChild(el("h3", {}, sc.kind === "node" ? "node" : sc.kind + " " + sc.name));
      for (const d of sc.dimensions) {
        card.appendChild(bar(d.dimension, d.reserved, d.limit, fmt(d.dimension, d.reserved) + " / " + fmt(d.dimension, d.limit),
          { "data-dimension": d.dimension }));
      }
      return card;
    });
    replace("scopes", cards);
  }
  function renderClasses(data) {
    const queues = data.queue_classes.map(function (q) {
      return bar(q.name, q.queued_reservations, q.max_queued, count(q.queued_reservations) + " / " + count(q.max_queued),
        { "data-queue-class": q.name });
    });
    replace("queues", queues.length ? queues : [el("p", { class: "empty" }, "none configured")]);
    const cells = data.cell_classes.map(function (c) {
      return bar(c.class, c.live_activations, c.parallelism, count(c.live_activations) + " live, parallelism " + count(c.parallelism),
        { "data-cell-class": c.class });
    });
    replace("cells", cells.length ? cells : [el("p", { class: "empty" }, "none configured")]);
  }
  function renderLoad(load) {
    if (!load) {
      replace("load", [el("p", { class: "stale", "data-load": "none" }, "no load sample")]);
      return;
    }
    const pct = function (v) { return (v * 100).toFixed(1) + "%"; };
    const age = el("p", { "data-age-ms": load.age_ms }, "sample #" + load.sequence + ", " + count(load.age_ms) + " ms old");
    if (load.age_ms > load.max_age_ms || load.age_ms < 0) {
      age.className = "stale";
      age.textContent += " (stale: admission refuses samples older than " + count(load.max_age_ms) + " ms)";
    }
    replace("load", [
      bar("cpu", load.cpu, 1, pct(load.cpu) + " (threshold " + pct(load.cpu_threshold) + ")", { "data-pressure": "cpu" }, load.cpu_threshold),
      bar("memory", load.memory, 1, pct(load.memory) + " (threshold " + pct(load.memory_threshold) + ")", { "data-pressure": "memory" }, load.memory_threshold),
      age,
    ]);
  }
  function renderRejections(rej) {
    document.getElementById("rejections-window").textContent =
      count(rej.total) + " in the last " + (rej.window_ms / 1000).toFixed(0) + " s";
    const max = rej.by_reason.reduce(function (m, r) { return Math.max(m, r.count); }, 0);
    const rows = rej.by_reason.map(function (r) {
      return bar(r.reason, r.count, max, count(r.count), { "data-reason": r.reason });
    });
    replace("rejections", rows.length ? rows : [el("p", { class: "empty" }, "none")]);
  }
  function renderOutcomes(list) {
    document.getElementById("outcomes-capacity").textContent = "the last " + list.capacity;
    const rows = list.recent.map(function (o) {
      const tr = el("tr", { "data-outcome": o.outcome });
      const t = new Date(o.at_unix_ms);
      tr.appendChild(el("td", {}, t.toLocaleTimeString("en-GB", { hour12: false }) + "." + String(t.getMilliseconds()).padStart(3, "0")));
      tr.appendChild(el("td", {}, o.tenant ? o.tenant + "/" + o.service + "/" + o.route : "(no longer deployed)"));
      tr.appendChild(el("td", { class: o.outcome === "success" ? "outcome-success" : "outcome-other" }, o.outcome));
      tr.appendChild(el("td", { class: "num" }, String(o.status)));
      tr.appendChild(el("td", { class: "num" }, o.duration_ms.toFixed(1) + " ms"));
      return tr;
    });
    const body = document.querySelector("#outcomes tbody");
    if (rows.length === 0) {
      const tr = el("tr");
      tr.appendChild(el("td", { colspan: 5, class: "empty" }, "none yet"));
      rows.push(tr);
    }
    body.replaceChildren(...rows);
  }
  // renderRecording says when the -record trace has stopped on a write
  // error (a full disk); nothing while it records, or without -record.
  function renderRecording(rec) {
    const p = document.getElementById("recording");
    if (!rec || rec.state !== "stopped") {
      p.hidden = true;
      p.textContent = "";
      delete p.dataset.state;
      return;
    }
    p.hidden = false;
    p.dataset.state = rec.state;
    p.textContent = "Recording has stopped: " + rec.error + " (" + count(rec.write_errors) + " write errors, " +
      count(rec.dropped_lines) + " lines dropped; retried every second)";
  }
  // renderFleet shows each fleet-limited tenant's slice, its validity, its
  // live use and the fleet limit as last read; hidden when there is none.
  function renderFleet(list) {
    const section = document.getElementById("fleet-section");
    const body = document.querySelector("#fleet tbody");
    if (!list || list.length === 0) {
      section.hidden = true;
      body.replaceChildren();
      return;
    }
    section.hidden = false;
    body.replaceChildren(...list.map(function (f) {
      const tr = el("tr", { "data-tenant": f.tenant });
      let state = "admitting";
      if (!f.broker) state = "refused: no etcd configured";
      else if (f.problem) state = "refused: " + f.problem;
      else if (!f.published || f.valid_for_ms <= 0) state = "refused: no valid slice";
      tr.appendChild(el("td", {}, f.tenant));
      tr.appendChild(el("td", { class: "num" }, count(f.live_activations)));
      tr.appendChild(el("td", { class: "num" }, f.published ? count(f.slice) : "none"));
      tr.appendChild(el("td", { class: "num" }, f.published ? (f.valid_for_ms / 1000).toFixed(1) + " s" : "-"));
      tr.appendChild(el("td", { class: "num" }, count(f.held)));
      tr.appendChild(el("td", { class: "num" }, f.fleet_limit >= 0 ? count(f.fleet_limit) : "not read"));
      tr.appendChild(el("td", { class: state === "admitting" ? "outcome-success" : "outcome-other" }, state));
      return tr;
    }));
  }
  function render(data) {
    renderRecording(data.recording);
    renderFleet(data.fleet);
    renderScopes(data.scopes);
    renderClasses(data);
    renderLoad(data.load);
    renderRejections(data.rejections);
    renderOutcomes(data.outcomes);
    document.getElementById("content").hidden = false;
    refreshes++;
    document.body.dataset.refreshes = String(refreshes);
    document.body.dataset.updatedUnixMs = String(data.now_unix_ms);
    setState("ok", "updated " + new Date(data.now_unix_ms).toLocaleTimeString("en-GB", { hour12: false }) +
      ", " + count(data.live_reservations) + " live reservations, " + count(data.admitted) + " admitted in all");
  }
  function clear() {
    document.getElementById("content").hidden = true;
    for (const id of ["scopes", "queues", "cells", "load", "rejections"]) replace(id, []);
    document.querySelector("#outcomes tbody").replaceChildren();
    document.querySelector("#fleet tbody").replaceChildren();
  }

  async function poll(gen) {
    if (gen !== generation) return;
    const ctl = new AbortController();
    const abort = setTimeout(function () { ctl.abort(); }, 5000);
    try {
      const resp = await fetch("/v1/admin/status", {
        headers: { "Authorization": "Bearer " + token },
        cache: "no-store", credentials: "omit", redirect: "error", signal: ctl.signal,
      });
      if (gen !== generation) return;
      if (resp.status === 401 || resp.status === 403) {
        clear();
        setState("error", resp.status + ": " + (resp.status === 401 ? "the token is not known" : "an administrator token is required"));
        document.body.dataset.refused = String(resp.status);
        return; // no retry with a token that will not do
      }
      if (!resp.ok) throw new Error("HTTP " + resp.status);
      render(await resp.json());
    } catch (err) {
      if (gen !== generation) return;
      setState("error", "refresh failed: " + err.message + " (retrying)");
    } finally {
      clearTimeout(abort);
    }
    if (gen === generation) timer = setTimeout(function () { poll(gen); }, INTERVAL_MS);
  }
  function start(t) {
    token = t;
    generation++;
    if (timer !== null) clearTimeout(timer);
    refreshes = 0;
    delete document.body.dataset.refused;
    clear();
    if (!token) {
      setState("idle", "no token given");
      return;
    }
    setState("loading", "loading...");
    poll(generation);
  }

  document.addEventListener("DOMContentLoaded", function () {
    const input = document.getElementById("token");
    document.getElementById("use-token").addEventListener("click", function () {
      const t = input.value;
      input.value = "";
      start(t);
    });
    input.addEventListener("keydown", function (e) {
      if (e.key === "Enter") { e.preventDefault(); document.getElementById("use-token").click(); }
    });
    const params = new URLSearchParams(location.hash.slice(1));
    const t = params.get("token");
    if (t) {
      // Out of the address bar and the history, too.
      history.replaceState(null, "", location.pathname + location.search);
      start(t);
    }
  });
})();
