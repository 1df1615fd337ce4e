// Whether the namespace has the search attributes operators find deliveries by, and what running without them costs:
// one check for the worker (at start) and the API (at start and on /readyz).
import type { OperatorService } from '@temporalio/client';
import { PersonHashKey, SEARCH_ATTRIBUTE_KEYS } from '../contract';

export const REQUIRED_SEARCH_ATTRIBUTES: readonly string[] = SEARCH_ATTRIBUTE_KEYS.map((key) => key.name);

export type NamespaceSearchAttributes =
  | { state: 'registered' }
  | { state: 'missing'; missing: string[] }
  /** The server would not list them (a hosted namespace may refuse the operator API): not known to be missing. */
  | { state: 'unknown'; error: unknown };

/** Lists the namespace's search attributes (a NativeConnection's or a Connection's operator service); never throws. */
export async function namespaceSearchAttributes(
  operatorService: Pick<OperatorService, 'listSearchAttributes'>,
  namespace: string,
): Promise<NamespaceSearchAttributes> {
  try {
    const { customAttributes } = await operatorService.listSearchAttributes({ namespace });
    const missing = REQUIRED_SEARCH_ATTRIBUTES.filter((name) => !customAttributes?.[name]);
    return missing.length === 0 ? { state: 'registered' } : { state: 'missing', missing };
  } catch (error) {
    return { state: 'unknown', error };
  }
}

/** Whether one of these is missing: `names` (as listed), and the namespace answered. */
export const isMissing = (found: NamespaceSearchAttributes, names: readonly string[]): boolean =>
  found.state === 'missing' && found.missing.some((name) => names.includes(name));

/** What an operator reads in the log and on /readyz: what still works, what does not, and how to fix it. */
export function missingSearchAttributesDetail(missing: readonly string[], namespace: string): string {
  const filters = missing.filter((name) => name !== PersonHashKey.name);
  const costs = [
    ...(filters.length > 0
      ? [`the Temporal UI and \`temporal workflow list\` cannot list or filter deliveries by ${filters.join(' or ')}`]
      : []),
    ...(missing.includes(PersonHashKey.name)
      ? [
          "an erasure finds a person's deliveries through the delivery log only (the earlier runs of a redelivered " +
            'event, and events the log never took, stay in Temporal)',
        ]
      : []),
  ];
  return (
    `deliveries start and run without them, but ${costs.join(', and ')}; register them as Keyword: ` +
    missing
      .map((name) => `temporal operator search-attribute create --namespace ${namespace} --name ${name} --type Keyword`)
      .join('; ')
  );
}

/** The log line's text; the same words whoever finds them missing (worker or API). */
export const missingSearchAttributesMessage = (missing: readonly string[], namespace: string): string =>
  `search attributes missing: ${missingSearchAttributesDetail(missing, namespace)}`;
