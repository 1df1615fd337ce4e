import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';

/** The shipped rules, their unit tests and the scrape example (deploy/prometheus/). */
export const PROMETHEUS_DEPLOY_DIR = join(__dirname, '..', '..', 'deploy', 'prometheus');
export const ALERT_RULES_PATH = join(PROMETHEUS_DEPLOY_DIR, 'webhook-alerts.rules.yml');

/** Debian's promtool and prometheus (scripts/ensure-prometheus.sh), or PROMTOOL_PATH / PROMETHEUS_PATH. */
export const promtoolPath = () => process.env.PROMTOOL_PATH ?? '/usr/bin/promtool';
export const prometheusPath = () => process.env.PROMETHEUS_PATH ?? '/usr/bin/prometheus';

interface RulesFile {
  groups: { name: string; rules: { alert?: string; for?: string }[] }[];
}

/**
 * The shipped rules with every `for:` set to `forDuration`: the same expressions, so a live test proves them, with
 * waits a test can afford. Written as YAML (what Prometheus reads), not edited as text.
 */
export function alertRulesForTest(forDuration: string): string {
  const rules = parse(readFileSync(ALERT_RULES_PATH, 'utf8')) as RulesFile;
  for (const group of rules.groups) for (const rule of group.rules) if (rule.for) rule.for = forDuration;
  return stringify(rules);
}
