// Loaded by path (DataConverter.failureConverterPath) in every client and in the workflow bundle, where the workflow's
// own failures are converted: a failure's message and stack trace go into an encoded attribute, which the payload
// codec encrypts, instead of plain text in the history. Sandbox-safe.
import { DefaultFailureConverter } from '@temporalio/common';

export const failureConverter = new DefaultFailureConverter({ encodeCommonAttributes: true });
