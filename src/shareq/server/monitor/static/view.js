// The live view: one EventSource on /events; each "state" event redraws the three sections.
// Every name shown comes from clients (groups, topics, members), so text goes in as text.
"use strict";

const STATES = ["AVAILABLE", "ACQUIRED", "ACKNOWLEDGED", "ARCHIVING", "ARCHIVED", "TX_PENDING", "UNKNOWN"];

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null) continue;
    if (key === "class") node.className = value;
    else if (key === "title") node.title = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function num(n) { return n === null || n === undefined ? "" : Number(n).toLocaleString("en-US"); }

function seconds(s) {
  if (s === null || s === undefined) return "";
  return s < 60 ? s.toFixed(1) + " s" : (s / 60).toFixed(1) + " min";
}

function table(headers, rows) {
  return el("table", {},
    el("thead", {}, el("tr", {}, ...headers.map((h) => el("th", {}, h)))),
    el("tbody", {}, ...rows));
}

function strip(p, group) {
  const node = el("div", {
    class: "strip", "data-group": group, "data-topic": p.topic, "data-partition": p.partition,
    "data-spso": p.spso, "data-speo": p.speo,
    title: `SPSO ${p.spso} .. SPEO ${p.speo}`,
  });
  for (const s of p.strip) {
    const size = s.last - s.first + 1;
    let title = `${s.first}..${s.last} ${s.state}` + (s.dc ? `, delivery ${s.dc}` : "");
    if (s.counts) title += " — " + Object.entries(s.counts).map(([k, v]) => `${k} ${v}`).join(", ");
    if (s.expiring) title += " — lock about to expire";
    const seg = el("div", {
      class: `seg state-${s.state}` + (s.expiring ? " expiring" : ""),
      "data-state": s.state, "data-first": s.first, "data-last": s.last, title,
    });
    seg.style.flexGrow = String(size);
    node.append(seg);
  }
  if (!p.strip.length) node.append(el("span", { class: "empty" }, p.lag ? "nothing fetched yet" : "nothing in flight"));
  return node;
}

function shareGroup(g) {
  const box = el("div", { class: "group", "data-group": g.group_id });
  box.append(el("h3", {}, g.group_id, " ", el("span", { class: "muted" }, `(${g.state}, epoch ${g.epoch})`)));
  box.append(el("div", { class: "meta" },
    `lag ${num(g.lag)} · lock ${num(g.lock_duration_ms)} ms · delivery limit ${g.delivery_count_limit}` +
    (g.dlq_topic ? ` · DLQ ${g.dlq_topic}` : "") +
    (g.redelivery_backoff_ms ? ` · backoff ${num(g.redelivery_backoff_ms)} ms` : "") +
    ` · window ${g.window_mode}` + (g.delayed ? ` · ${num(g.delayed)} delayed` : "") +
    (g.partitions.some((p) => p.ordering === "key") ? " · ordered by key" : "")));
  if (g.stall_warning) {
    box.append(el("p", { class: "warn" }, g.stall_warning));
  }
  if (g.members.length) {
    box.append(table(["member", "client", "host", "epoch", "assignment"], g.members.map((m) => el("tr", {},
      el("td", { class: "member" }, m.member_id),
      el("td", {}, m.client_id),
      el("td", {}, m.host),
      el("td", { class: "num" }, m.epoch),
      el("td", {}, m.assignment.map((a) => `${a.topic} [${a.partitions.join(", ")}]`).join("; "))))));
  } else {
    box.append(el("p", { class: "muted" }, "No members."));
  }
  const rows = g.partitions.map((p) => el("tr", { "data-topic": p.topic, "data-partition": p.partition },
    el("td", {}, `${p.topic}-${p.partition}`,
      p.ordering === "key"
        ? el("div", { class: "muted" }, `${num(p.blocked_keys)} keys held · ${num(p.key_waiting)} waiting`)
        : null),
    el("td", {}, strip(p, g.group_id)),
    el("td", { class: "num" }, num(p.spso)),
    el("td", { class: "num" }, num(p.speo)),
    el("td", { class: "num" + (p.lag ? " warn" : "") }, num(p.lag)),
    el("td", { class: "num" }, seconds(p.lag_seconds)),
    el("td", { class: "num" + (p.expiring ? " warn" : "") }, num(p.expiring)),
    el("td", { class: "num" }, num(p.redelivered)),
    el("td", { class: "num", title: p.next_redelivery_ms ? `next ${new Date(p.next_redelivery_ms).toISOString()}` : "" },
      num(p.delayed)),
    el("td", { class: "num" }, num(p.archived)),
    el("td", { class: "num" }, num(p.dead_lettered))));
  if (g.more.count) {
    const states = Object.entries(g.more.states).map(([k, v]) => `${k} ${num(v)}`).join(", ");
    rows.push(el("tr", { class: "more" },
      el("td", {}, `+${num(g.more.count)} more`),
      el("td", { class: "muted" }, states || "nothing in flight"),
      el("td", {}), el("td", {}),
      el("td", { class: "num" }, num(g.more.lag)),
      el("td", {}), el("td", {}), el("td", {}), el("td", {}),
      el("td", { class: "num" }, num(g.more.archived)),
      el("td", { class: "num" }, num(g.more.dead_lettered))));
  }
  if (rows.length) {
    box.append(table(
      ["share-partition", "SPSO → SPEO", "SPSO", "SPEO", "lag", "oldest", "locks expiring", "redelivered",
        "delayed", "archived", "dead-lettered"], rows));
  }
  return box;
}

function render(state) {
  document.getElementById("broker").textContent =
    `node ${state.broker.node_id} · ${state.broker.listener} · ${state.broker.connections} connections` +
    (state.broker.ready ? "" : " · starting");
  const groups = document.getElementById("share-groups");
  groups.replaceChildren(...(state.share_groups.length
    ? state.share_groups.map(shareGroup) : [el("p", { class: "muted" }, "No share groups yet.")]));
  document.getElementById("topics").replaceChildren(table(["topic", "partitions", "records", "bytes"],
    state.topics.map((t) => el("tr", { "data-topic": t.name },
      el("td", {}, t.name), el("td", { class: "num" }, t.partitions),
      el("td", { class: "num" }, num(t.records)), el("td", { class: "num" }, num(t.size_bytes))))));
  const consumers = document.getElementById("consumer-groups");
  consumers.replaceChildren(...(state.consumer_groups.length
    ? [table(["group", "state", "lag", "partitions"], state.consumer_groups.map((g) => el("tr", {},
      el("td", {}, g.group_id), el("td", {}, g.state), el("td", { class: "num" }, num(g.lag)),
      el("td", {}, g.partitions.map((p) => `${p.topic}-${p.partition}: ${num(p.lag)}`).join(", ")))))]
    : [el("p", { class: "muted" }, "No consumer groups with committed offsets.")]));
  document.body.dataset.updated = String(state.now_ms);
}

function legend() {
  document.getElementById("legend").replaceChildren(...STATES.map((s) =>
    el("span", {}, el("span", { class: `swatch state-${s}` }), s.toLowerCase().replace("_", " "))),
    el("span", {}, el("span", { class: "swatch state-ACQUIRED expiring" }), "lock about to expire"));
}

function connect() {
  const status = document.getElementById("status");
  const source = new EventSource("/events");
  source.addEventListener("state", (event) => {
    status.textContent = "live";
    status.className = "status live";
    render(JSON.parse(event.data));
  });
  source.onerror = () => {
    status.textContent = "reconnecting…";
    status.className = "status";
  };
}

legend();
connect();
