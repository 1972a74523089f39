// Helpers shared by the multi-process end-to-end tests: command-line arguments, starting a
// flashserve subcommand and waiting for its banner, stopping it, waiting for a router's workers.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';

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

export async function stop(p, signal = 'SIGTERM') {
  p.proc.removeAllListeners('exit');
  const exited = new Promise((resolve) => p.proc.once('exit', resolve));
  p.proc.kill(signal);
  await Promise.race([exited, sleep(15000)]);
  procs.delete(p.proc);
}

export async function workersView(router) { return (await (await fetch(`${router.base}/v1/router/workers`)).json()).workers; }

export async function waitHealthy(router, n) {
  for (let i = 0; i < 200; ++i) {
    if ((await workersView(router)).filter((w) => w.healthy).length === n) return;
    await sleep(50);
  }
  throw new Error(`router never saw ${n} healthy workers`);
}
