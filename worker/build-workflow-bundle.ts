// `npm run build`: prebuilds the workflow bundle so workers start fast and run exactly the code that was built.
import { writeFile } from 'node:fs/promises';
import { bundleWorkflowCode } from '@temporalio/worker';
import { WORKFLOW_BUNDLE_PATH, workflowBundleOptions } from './start';

async function build(): Promise<void> {
  const { code } = await bundleWorkflowCode(workflowBundleOptions());
  await writeFile(WORKFLOW_BUNDLE_PATH, code);
  process.stdout.write(`workflow bundle written to ${WORKFLOW_BUNDLE_PATH} (${Math.round(code.length / 1024)} kB)\n`);
}

build().catch((error: unknown) => {
  process.stderr.write(`${String(error)}\n`);
  process.exitCode = 1;
});
