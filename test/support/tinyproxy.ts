import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../../dev/ports';

export interface Tinyproxy {
  /** http://127.0.0.1:port, without credentials. */
  url: string;
  port: number;
  /** Everything the proxy has logged so far (it logs each connection and each CONNECT line). */
  log(): string;
  close(): Promise<void>;
}

/**
 * Debian's tinyproxy (scripts/ensure-tinyproxy.sh installs it) as a real forward proxy on 127.0.0.1, in the foreground
 * with a config file of its own in a temporary folder; with `basicAuth` it answers 407 to whoever does not send them,
 * and 403 to a request for a host that matches one of the `refusedHosts` (extended regular expressions).
 */
export async function startTinyproxy(
  options: { basicAuth?: { user: string; password: string }; refusedHosts?: string[] } = {},
) {
  const binary = process.env.TINYPROXY_PATH ?? 'tinyproxy';
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'tinyproxy-'));
  const conf = join(dir, 'tinyproxy.conf');
  const filter = join(dir, 'refused-hosts');
  if (options.refusedHosts) writeFileSync(filter, options.refusedHosts.map((host) => `${host}\n`).join(''));
  writeFileSync(
    conf,
    [
      `Port ${port}`,
      'Listen 127.0.0.1',
      'Timeout 10',
      'LogLevel Info',
      'MaxClients 20',
      'Allow 127.0.0.1',
      ...(options.basicAuth ? [`BasicAuth ${options.basicAuth.user} ${options.basicAuth.password}`] : []),
      ...(options.refusedHosts ? [`Filter "${filter}"`, 'FilterType ere'] : []),
      '',
    ].join('\n'),
  );
  let output = '';
  const child: ChildProcess = spawn(binary, ['-d', '-c', conf], { stdio: ['ignore', 'pipe', 'pipe'] });
  const collect = (chunk: Buffer) => void (output += chunk.toString('utf8'));
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`tinyproxy did not start:\n${output}`)), 10_000);
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(new Error(`cannot run ${binary} (scripts/ensure-tinyproxy.sh installs it): ${error.message}`));
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`tinyproxy exited with ${String(code)}:\n${output}`));
    });
    const ready = () => {
      if (!output.includes('Accepting connections')) return;
      clearTimeout(timer);
      child.stdout?.off('data', ready);
      child.stderr?.off('data', ready);
      resolve();
    };
    child.stdout?.on('data', ready);
    child.stderr?.on('data', ready);
  });
  child.removeAllListeners('exit');
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    log: () => output,
    close: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
        child.kill('SIGTERM');
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  } satisfies Tinyproxy;
}
