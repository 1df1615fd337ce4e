import { InvalidRequestError } from '../http/errors';
import { compileBody } from '../http/validation';

// The erasure request's body: a plain JSON Schema object (2020-12 compatible), exported as is so the OpenAPI document
// shows the very object ajv compiles.

/** A UUID as the event schema accepts it (ajv-formats' `uuid`): either case, an optional `urn:uuid:` prefix. */
export const USER_UUID_PATTERN =
  '^(?:[Uu][Rr][Nn]:[Uu][Uu][Ii][Dd]:)?[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$';

/** The nil UUID, in any case, with or without its `urn:uuid:` prefix. */
const NIL_UUID_PATTERN = '^(?:[Uu][Rr][Nn]:[Uu][Uu][Ii][Dd]:)?0{8}-0{4}-0{4}-0{4}-0{12}$';

const USER_UUID_RULE = 'a UUID, the userUUID of the person’s events (e.g. 3f2b8c1e-9a4d-4c6b-8e2f-1a2b3c4d5e6f)';

export const erasureRequestSchema = {
  type: 'object',
  properties: {
    userUUID: {
      type: 'string',
      pattern: USER_UUID_PATTERN,
      // The nil UUID is the TEST events' placeholder: it names nobody, and no delivery is logged under it.
      not: { type: 'string', pattern: NIL_UUID_PATTERN },
      description:
        'The person whose deliveries are erased: the userUUID their events carry. Kept nowhere: only its keyed hash ' +
        '(PERSON_HASH_KEY) is recorded.',
    },
  },
  required: ['userUUID'],
  additionalProperties: false,
} as const;

export interface ErasureRequestBody {
  userUUID: string;
}

const validate = compileBody<ErasureRequestBody>(erasureRequestSchema);
const NIL_UUID_DETAIL = 'must name a person: the nil UUID names nobody';

/** The request's body, or a 400 naming each problem in words (a userUUID that is no UUID, or the nil UUID). */
export function validateErasureRequest(body: unknown): ErasureRequestBody {
  try {
    return validate(body);
  } catch (error) {
    if (!(error instanceof InvalidRequestError)) throw error;
    throw new InvalidRequestError(
      error.errors.map((problem) => {
        if (problem.pointer !== '/userUUID') return problem;
        if (problem.detail.startsWith('must match pattern'))
          return { pointer: '/userUUID', detail: `must be ${USER_UUID_RULE}` };
        if (problem.detail.startsWith('must NOT be valid')) return { pointer: '/userUUID', detail: NIL_UUID_DETAIL };
        return problem;
      }),
    );
  }
}
