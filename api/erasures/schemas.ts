import { InvalidRequestError } from '../http/errors';
import { compileBody } from '../http/validation';

// The erasure request's body: a plain JSON Schema object (2020-12 compatible), exported as is so the OpenAPI document
// shows the very object ajv compiles.

/** A UUID as the event schema accepts it (ajv-formats' `uuid`): either case, an optional `urn:uuid:` prefix. */
export const USER_UUID_PATTERN =
  '^(?:[Uu][Rr][Nn]:[Uu][Uu][Ii][Dd]:)?[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$';

const USER_UUID_RULE = 'a UUID, the userUUID of the person’s events (e.g. 3f2b8c1e-9a4d-4c6b-8e2f-1a2b3c4d5e6f)';

export const erasureRequestSchema = {
  type: 'object',
  properties: {
    userUUID: {
      type: 'string',
      pattern: USER_UUID_PATTERN,
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

const NIL_UUID = /^(?:urn:uuid:)?0{8}-0{4}-0{4}-0{4}-0{12}$/i;
const validate = compileBody<ErasureRequestBody>(erasureRequestSchema);

/** The request's body, or a 400 naming each problem: a userUUID that is no UUID is named in words, not by pattern. */
export function validateErasureRequest(body: unknown): ErasureRequestBody {
  let request: ErasureRequestBody;
  try {
    request = validate(body);
  } catch (error) {
    if (!(error instanceof InvalidRequestError)) throw error;
    throw new InvalidRequestError(
      error.errors.map((problem) =>
        problem.pointer === '/userUUID' && problem.detail.startsWith('must match pattern')
          ? { pointer: '/userUUID', detail: `must be ${USER_UUID_RULE}` }
          : problem,
      ),
    );
  }
  // The nil UUID is the TEST events' placeholder: it names nobody, and no delivery is logged under it.
  if (NIL_UUID.test(request.userUUID))
    throw new InvalidRequestError([{ pointer: '/userUUID', detail: 'must name a person: the nil UUID names nobody' }]);
  return request;
}
