import { projectIdSchema } from '../http/validation';

// The OpenAPI document's types and the building blocks every part uses: each resource folder's openapi.ts imports
// these, and ./document assembles the parts, so no part imports another or the assembly.

export const ref = (kind: 'schemas' | 'responses', name: string) => ({ $ref: `#/components/${kind}/${name}` });
export const json = (schema: object) => ({ 'application/json': { schema } });

export const pathParameter = (name: string, description: string, schema: object = { type: 'string' }) =>
  ({ name, in: 'path', required: true, description, schema }) as const;
export const projectIdParameter = pathParameter('projectId', 'Identifier of the project.', projectIdSchema);

export type Json = { readonly [key: string]: unknown };

export interface OpenApiOperation {
  operationId: string;
  summary: string;
  description?: string;
  tags: string[];
  security?: Json[];
  parameters?: Json[];
  requestBody?: Json;
  responses: Record<string, Json>;
}

/** What the app serves beyond the routes every instance has: createApp mounts /codec only when given the codec. */
export interface OpenApiOptions {
  /** AppDeps.codec is given: document POST /codec/encode and /codec/decode. */
  codec: boolean;
}

export type HttpMethod = 'get' | 'put' | 'post' | 'delete' | 'options' | 'head' | 'patch' | 'trace';

export interface OpenApiDocument {
  openapi: '3.1.0';
  info: Json;
  tags: Json[];
  security: Json[];
  paths: Record<string, Partial<Record<HttpMethod, OpenApiOperation>>>;
  components: { schemas: Record<string, Json>; responses: Record<string, Json>; securitySchemes: Record<string, Json> };
}

/** The paths of one part of the document. */
export type Paths = Record<string, Partial<Record<HttpMethod, OpenApiOperation>>>;

const problemJson = (schema: Json) => ({ 'application/problem+json': { schema } });

/** A response described in words, its body a problem schema (the document's Problem unless named). */
export const problemResponse = (description: string, schema: Json = ref('schemas', 'Problem')) => ({
  description,
  content: problemJson(schema),
});
/** A response described in words, its body the document's Problem schema. */
export const problem = (description: string) => problemResponse(description);

/** A required JSON request body, its schema a named component. */
export const bodyOf = (name: string) => ({ required: true, content: json(ref('schemas', name)) });

/** The public probes and documentation: tagged operations, no token. */
export const publicOperation = { tags: ['operations'], security: [] };
