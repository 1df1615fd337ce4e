// The Temporal UI's workflow page as the browser tests read it.
import type { Page } from 'playwright-core';

/**
 * The workflow's Input as the page shows it. The UI may render Input before it has read its codec setting, then again
 * once the payloads went through the codec: this waits for the decoded event (or 60 s), then reads what is shown.
 */
export async function workflowInputShown(page: Page): Promise<string> {
  const input = page.getByTestId('input-and-result').getByRole('textbox', { name: 'Input', exact: true });
  await input
    .filter({ hasText: /"webhookType"/ })
    .waitFor({ timeout: 60_000 })
    .catch(() => undefined);
  return input.innerText();
}
