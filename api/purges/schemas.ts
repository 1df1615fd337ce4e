import { compileBody, projectIdSchema } from '../http/validation';

// The purge request's body: a plain JSON Schema object (2020-12 compatible), exported as is so the OpenAPI document
// shows the very object ajv compiles.

export const purgeRequestSchema = {
  type: 'object',
  properties: {
    projectId: {
      ...projectIdSchema,
      description:
        'The project to purge: its registration, secrets, custom headers, client certificate, contacts, portal links, ' +
        'members, delivery log, Temporal histories and data keys.',
    },
  },
  required: ['projectId'],
  additionalProperties: false,
} as const;

export interface PurgeRequestBody {
  projectId: string;
}

/** The request's body, or a 400 naming each problem (a malformed project id in words, not by pattern). */
export const validatePurgeRequest = compileBody<PurgeRequestBody>(purgeRequestSchema);
