import type { Config } from '../../common/config';
import { ApiError } from '../http/errors';

// Who is an operator: the policy every operator-only route (the codec, the audit trail across projects) checks.

/** Who is an operator: listed subjects, or tokens carrying the operator role. Project members are not. */
export interface OperatorPolicy {
  subjects: ReadonlySet<string>;
  role?: string;
}

export class NotOperatorError extends ApiError {
  constructor() {
    super(403, 'The caller is not an operator: the codec endpoint is for subjects listed in OPERATOR_SUBJECTS');
  }
}

/** A comma-separated setting's entries, trimmed, without empty ones. */
export const commaSeparated = (text: string | undefined): string[] =>
  (text ?? '')
    .split(',')
    .map((entry) => entry.trim())
    .filter(Boolean);

export function operatorPolicyFromConfig(config: Pick<Config, 'OPERATOR_SUBJECTS' | 'OPERATOR_ROLE'>): OperatorPolicy {
  return { subjects: new Set(commaSeparated(config.OPERATOR_SUBJECTS)), role: config.OPERATOR_ROLE };
}

/** Whether verified claims make the caller an operator. */
export function isOperator(policy: OperatorPolicy, claims: object): boolean {
  const { sub, roles, role } = claims as { sub?: unknown; roles?: unknown; role?: unknown };
  if (typeof sub === 'string' && policy.subjects.has(sub)) return true;
  if (!policy.role) return false;
  return (Array.isArray(roles) ? (roles as unknown[]) : [roles ?? role]).includes(policy.role);
}
