#include "status_page.h"

namespace gpuguard::agent {

std::string_view status_page_html() {
    return R"html(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>gpuguard status</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1em 2em; color: #222; background: #fafafa; }
h1 { font-size: 1.4em; margin: 0 0 .2em; }
h2 { font-size: 1.1em; margin: 1.4em 0 .4em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; width: 100%; background: #fff; }
th, td { text-align: left; padding: 3px 8px; border-bottom: 1px solid #eee; vertical-align: top; }
th { background: #f0f0f0; font-weight: 600; }
.bar { display: inline-block; height: .8em; background: #4a8; vertical-align: middle; }
.verdict-clean { color: #286; }
.verdict-detected { color: #c22; font-weight: 600; }
.muted { color: #777; }
.error { color: #c22; }
code { font-size: 12px; word-break: break-all; }
details { margin: 0; }
</style>
<script src="/status.js" defer></script>
</head>
<body>
<h1>gpuguard on <span id="host">&hellip;</span></h1>
<div id="summary" class="muted">loading&hellip;</div>
<div id="error" class="error"></div>
<h2>GPUs</h2>
<table id="gpus"><thead><tr><th>GPU</th><th>model</th><th>utilisation</th><th>memory</th><th>temperature</th><th>power</th></tr></thead><tbody></tbody></table>
<h2>GPU processes</h2>
<table id="processes"><thead><tr><th>pid</th><th>user</th><th>command</th><th>container</th><th>GPUs</th><th>GPU memory</th><th>verdict</th></tr></thead><tbody></tbody></table>
<h2>Mining sessions</h2>
<table id="mining"><thead><tr><th>pid</th><th>process</th><th>protocol</th><th>pool</th><th>shares (accepted / rejected)</th><th>hash rate (95 % interval)</th></tr></thead><tbody></tbody></table>
<h2>Recent detections</h2>
<table id="detections"><thead><tr><th>time</th><th>severity</th><th>rule</th><th>process</th><th>action</th><th>evidence</th></tr></thead><tbody></tbody></table>
<h2>Actions taken</h2>
<table id="actions"><thead><tr><th>time</th><th>action</th><th>outcome</th><th>rule</th><th>target</th><th>detail</th></tr></thead><tbody></tbody></table>
<h2>Blocked addresses</h2>
<table id="blocked"><thead><tr><th>address</th><th>rule</th><th>since</th><th>until</th></tr></thead><tbody></tbody></table>
<p class="muted">Read-only; refreshed every 2 s from <a href="/status.json">/status.json</a>. Metrics: <a href="/metrics">/metrics</a>.</p>
</body>
</html>
)html";
}

std::string_view status_page_script() {
    return R"js('use strict';
// Renders /status.json; every value goes in with textContent, never as markup.
function cell(row, value) {
  const td = document.createElement('td');
  if (value instanceof Node) td.appendChild(value); else td.textContent = value === undefined || value === null ? '' : String(value);
  row.appendChild(td);
  return td;
}
function fill(id, rows, columns, empty) {
  const body = document.querySelector('#' + id + ' tbody');
  body.replaceChildren();
  if (rows.length === 0) {
    const row = document.createElement('tr');
    const td = cell(row, empty);
    td.colSpan = 10;
    td.className = 'muted';
    body.appendChild(row);
    return;
  }
  for (const item of rows) {
    const row = document.createElement('tr');
    for (const column of columns) cell(row, column(item));
    body.appendChild(row);
  }
}
function bytes(n) {
  if (n === undefined || n === null) return '';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return n.toFixed(i ? 1 : 0) + ' ' + units[i];
}
function percent(p) {
  if (p === undefined || p === null) return '';
  const wrap = document.createElement('span');
  const bar = document.createElement('span');
  bar.className = 'bar';
  bar.style.width = Math.max(1, Math.min(100, p)) + 'px';
  wrap.appendChild(bar);
  wrap.appendChild(document.createTextNode(' ' + p.toFixed(0) + ' %'));
  return wrap;
}
// "1.2 MH/s (0.9-1.6)": a session's hash rate and its 95 % interval, in one unit.
function hashRate(s) {
  if (typeof s.hash_rate !== 'number') return '- (needs two shares)';
  const units = ['H/s', 'kH/s', 'MH/s', 'GH/s', 'TH/s', 'PH/s'];
  let i = 0, scale = 1;
  while (s.hash_rate / scale >= 1000 && i < units.length - 1) { scale *= 1000; i++; }
  let text = (s.hash_rate / scale).toFixed(1) + ' ' + units[i];
  if (typeof s.hash_rate_low === 'number' && typeof s.hash_rate_high === 'number') {
    text += ' (' + (s.hash_rate_low / scale).toFixed(1) + '-' + (s.hash_rate_high / scale).toFixed(1) + ')';
  }
  return text;
}
function clock(ns) { return ns ? new Date(ns / 1e6).toLocaleString() : ''; }
function evidence(detection) {
  const details = document.createElement('details');
  const summary = document.createElement('summary');
  const gg = (detection.gpuguard || {}).detection || {};
  summary.textContent = detection.rule.description || detection.rule.name || '';
  details.appendChild(summary);
  const code = document.createElement('code');
  code.textContent = JSON.stringify({signatures: gg.signature_ids, evidence: gg.evidence,
                                     destination: detection.destination,
                                     command_line: (detection.process || {}).command_line}, null, 1);
  details.appendChild(code);
  return details;
}
// "namespace/pod/runtime:name (image)" of a ps container object.
function container(c) {
  if (!c) return '';
  return (c.pod_name ? c.pod_namespace + '/' + c.pod_name + '/' : '') + c.runtime + ':' +
         (c.name || (c.id || '').slice(0, 12)) + (c.image ? ' (' + c.image + ')' : '');
}
// A detection's ECS container and orchestrator fields in ps's shape.
function ecsContainer(d) {
  const o = d.orchestrator || {};
  return {runtime: d.container.runtime, name: d.container.name, id: d.container.id,
          image: (d.container.image || {}).name, pod_name: (o.resource || {}).name,
          pod_namespace: o.namespace};
}
function render(data) {
  const status = data.agent.status, processes = data.agent.ps.processes;
  const activity = data.agent.activity, telemetry = data.telemetry;
  document.getElementById('host').textContent = data.agent.host;
  document.getElementById('summary').textContent =
    'version ' + status.version + ' \u00b7 up ' + Math.round(status.uptime_s) + ' s \u00b7 ' +
    status.hooks.length + ' kernel hooks \u00b7 ' + status.delivered + ' events, ' +
    status.dropped + ' lost \u00b7 ' + status.detections.emitted + ' detections \u00b7 ' +
    status.rules.signatures + ' signatures';
  fill('gpus', telemetry.devices || [], [
    d => d.index + ' (' + d.vendor + ')', d => d.model, d => percent((d.metrics || {}).gpu_utilization_percent),
    d => (d.metrics || {}).memory_used_bytes === undefined ? '' :
         bytes(d.metrics.memory_used_bytes) + ' / ' + bytes(d.metrics.memory_total_bytes),
    d => (d.metrics || {}).temperature_gpu_celsius === undefined ? '' : d.metrics.temperature_gpu_celsius + ' \u00b0C',
    d => (d.metrics || {}).power_draw_watts === undefined ? '' : d.metrics.power_draw_watts.toFixed(0) + ' W'],
    'no GPU telemetry');
  // Each process's verdict is its most severe detection (syslog level:
  // lower is worse), the first listed of equals.
  const detected = {}, level = {};
  for (const d of activity.detections) {
    const pid = (d.process || {}).pid;
    const severity = (d.event || {}).severity ?? 8;
    if (pid === undefined || (pid in level && level[pid] <= severity)) continue;
    level[pid] = severity;
    detected[pid] = d.rule.id + ' ' + (d.rule.name || '');
  }
  fill('processes', processes, [
    p => p.pid, p => p.user,
    p => (Array.isArray(p.cmdline) ? p.cmdline.join(' ') : p.cmdline) || p.comm,
    p => container(p.container),
    p => [...new Set((p.gpus || []).map(g => g.device + (g.driver ? ' (' + g.driver + ')' : '')))].join(', '),
    p => bytes((p.gpu_usage || []).reduce((sum, u) => sum + (u.memory_bytes || 0), 0) || null),
    p => { const span = document.createElement('span');
           span.className = detected[p.pid] ? 'verdict-detected' : 'verdict-clean';
           span.textContent = detected[p.pid] || 'no detection'; return span; }], 'no process holds a GPU');
  fill('mining', data.agent.ps.stratum_sessions || [], [
    s => s.pid, s => s.comm, s => s.protocol,
    s => s.pool_address + ':' + s.pool_port + (s.pool_domain ? ' (' + s.pool_domain + ')' : ''),
    s => s.shares_submitted + ' (' + s.shares_accepted + ' / ' + s.shares_rejected + ')',
    s => hashRate(s)], 'none');
  fill('detections', activity.detections, [
    d => d['@timestamp'], d => (d.log || {}).level || '',
    d => d.rule.id + ' ' + (d.rule.name || ''),
    d => (d.process ? 'pid ' + d.process.pid + ' ' + (d.process.name || '')
                    : 'GPU ' + ((((d.gpuguard || {}).gpus || [])[0] || {}).index ?? '?')) +
         (d.container ? ' in ' + container(ecsContainer(d)) : ''),
    d => (d.event || {}).action || '', d => evidence(d)], 'none');
  fill('actions', activity.actions, [
    a => a['@timestamp'], a => (a.event || {}).action,
    a => ((a.gpuguard || {}).enforcement || {}).outcome || (a.event || {}).outcome,
    a => (a.rule || {}).id, a => a.destination ? a.destination.ip : 'pid ' + ((a.process || {}).pid),
    a => (a.event || {}).reason], 'none');
  fill('blocked', activity.blocked, [
    b => b.ip + (b.port ? ':' + b.port : ''), b => b.rule, b => clock(b.since_unix_ns),
    b => b.expires_unix_ns ? clock(b.expires_unix_ns) : 'until removed'], 'none');
}
async function refresh() {
  try {
    const response = await fetch('/status.json', {cache: 'no-store'});
    if (!response.ok) throw new Error('HTTP ' + response.status);
    render(await response.json());
    document.getElementById('error').textContent = '';
  } catch (error) {
    document.getElementById('error').textContent = 'cannot load /status.json: ' + error.message;
  }
}
refresh();
setInterval(refresh, 2000);
)js";
}

}  // namespace gpuguard::agent
