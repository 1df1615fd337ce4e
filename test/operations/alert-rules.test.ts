// The shipped Prometheus alerting rules (deploy/prometheus/) checked and unit-tested by Debian's promtool, and held
// to their documentation: every alert has a firing case in the unit tests and a paragraph in docs/operators.md.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { ALERT_RULES_PATH, PROMETHEUS_DEPLOY_DIR, promtoolPath } from '../support/prometheus';

const promtool = (...args: string[]) => {
  const run = spawnSync(promtoolPath(), args, { cwd: PROMETHEUS_DEPLOY_DIR, encoding: 'utf8' });
  assert.ifError(run.error);
  return run;
};

interface RuleTests {
  tests: { alert_rule_test?: { alertname: string; exp_alerts?: unknown[] }[] }[];
}

const alertNames = () =>
  (parse(readFileSync(ALERT_RULES_PATH, 'utf8')) as { groups: { rules: { alert?: string }[] }[] }).groups.flatMap(
    (group) => group.rules.flatMap((rule) => (rule.alert ? [rule.alert] : [])),
  );

describe('Prometheus alerting rules (deploy/prometheus)', function () {
  this.timeout(30_000);

  it('pass promtool check rules', () => {
    const run = promtool('check', 'rules', 'webhook-alerts.rules.yml');
    assert.equal(run.status, 0, run.stdout + run.stderr);
  });

  it('pass their promtool unit tests, which make every alert fire', () => {
    const run = promtool('test', 'rules', 'webhook-alerts.test.yml');
    assert.equal(run.status, 0, run.stdout + run.stderr);
    const tests = parse(readFileSync(join(PROMETHEUS_DEPLOY_DIR, 'webhook-alerts.test.yml'), 'utf8')) as RuleTests;
    const fired = new Set(
      tests.tests.flatMap((t) => (t.alert_rule_test ?? []).filter((a) => a.exp_alerts?.length).map((a) => a.alertname)),
    );
    assert.deepEqual(
      alertNames().filter((name) => !fired.has(name)),
      [],
      'alerts without a case that fires them',
    );
  });

  it('fail promtool when a rule no longer fires as its test expects (the run above is not vacuous)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'alert-rules-'));
    try {
      const rules = readFileSync(ALERT_RULES_PATH, 'utf8');
      const broken = rules.replace('(webhook_circuit_breaker_open) > 0', '(webhook_circuit_breaker_open) > 1');
      assert.notEqual(broken, rules);
      writeFileSync(join(dir, 'webhook-alerts.rules.yml'), broken);
      copyFileSync(join(PROMETHEUS_DEPLOY_DIR, 'webhook-alerts.test.yml'), join(dir, 'webhook-alerts.test.yml'));
      const run = spawnSync(promtoolPath(), ['test', 'rules', 'webhook-alerts.test.yml'], {
        cwd: dir,
        encoding: 'utf8',
      });
      assert.ifError(run.error);
      assert.notEqual(run.status, 0);
      assert.match(run.stdout + run.stderr, /alertname: WebhookCircuitBreakerOpen/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('are each explained in docs/operators.md', () => {
    const docs = readFileSync(join(__dirname, '..', '..', 'docs', 'operators.md'), 'utf8');
    assert.deepEqual(
      alertNames().filter((name) => !docs.includes(`\`${name}\``)),
      [],
      'alerts docs/operators.md does not name',
    );
  });

  it('the scrape example is a valid Prometheus configuration loading these rules', () => {
    const dir = mkdtempSync(join(tmpdir(), 'prometheus-config-'));
    try {
      for (const file of ['prometheus.yml', 'webhook-alerts.rules.yml'])
        copyFileSync(join(PROMETHEUS_DEPLOY_DIR, file), join(dir, file));
      writeFileSync(join(dir, 'metrics-token'), 'metrics-token-0123456789\n');
      const run = spawnSync(promtoolPath(), ['check', 'config', 'prometheus.yml'], { cwd: dir, encoding: 'utf8' });
      assert.ifError(run.error);
      assert.equal(run.status, 0, run.stdout + run.stderr);
      assert.match(run.stdout, new RegExp(`SUCCESS: ${alertNames().length} rules found`));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
