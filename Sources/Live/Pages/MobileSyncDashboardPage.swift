import LabKernel

/// The Mobile Sync dashboard (`GET /dashboard/mobile-sync`), the page the seed's
/// Dashboard Features section describes: pending approvals with their choices, a Start
/// Workflow form, instance statuses with progress bars and expandable step timelines,
/// Update and Restart actions, and a device's recent telemetry. One self-contained page:
/// its own CSS and script, nothing fetched but this server's API, which it calls with the
/// session cookie its sign-in form set (`SyncServer+Dashboard.swift`): the API key is
/// posted once in a form body and never reaches a URL or the page's script. It polls
/// every 3 seconds. Every value from the API is inserted as text, never as HTML.
enum MobileSyncDashboardPage {
    static let path = "/dashboard/mobile-sync"

    /// The page, for a `GET` of `path`; nil for every other request.
    static func response(to request: HTTPRequestMessage) -> HTTPResponseMessage? {
        guard request.method == "GET", request.path == path || request.path == path + "/" else { return nil }
        return HTTPResponseMessage(status: 200, headers: [HTTPHeader("Content-Type", "text/html; charset=utf-8"),
                                                          HTTPHeader("Cache-Control", "no-store"), HTTPHeader("Referrer-Policy", "no-referrer")],
                                   body: Array(html.utf8))
    }

    static let html = #"""
<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Mobile Sync · fleetlab</title>
<style>
:root { --bg:#f5f6f8; --card:#fff; --ink:#1d2330; --muted:#6b7280; --line:#e3e6eb; --blue:#3b7dd8; --green:#2e9d5b;
        --amber:#e0a526; --red:#d64545; --grey:#9aa0a8; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; background:var(--bg); color:var(--ink); }
header { display:flex; align-items:center; gap:16px; padding:14px 24px; background:var(--card); border-bottom:1px solid var(--line); }
header h1 { font-size:18px; margin:0; }
header .meta { color:var(--muted); font-size:12px; margin-left:auto; }
main { padding:18px 24px; display:grid; gap:18px; max-width:1400px; }
section { background:var(--card); border:1px solid var(--line); border-radius:8px; padding:14px 16px; }
section h2 { font-size:15px; margin:0 0 10px; }
table { width:100%; border-collapse:collapse; }
th, td { text-align:left; padding:6px 8px; border-bottom:1px solid var(--line); vertical-align:top; }
th { font-size:12px; color:var(--muted); font-weight:600; }
code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size:12px; }
button { font:inherit; border:1px solid var(--line); background:#fff; border-radius:6px; padding:4px 10px; cursor:pointer; }
button.primary { background:var(--blue); border-color:var(--blue); color:#fff; }
button.approve { border-color:var(--green); color:var(--green); }
button.reject { border-color:var(--red); color:var(--red); }
button:hover { filter:brightness(0.95); }
.empty { color:var(--muted); font-style:italic; }
.error { background:#fde8e8; color:#8a1c1c; border:1px solid #f5c2c2; border-radius:6px; padding:8px 12px; display:none; }
.badge { display:inline-block; padding:1px 8px; border-radius:10px; font-size:12px; font-weight:600; color:#fff; }
.badge.Running, .badge.Scheduled { background:var(--blue); } .badge.Waiting { background:var(--amber); }
.badge.Completed { background:var(--green); } .badge.Failed { background:var(--red); } .badge.Cancelled, .badge.Paused { background:var(--grey); }
.bar { display:flex; width:160px; height:8px; background:#eceef1; border-radius:4px; overflow:hidden; }
.bar .done { background:var(--green); } .bar .active { background:var(--blue); animation:pulse 1.2s ease-in-out infinite; }
@keyframes pulse { 0%,100% { opacity:1; } 50% { opacity:.45; } }
tr.instance { cursor:pointer; } tr.instance:hover { background:#fafbfc; }
.timeline { list-style:none; margin:4px 0 8px; padding:0 0 0 8px; }
.timeline li { display:flex; gap:10px; align-items:center; padding:3px 6px; border-radius:4px; }
.timeline li.current { background:#eef4fc; font-weight:600; }
.dot { width:10px; height:10px; border-radius:50%; background:var(--grey); flex:none; }
.dot.completed { background:var(--green); } .dot.running { background:var(--blue); animation:pulse 1.2s infinite; }
.dot.waiting { background:var(--amber); animation:pulse 1.2s infinite; } .dot.failed { background:var(--red); }
.dot.cancelled, .dot.skipped { background:#c9ccd1; } .dot.pending { background:#e3e6eb; border:1px solid var(--grey); }
.times { color:var(--muted); font-size:12px; margin-left:auto; }
form.start { display:grid; grid-template-columns: 220px 220px 1fr auto; gap:10px; align-items:start; }
input, select, textarea { font:inherit; padding:5px 8px; border:1px solid var(--line); border-radius:6px; width:100%; }
textarea { min-height:34px; font-family: ui-monospace, monospace; font-size:12px; }
.policies { display:inline-flex; gap:4px; flex-wrap:wrap; margin-left:6px; }
.signin { display:none; gap:8px; align-items:center; margin:0; }
.signout { display:none; margin:0; }
.payload { max-width:520px; overflow-wrap:anywhere; }
</style>
</head>
<body>
<header>
  <h1>Mobile Sync</h1>
  <form class="signin" id="signin" method="post" action="/dashboard/mobile-sync/session">
    <input id="keyinput" name="key" type="password" placeholder="API key" size="40" autocomplete="current-password" aria-label="API key">
    <button id="keysave" class="primary" type="submit">Sign in</button>
  </form>
  <div class="meta" id="meta">connecting…</div>
  <form class="signout" id="signout" method="post" action="/dashboard/mobile-sync/session/end"><button type="submit">Sign out</button></form>
</header>
<main>
  <div class="error" id="error"></div>
  <section id="approvals-section">
    <h2>Pending approvals <span class="mono" id="approval-count"></span></h2>
    <table><thead><tr><th>Device</th><th>Instance</th><th>Sequence</th><th>Step</th><th>Prompt</th><th>Waiting</th><th>Resolve</th></tr></thead>
    <tbody id="approvals"></tbody></table>
  </section>
  <section>
    <h2>Start workflow</h2>
    <form class="start" id="start-form">
      <select id="start-device" aria-label="Device"></select>
      <input id="start-sequence" placeholder="sequence name, e.g. onboarding-flow" aria-label="Sequence name">
      <textarea id="start-input" aria-label="Initial state (JSON)">{}</textarea>
      <button class="primary" type="submit" id="start-button">Start Workflow</button>
    </form>
    <div class="empty" id="start-note"></div>
  </section>
  <section>
    <h2>Instance status <span class="mono" id="status-count"></span></h2>
    <table><thead><tr><th>Device</th><th>Instance</th><th>Sequence</th><th>State</th><th>Current step</th><th>Progress</th><th>Updated</th><th></th></tr></thead>
    <tbody id="statuses"></tbody></table>
  </section>
  <section>
    <h2>Device events <select id="events-device" aria-label="Device for events"></select></h2>
    <table><thead><tr><th>Time</th><th>Event</th><th>Payload</th><th>Received</th></tr></thead>
    <tbody id="events"></tbody></table>
  </section>
</main>
<script>
(function () {
  "use strict";
  var params = new URLSearchParams(location.search);
  var signedIn = true;
  var expanded = {};
  var openActions = {};
  var busy = false;

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    if (attrs) { Object.keys(attrs).forEach(function (k) {
      if (k === "text") { node.textContent = attrs[k]; } else if (k === "class") { node.className = attrs[k]; }
      else if (k.indexOf("on") === 0) { node.addEventListener(k.slice(2), attrs[k]); } else { node.setAttribute(k, attrs[k]); }
    }); }
    (children || []).forEach(function (c) { node.appendChild(typeof c === "string" ? document.createTextNode(c) : c); });
    return node;
  }
  function showError(message) { var e = document.getElementById("error"); e.textContent = message || ""; e.style.display = message ? "block" : "none"; }
  function api(method, path, body) {
    var init = { method: method, credentials: "same-origin", headers: { "x-fleetlab-dashboard": "1" } };
    if (body !== undefined) { init.headers["content-type"] = "application/json"; init.body = JSON.stringify(body); }
    return fetch(path, init).then(function (r) {
      return r.text().then(function (t) {
        var data = null; try { data = t ? JSON.parse(t) : null; } catch (e) { data = null; }
        if (r.status === 401) { signedIn = false; }
        if (!r.ok) { throw new Error((data && data.error) || ("HTTP " + r.status)); }
        return data;
      });
    });
  }
  function ago(iso) {
    var s = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
    if (s < 60) return s + "s"; if (s < 3600) return Math.floor(s / 60) + "m " + (s % 60) + "s";
    return Math.floor(s / 3600) + "h " + Math.floor((s % 3600) / 60) + "m";
  }
  function short(id) { return id && id.length > 13 ? id.slice(0, 8) + "…" : (id || ""); }
  function parse(text, fallback) { try { return text ? JSON.parse(text) : fallback; } catch (e) { return fallback; } }

  function renderApprovals(items) {
    var body = document.getElementById("approvals"); body.textContent = "";
    document.getElementById("approval-count").textContent = "(" + items.length + ")";
    if (!items.length) { body.appendChild(el("tr", null, [el("td", { colspan: "7", class: "empty", text: "No step is waiting for a decision." })])); return; }
    items.forEach(function (a) {
      var choices = parse(a.choices, null);
      if (!choices || !choices.length) { choices = [{ label: "Approve", value: "yes" }, { label: "Reject", value: "no" }]; }
      var buttons = el("div", { class: "policies" });
      choices.forEach(function (c, i) {
        var cls = choices.length === 2 ? (i === 0 ? "approve" : "reject") : "";
        buttons.appendChild(el("button", { class: cls, "data-value": c.value, text: c.label || c.value, onclick: function () { resolve(a.id, c.value); } }));
      });
      body.appendChild(el("tr", { "data-approval": a.id }, [
        el("td", { class: "mono", text: a.device_id }), el("td", { class: "mono", title: a.instance_id, text: short(a.instance_id) }),
        el("td", { text: a.sequence_name || "" }), el("td", { class: "mono", text: a.block_id }), el("td", { text: a.prompt || "" }),
        el("td", { text: ago(a.created_at) }), el("td", null, [buttons])]));
    });
  }
  function resolve(id, value) {
    api("POST", "/api/v1/mobile/approvals/" + encodeURIComponent(id) + "/resolve", { output: { value: value } })
      .then(function () { showError(""); refresh(); }, function (e) { showError("Could not resolve: " + e.message); });
  }

  function renderDevices(items) {
    var select = document.getElementById("start-device"); var current = select.value; select.textContent = "";
    var synced = items.filter(function (d) { return d.last_sync_at; });
    synced.forEach(function (d) { select.appendChild(el("option", { value: d.device_id, text: d.device_id + " (" + d.platform + ")" })); });
    if (current) { select.value = current; }
    document.getElementById("start-note").textContent = synced.length ? "" : "No device has synced yet.";
    var events = document.getElementById("events-device"); var chosen = events.value; events.textContent = "";
    items.forEach(function (d) { events.appendChild(el("option", { value: d.device_id, text: d.device_id })); });
    if (chosen) { events.value = chosen; }
  }

  function renderEvents(items) {
    var body = document.getElementById("events"); body.textContent = "";
    if (!items.length) { body.appendChild(el("tr", null, [el("td", { colspan: "4", class: "empty", text: "No telemetry from this device yet." })])); return; }
    items.forEach(function (e) {
      body.appendChild(el("tr", { "data-event": e.event_type }, [el("td", { class: "mono", text: e.timestamp }), el("td", { class: "mono", text: e.event_type }),
        el("td", { class: "mono payload", text: e.payload }), el("td", { text: ago(e.received_at) + " ago" })]));
    });
  }
  function refreshEvents() {
    var device = document.getElementById("events-device").value;
    if (!device) { renderEvents([]); return Promise.resolve(); }
    return api("GET", "/api/v1/mobile/devices/" + encodeURIComponent(device) + "/telemetry?limit=50").then(function (r) { renderEvents(r.items); });
  }

  function progress(steps) {
    var only = steps.filter(function (s) { return s.block_type === "step"; });
    var total = only.length || 1;
    var done = only.filter(function (s) { return s.state === "completed" || s.state === "skipped"; }).length;
    var active = only.filter(function (s) { return s.state === "running" || s.state === "waiting"; }).length;
    var bar = el("div", { class: "bar", title: done + " of " + only.length + " steps" }, [
      el("div", { class: "done", style: "width:" + (100 * done / total) + "%" }),
      el("div", { class: "active", style: "width:" + (100 * active / total) + "%" })]);
    return bar;
  }
  function command(device, type, payload) {
    return api("POST", "/api/v1/mobile/commands", { device_id: device, command_type: type, payload: payload })
      .then(function () { showError(""); refresh(); }, function (e) { showError("Could not send " + type + ": " + e.message); });
  }
  function actions(s) {
    var terminal = ["Completed", "Failed", "Cancelled"].indexOf(s.state) >= 0;
    var label = terminal ? "Restart" : "Update";
    var policies = terminal ? [["restart", "Restart"], ["skip_executed", "Skip Executed"]]
      : [["restart", "Restart"], ["graceful", "Graceful"], ["fail", "Fail"], ["cancel", "Cancel"], ["skip_executed", "Skip Executed"]];
    var cell = el("td");
    cell.appendChild(el("button", { "data-action": label.toLowerCase(), text: label, onclick: function (ev) {
      ev.stopPropagation(); openActions[s.instance_id] = !openActions[s.instance_id]; refresh(); } }));
    if (openActions[s.instance_id]) {
      var box = el("span", { class: "policies" });
      policies.forEach(function (p) {
        box.appendChild(el("button", { "data-policy": p[0], text: p[1], onclick: function (ev) {
          ev.stopPropagation(); openActions[s.instance_id] = false;
          command(s.device_id, "update_sequence", { instance_id: s.instance_id, policy: p[0], sequence_name: s.sequence_name });
        } }));
      });
      cell.appendChild(box);
    }
    return cell;
  }
  function renderStatuses(items) {
    var body = document.getElementById("statuses"); body.textContent = "";
    document.getElementById("status-count").textContent = "(" + items.length + ")";
    if (!items.length) { body.appendChild(el("tr", null, [el("td", { colspan: "8", class: "empty", text: "No device has reported an instance yet." })])); return; }
    items.forEach(function (s) {
      var steps = parse(s.steps, []) || [];
      var row = el("tr", { class: "instance", "data-instance": s.instance_id, onclick: function () { expanded[s.instance_id] = !expanded[s.instance_id]; refresh(); } }, [
        el("td", { class: "mono", text: s.device_id }), el("td", { class: "mono", title: s.instance_id, text: short(s.instance_id) }),
        el("td", { text: s.sequence_name || "" }), el("td", null, [el("span", { class: "badge " + s.state, text: s.state })]),
        el("td", { class: "mono", text: s.current_step || "–" }), el("td", null, [progress(steps)]), el("td", { text: ago(s.updated_at) + " ago" }),
        actions(s)]);
      body.appendChild(row);
      if (expanded[s.instance_id]) {
        var list = el("ol", { class: "timeline" });
        steps.forEach(function (st) {
          list.appendChild(el("li", { class: st.block_id === s.current_step ? "current" : "", "data-step": st.block_id }, [
            el("span", { class: "dot " + st.state }), el("span", { class: "mono", text: st.block_id }),
            el("span", { text: st.state + (st.handler ? " · " + st.handler : "") }),
            el("span", { class: "times", text: (st.started_at || "") + (st.completed_at ? " → " + st.completed_at : "") })]));
        });
        body.appendChild(el("tr", { class: "timeline-row" }, [el("td", { colspan: "8" }, [list])]));
      }
    });
  }

  function showSignIn() {
    document.getElementById("signin").style.display = "flex"; document.getElementById("signout").style.display = "none";
    document.getElementById("meta").textContent = "sign in with the server's root API key or a tenant's key";
    if (params.get("signin") === "failed") { showError("That API key is not valid."); }
  }
  function refresh() {
    if (!signedIn) { showSignIn(); return; }
    if (busy) { return; } busy = true;
    Promise.all([api("GET", "/api/v1/mobile/approvals?state=pending&limit=500"), api("GET", "/api/v1/mobile/devices?limit=500"),
                 api("GET", "/api/v1/mobile/status?limit=500")]).then(function (r) {
      renderApprovals(r[0].items); renderDevices(r[1].items); renderStatuses(r[2].items);
      return refreshEvents();
    }).then(function () {
      document.getElementById("meta").textContent = "updated " + new Date(Date.now()).toLocaleTimeString() + " · polling every 3 s";
      document.getElementById("signout").style.display = "block";
      document.body.setAttribute("data-loaded", "true"); showError("");
    }, function (e) { if (signedIn) { showError(e.message); } else { showSignIn(); } }).then(function () { busy = false; });
  }

  document.getElementById("start-form").addEventListener("submit", function (ev) {
    ev.preventDefault();
    var device = document.getElementById("start-device").value, sequence = document.getElementById("start-sequence").value.trim();
    var input;
    try { input = JSON.parse(document.getElementById("start-input").value || "{}"); } catch (e) { showError("The initial state is not valid JSON: " + e.message); return; }
    if (!device) { showError("Choose a device that has synced."); return; }
    if (!sequence) { showError("Enter the name of a sequence loaded on the device."); return; }
    if (typeof input !== "object" || Array.isArray(input) || input === null) { showError("The initial state is a JSON object."); return; }
    command(device, "start_workflow", { sequence_name: sequence, input: input });
  });
  document.getElementById("events-device").addEventListener("change", function () { refreshEvents(); });
  refresh();
  setInterval(refresh, 3000);
})();
</script>
</body>
</html>
"""#
}
