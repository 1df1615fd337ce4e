import { codecBodySchema } from './router';
import { bodyOf, json, problemResponse, ref, type Json, type OpenApiOperation } from '../openapi/parts';

// The operators' part of the OpenAPI document: ../openapi/document lists it only when the app mounts the codec router.
// The request body is the very object the route's ajv compiles.

const codecPayloadsSchema = {
  type: 'object',
  description: 'The payloads transformed, in the order given.',
  properties: {
    payloads: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          metadata: { type: 'object', additionalProperties: { type: 'string', contentEncoding: 'base64' } },
          data: { type: 'string', contentEncoding: 'base64' },
        },
        required: ['metadata', 'data'],
        additionalProperties: false,
      },
    },
  },
  required: ['payloads'],
  additionalProperties: false,
} as const;

const codecOperation = (direction: 'encode' | 'decode', summary: string, invalid: Json): OpenApiOperation => ({
  operationId: `${direction}Payloads`,
  summary,
  description:
    'Temporal’s remote payload codec, which the Temporal UI and CLI call as their codec endpoint (…/codec). For ' +
    'operators only: a token whose sub is listed in OPERATOR_SUBJECTS, or whose roles (or role) claim holds ' +
    'OPERATOR_ROLE; project members are not operators. Served only by an API given the payload codec ' +
    '(PAYLOAD_ENCRYPTION_KEYS, or the development key outside production); one without it neither serves nor lists ' +
    '/codec. Browser calls from CODEC_CORS_ORIGINS get CORS headers, and their OPTIONS preflight is answered 204 ' +
    'before authentication.',
  tags: ['codec'],
  requestBody: bodyOf('CodecBody'),
  responses: {
    '200': { description: 'The payloads, one for each given.', content: json(ref('schemas', 'CodecPayloads')) },
    '400': invalid,
    '401': ref('responses', 'Unauthorized'),
    '403': problemResponse('The caller is not an operator (not in OPERATOR_SUBJECTS, no OPERATOR_ROLE).'),
    '413': ref('responses', 'TooLarge'),
    '415': ref('responses', 'UnsupportedMediaType'),
    '503': ref('responses', 'Unavailable'),
  },
});

export const codecDocument = {
  tag: {
    name: 'codec',
    description: 'Temporal’s remote payload codec, for operators; served only when payload encryption is set up.',
  },
  paths: {
    '/codec/encode': {
      post: codecOperation(
        'encode',
        'Encrypt Temporal payloads with the first key of PAYLOAD_ENCRYPTION_KEYS',
        ref('responses', 'InvalidBody'),
      ),
    },
    '/codec/decode': {
      post: codecOperation(
        'decode',
        'Decrypt Temporal payloads with the key that sealed each; payloads not encrypted come back unchanged',
        problemResponse(
          'The body is not JSON, or breaks the schema (each problem listed in errors); or a payload cannot be ' +
            'decrypted: sealed with a key not in PAYLOAD_ENCRYPTION_KEYS, truncated or altered (detail names the ' +
            'key id, never content).',
          ref('schemas', 'ValidationProblem'),
        ),
      ),
    },
  },
  schemas: { CodecBody: codecBodySchema, CodecPayloads: codecPayloadsSchema },
} as const;
