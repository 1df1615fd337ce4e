// What the standalone bench scripts (bench:log, bench:partitions, bench:log-writes) share: their progress lines and their options.

/** A progress line on stderr, stamped with the time and the script's name (stdout keeps the figures). */
export function progressLog(script: string): (message: string) => void {
  return (message) => process.stderr.write(`[${script} ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}

/** `--name N` from the command line, a positive integer; the fallback when absent. */
export function positiveIntOption(name: string, fallback: number): number {
  const at = process.argv.indexOf(`--${name}`);
  if (at < 0) return fallback;
  const value = Number(process.argv[at + 1]);
  if (!Number.isInteger(value) || value < 1) throw new Error(`--${name} must be a positive integer`);
  return value;
}
