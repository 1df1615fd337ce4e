import { projectIdSchema } from './schemas';

// Building blocks every part of the OpenAPI document uses (./openapi, ./openapi-deliveries, ./openapi-portal), kept
// here so that the parts do not import each other.

export const ref = (kind: 'schemas' | 'responses', name: string) => ({ $ref: `#/components/${kind}/${name}` });
export const json = (schema: object) => ({ 'application/json': { schema } });
/** A response described in words, its body the document's Problem schema. */
export const problem = (description: string) => ({
  description,
  content: { 'application/problem+json': { schema: ref('schemas', 'Problem') } },
});

export const pathParameter = (name: string, description: string, schema: object = { type: 'string' }) =>
  ({ name, in: 'path', required: true, description, schema }) as const;
export const projectIdParameter = pathParameter('projectId', 'Identifier of the project.', projectIdSchema);
