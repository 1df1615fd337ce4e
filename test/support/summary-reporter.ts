// Mocha's spec reporter plus the closing line CI reads: "N passed, N failed".
import Mocha from 'mocha';

class SummaryReporter extends Mocha.reporters.Spec {
  constructor(runner: Mocha.Runner, options?: Mocha.MochaOptions) {
    super(runner, options);
    runner.once(Mocha.Runner.constants.EVENT_RUN_END, () => {
      const { passes = 0, failures = 0, pending = 0 } = runner.stats ?? {};
      const skipped = pending > 0 ? `, ${pending} skipped` : '';
      process.stdout.write(`${passes} passed, ${failures} failed${skipped}\n`);
    });
  }
}

export = SummaryReporter;
