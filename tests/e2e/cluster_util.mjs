// Helpers shared by the multi-process end-to-end tests: command-line arguments, starting a
// flashserve subcommand and waiting for its banner, stopping it, waiting for a router's workers.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import { join } from 'node:path';

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// --flashserve BIN --tokenizer FILE; exits 77 (skip) when the tokenizer is missing.
export function parseArgs() {
  const args = Object.fromEntries(
    process.argv.slice(2).reduce((pairs, a, i, all) => (a.startsWith('--') ? [...pairs, [a.slice(2), all[i + 1]]] : pairs), []));
  if (!args.tokenizer || !existsSync(args.tokenizer)) {
    console.log(`SKIP: tokenizer not found at ${args.tokenizer} (run ./scripts/setup.sh)`);
    process.exit(77);
  }
  return args;
}

// The metering store of a test: a SQLite file in `work`, or with --postgres a fresh database
// `name`_PID on the test server ($FLASHSERVE_TEST_PG_URL, or the URL in the file
// $FLASHSERVE_TEST_PG_URL_FILE that tests/pg/pg_server.sh writes); exits 77 without one.
export function meterStore(args, work, name) {
  if (args.postgres === undefined) return join(work, 'meter.db');
  const file = process.env.FLASHSERVE_TEST_PG_URL_FILE;
  const base = process.env.FLASHSERVE_TEST_PG_URL || (file && existsSync(file) ? readFileSync(file, 'utf8').trim() : '');
  if (!base) {
    console.log('SKIP: no PostgreSQL test server (install Debian\'s postgresql, as scripts/setup.sh does)');
    process.exit(77);
  }
  const database = `${name}_${process.pid}`;
  const made = spawnSync('psql', [base, '-qc', `CREATE DATABASE ${database}`], { encoding: 'utf8' });
  if (made.error?.code === 'ENOENT') {
    console.log('SKIP: psql is not installed (Debian\'s postgresql-client; scripts/setup.sh installs it)');
    process.exit(77);
  }
  if (made.status !== 0) throw new Error(`psql: CREATE DATABASE ${database} failed: ${made.stderr || made.error}`);
  const url = new URL(base);
  url.pathname = `/${database}`;
  console.log(`metering store: PostgreSQL database ${database}`);
  return url.toString();
}

// The official SDKs (pinned in tests/e2e/package.json); exits 77 (skip) when they are missing.
export async function officialSdks() {
  try {
    return { Anthropic: (await import('@anthropic-ai/sdk')).default, OpenAI: (await import('openai')).default };
  } catch {
    console.log('SKIP: the npm packages "@anthropic-ai/sdk" / "openai" are not installed (run ./scripts/setup.sh)');
    process.exit(77);
  }
}

// Every process started here; the tests kill the survivors at the end.
export const procs = new Set();

// Starts `flashserve <cmdArgs>` and resolves with { proc, base } once the banner names its URL.
export function start(flashserve, cmdArgs, env = process.env) {
  return new Promise((resolve, reject) => {
    const proc = spawn(flashserve, cmdArgs, { stdio: ['ignore', 'pipe', 'pipe'], env });
    procs.add(proc);
    let out = '';
    const timer = setTimeout(() => reject(new Error(`did not start: ${cmdArgs.join(' ')}\n${out}`)), 120000);
    const onData = (d) => {
      out += d;
      const m = out.match(/on (http:\/\/127\.0\.0\.1:\d+)/);
      if (m) { clearTimeout(timer); resolve({ proc, base: m[1], log: () => out }); }
    };
    proc.stdout.on('data', onData);
    proc.stderr.on('data', onData);
    proc.on('exit', (code) => { procs.delete(proc); clearTimeout(timer); reject(new Error(`exited (${code}):\n${out}`)); });
  });
}

// Runs body(ctx) and exits: 0 when it returns, 1 when it throws (printing the error and the log of
// ctx.server, the server still running, if any). Stops ctx.server, kills every other process
// started here and removes `work` either way.
export async function runE2e(work, body) {
  const ctx = { server: null };
  // A promise that fails while nobody awaits it yet must not end the process before the
  // cleanup below: its workers would be left running.
  process.on('unhandledRejection', (e) => {
    console.error('unhandled rejection:', e);
    for (const p of procs) p.kill('SIGKILL');
    rmSync(work, { recursive: true, force: true });
    process.exit(1);
  });
  let failed = false;
  try {
    await body(ctx);
  } catch (e) {
    failed = true;
    console.error(e);
    if (ctx.server) console.error(ctx.server.log().slice(-3000));
  } finally {
    if (ctx.server) await stop(ctx.server);
    for (const p of procs) p.kill('SIGKILL');
    rmSync(work, { recursive: true, force: true });
  }
  process.exit(failed ? 1 : 0);
}

export async function stop(p, signal = 'SIGTERM') {
  p.proc.removeAllListeners('exit');
  const exited = new Promise((resolve) => p.proc.once('exit', resolve));
  p.proc.kill(signal);
  await Promise.race([exited, sleep(15000)]);
  procs.delete(p.proc);
}

// One sample of a server's /metrics, by its full name with labels (e.g. 'x{tier="memory"}');
// NaN when absent. A 5 s bound, so a paused server fails the caller rather than hanging it.
export async function metricValue(base, name) {
  const text = await (await fetch(`${base}/metrics`, { signal: AbortSignal.timeout(5000) })).text();
  const m = text.match(new RegExp(`^${name.replace(/[{}"]/g, (c) => `\\${c}`)} (\\S+)$`, 'm'));
  return m ? Number(m[1]) : NaN;
}

export async function workersView(router) { return (await (await fetch(`${router.base}/v1/router/workers`)).json()).workers; }

export async function waitHealthy(router, n) {
  for (let i = 0; i < 200; ++i) {
    if ((await workersView(router)).filter((w) => w.healthy).length === n) return;
    await sleep(50);
  }
  throw new Error(`router never saw ${n} healthy workers`);
}

// Forwards every request to `target` and records it with the status and the whole response.
export function startProxy(target) {
  const exchanges = [];  // { path, status, request, response } for every proxied exchange
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const headers = { ...req.headers, host: new URL(target).host };
      const up = http.request(`${target}${req.url}`, { method: req.method, headers }, (upRes) => {
        res.writeHead(upRes.statusCode, upRes.headers);
        const got = [];
        upRes.on('data', (c) => { got.push(c); res.write(c); });
        upRes.on('end', () => {
          res.end();
          let request = null;
          try { request = JSON.parse(body.toString()); } catch { /* not JSON */ }
          exchanges.push({ path: req.url, status: upRes.statusCode, request, response: Buffer.concat(got).toString() });
        });
      });
      up.on('error', (e) => { res.writeHead(502); res.end(String(e)); });
      up.end(body);
    });
  });
  server.exchanges = exchanges;
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

// The named SSE events of a recorded stream.
export function events(text) {
  return text.split('\n\n').filter((f) => f.includes('data: ')).map((f) => {
    const name = (f.match(/^event: (.*)$/m) || [])[1];
    return { name, data: JSON.parse(f.slice(f.indexOf('data: ') + 6).split('\n')[0]) };
  });
}


// Runs `body(base, proxy)` against `flashserve serve <serveArgs>` (on the demo model, its cache in
// `work`) behind a recording proxy, checks that no exchange got a 4xx or 5xx, cleans up and exits
// 0 (pass) or 1 (fail).
export async function runBehindRecorder(flashserve, serveArgs, work, body) {
  let server;
  let proxy;
  let failed = false;
  try {
    server = await start(flashserve, ['serve', '--host', '127.0.0.1', '--port', '0', '--threads', '2', ...serveArgs],
      { ...process.env, XDG_CACHE_HOME: `${work}/cache` });
    proxy = await startProxy(server.base);
    await body(`http://127.0.0.1:${proxy.address().port}`, proxy);
    const bad = proxy.exchanges.filter((e) => e.status >= 400).map((e) => `${e.status} ${e.path} ${e.response.slice(0, 300)}`);
    if (bad.length > 0) throw new Error(`exchanges failed:\n${bad.join('\n')}`);
    const paths = [...new Set(proxy.exchanges.map((e) => e.path.split('?')[0]))].join(', ');
    console.log(`ok - ${proxy.exchanges.length} exchanges (${paths}), none with a 4xx or 5xx`);
  } catch (e) {
    failed = true;
    console.error(e);
    if (server) console.error(server.log().slice(-3000));
  } finally {
    if (proxy) proxy.close();
    if (server) await stop(server);
    for (const p of procs) p.kill('SIGKILL');
    rmSync(work, { recursive: true, force: true });
  }
  process.exit(failed ? 1 : 0);
}
