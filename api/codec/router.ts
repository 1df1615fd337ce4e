import { Router, type RouterContext } from '@koa/router';
import type { Context as KoaContext, Middleware } from 'koa';
import Ajv from 'ajv';
import type { Payload, PayloadCodec } from '@temporalio/common';
import { isDevelopment, type Config } from '../../common/config';
import type { Knex } from 'knex';
import {
  DATA_KEY_ID_METADATA_KEY,
  KEY_ID_METADATA_KEY,
  PayloadDecryptionError,
  payloadFromJson,
  payloadToJson,
  type JsonPayload,
} from '../../common/crypto/payload-codec';
import { ApiError, InvalidRequestError } from '../http/errors';
import {
  commaSeparated,
  isOperator,
  NotOperatorError,
  operatorPolicyFromConfig,
  type OperatorPolicy,
} from '../auth/operator-policy';
import { auditActor, recordAudit } from '../http/audited-actions';
import { disclosuresOf, placeByDeliveryLog, type Disclosures } from './disclosures';
import type * as store from '../../db';
import type { PortalGrant } from '../auth/portal-tokens';

type Context = RouterContext<{ user?: unknown; portal?: PortalGrant; localCodecCaller?: boolean }>;

export interface CodecDeps {
  codec: PayloadCodec;
  operators: OperatorPolicy;
  /** Browser origins (the Temporal UI) allowed to call the endpoint. */
  corsOrigins: readonly string[];
  /**
   * Development only (DEV_CODEC_WITHOUT_TOKEN, refused in production): callers on this machine decode without a token
   * (never encode), unless the request came through a proxy.
   */
  localCallersWithoutToken?: boolean;
}

export class UndecodablePayloadError extends ApiError {
  constructor(detail: string) {
    super(400, detail);
  }
}

export const codecCorsOrigins = (config: Pick<Config, 'CODEC_CORS_ORIGINS'>): string[] =>
  commaSeparated(config.CODEC_CORS_ORIGINS);

/** The codec settings of the API from the configuration. */
export const codecAccessFromConfig = (
  config: Pick<
    Config,
    'OPERATOR_SUBJECTS' | 'OPERATOR_ROLE' | 'CODEC_CORS_ORIGINS' | 'DEV_CODEC_WITHOUT_TOKEN' | 'NODE_ENV'
  >,
): Omit<CodecDeps, 'codec'> => ({
  operators: operatorPolicyFromConfig(config),
  corsOrigins: codecCorsOrigins(config),
  // loadConfig refuses the setting outside development already; this holds for a config built another way too.
  localCallersWithoutToken: config.DEV_CODEC_WITHOUT_TOKEN && isDevelopment(config),
});

const CODEC_PATH = /^\/codec\/(encode|decode)$/;
/** The development opening decodes only: an open /codec/encode would seal anything with the payload key. */
const OPENED_PATH = '/codec/decode';
/** Headers a proxy adds: through a same-host proxy every caller would look local, so such a request needs a token. */
const PROXY_HEADER = /^(forwarded|via|x-real-ip|x-forwarded-.*)$/;
const LOOPBACK_ADDRESS = /^(127\.\d+\.\d+\.\d+|::1|::ffff:127\.\d+\.\d+\.\d+)$/;
const LOOPBACK_HOST = /^(localhost|127\.\d+\.\d+\.\d+|\[::1\])(:\d+)?$/i;

/**
 * A caller on this machine: a loopback peer that asked for a loopback host (a page whose name was rebound to
 * 127.0.0.1 still sends its own Host), not through a proxy, and, from a browser, one of the allowed origins.
 */
function isLocalCaller(ctx: Pick<KoaContext, 'get' | 'req'>, deps: Pick<CodecDeps, 'corsOrigins'>): boolean {
  const origin = ctx.get('Origin');
  return (
    !Object.keys(ctx.req.headers).some((name) => PROXY_HEADER.test(name.toLowerCase())) &&
    LOOPBACK_ADDRESS.test(ctx.req.socket.remoteAddress ?? '') &&
    LOOPBACK_HOST.test(ctx.get('Host')) &&
    (origin === '' || deps.corsOrigins.includes(origin))
  );
}

/**
 * The API's authentication with the development opening of the codec endpoint: with localCallersWithoutToken, a
 * local caller (the dev server's UI in the operator's browser) reaches /codec/decode without a token; everyone else,
 * /codec/encode, a request through a proxy, and every caller in production go through `authenticate`.
 */
export function codecAuthentication(deps: CodecDeps, authenticate: Middleware): Middleware {
  if (!deps.localCallersWithoutToken) return authenticate;
  return async (ctx, next) => {
    if (ctx.path === OPENED_PATH && isLocalCaller(ctx, deps)) {
      ctx.state.localCodecCaller = true;
      await next();
    } else await authenticate(ctx, next);
  };
}

/**
 * What the Temporal UI (2.54.1) sets on a codec request: the namespace, and with TEMPORAL_CODEC_PASS_ACCESS_TOKEN the
 * access token and the ID token (`Authorization-Extras`, ignored here; its name keeps it out of the logs).
 */
const CODEC_REQUEST_HEADERS = 'Authorization, Authorization-Extras, Content-Type, X-Namespace';

/**
 * CORS for the codec endpoint, mounted before authentication: the UI's preflight carries no token, and a 401 must
 * still be readable by the page. Only the configured origins are echoed; other paths are untouched.
 */
export function codecCors(deps: Pick<CodecDeps, 'corsOrigins'>): Middleware {
  return async (ctx, next) => {
    if (!CODEC_PATH.test(ctx.path)) {
      await next();
      return;
    }
    const origin = ctx.get('Origin');
    const allowed = origin !== '' && deps.corsOrigins.includes(origin);
    if (allowed) {
      ctx.set('Access-Control-Allow-Origin', origin);
      ctx.set('Access-Control-Allow-Credentials', 'true');
      ctx.vary('Origin');
    }
    if (ctx.method === 'OPTIONS') {
      if (allowed) {
        ctx.set('Access-Control-Allow-Methods', 'POST, OPTIONS');
        ctx.set('Access-Control-Allow-Headers', CODEC_REQUEST_HEADERS);
        ctx.set('Access-Control-Max-Age', '600');
      }
      ctx.status = 204;
      return;
    }
    await next();
  };
}

/** The JSON parser refuses a `__proto__` key at any depth (400): the schema says so wherever a key may appear. */
const notProto = { not: { const: '__proto__' } } as const;
/** Members beside the protocol's are ignored; scalars only, so no object the schema does not name can hold a key. */
const extraMember = {
  type: ['string', 'number', 'boolean', 'null'],
  description: 'Ignored. Scalars only: no object beside those named here may appear in the body.',
} as const;

/** Temporal's remote codec body; exported as is so the OpenAPI document shows the schema validated here. */
export const codecBodySchema = {
  type: 'object',
  description:
    'No object in the body may hold a __proto__ key (400: the body parser refuses it at any depth); members ' +
    'beside those named here are ignored and must be scalars.',
  propertyNames: notProto,
  additionalProperties: extraMember,
  properties: {
    payloads: {
      type: 'array',
      description: 'Temporal payloads in the JSON form of the remote codec protocol.',
      items: {
        type: 'object',
        propertyNames: notProto,
        additionalProperties: extraMember,
        properties: {
          metadata: {
            type: ['object', 'null'],
            propertyNames: notProto,
            additionalProperties: { type: 'string', contentEncoding: 'base64' },
            description: 'Metadata entries (encoding, encryption-key-id, …), each value base64.',
          },
          data: { type: ['string', 'null'], contentEncoding: 'base64', description: 'The payload’s bytes, base64.' },
        },
      },
    },
  },
  required: ['payloads'],
} as const;
const validateBody = new Ajv({ allErrors: true, allowUnionTypes: true }).compile<{ payloads: JsonPayload[] }>(
  codecBodySchema,
);

/** The namespace the Temporal UI names in X-Namespace, when it is one (anything else is not recorded). */
const NAMESPACE = /^[\w.-]{1,200}$/;

/** The id of the key a payload was sealed under: a project's data key or a ring key; none for a plaintext one. */
const sealedKeyId = (payload: Payload | undefined): string | undefined => {
  const id = payload?.metadata?.[DATA_KEY_ID_METADATA_KEY] ?? payload?.metadata?.[KEY_ID_METADATA_KEY];
  return id ? Buffer.from(id).toString('utf8') : undefined;
};

/** The key ids of sealed payloads (the plaintext ones have none), each once, in order. */
const keyIds = (payloads: Payload[]): string[] => [
  ...new Set(payloads.flatMap((payload) => sealedKeyId(payload) ?? [])),
];

/** Whose events a decode opened: only payloads that were sealed (they carry a key id) count. */
async function disclosed(db: Knex, sealed: Payload[], opened: Payload[]): Promise<Disclosures> {
  const keyIdOf = (index: number) => sealedKeyId(sealed[index]);
  const disclosures = disclosuresOf(opened, keyIdOf);
  await placeByDeliveryLog(db, disclosures);
  return disclosures;
}

/**
 * Temporal's remote codec protocol (`{payloads: [...]}` both ways), for operators only. Each call leaves an audit row
 * (the operator, how many payloads, their key ids, the namespace) before its answer: no read without its record; a
 * decode also leaves one in each project whose events it opened, naming the workflows.
 */
export function codecRouter(deps: CodecDeps, db: Knex): Router {
  const transform = (direction: 'encode' | 'decode') => async (ctx: Context) => {
    if (!ctx.state.localCodecCaller && !isOperator(deps.operators, ctx.state.user ?? {})) throw new NotOperatorError();
    const body: unknown = ctx.request.body;
    if (!validateBody(body))
      throw new InvalidRequestError(
        (validateBody.errors ?? []).map((e) => ({ pointer: e.instancePath || '/', detail: e.message ?? 'is invalid' })),
      );
    const payloads = body.payloads.map(payloadFromJson);
    try {
      const result = await deps.codec[direction](payloads);
      const namespace = ctx.get('X-Namespace');
      const actor: store.AuditActor = ctx.state.localCodecCaller
        ? { ...auditActor(ctx), kind: 'system', subject: 'local-codec-caller' }
        : auditActor(ctx);
      const disclosures = direction === 'decode' ? await disclosed(db, payloads, result) : undefined;
      const shared = NAMESPACE.test(namespace) ? { namespace } : {};
      // The operator's row and each opened project's row commit together, before the answer: no read without them.
      await db.transaction(async (trx) => {
        const projects = [...(disclosures?.projects.keys() ?? [])];
        await recordAudit(trx, actor, {
          action: `codec.${direction}`,
          changes: {
            payloads: payloads.length,
            keyIds: keyIds(direction === 'decode' ? payloads : result),
            ...shared,
            ...(projects.length > 0 && { projects }),
          },
        });
        // Members see who read and when, never from where: the operator's address stays in the operators' row.
        const accounted: store.AuditActor = { ...actor, callerAddress: undefined };
        // The operators' row above locks the service chain first, so decodes take the projects' chains one at a time.
        for (const [projectId, opened] of disclosures?.projects ?? [])
          await recordAudit(trx, accounted, {
            action: 'codec.decode',
            projectId,
            changes: {
              workflowIds: [...opened.workflowIds],
              payloads: opened.payloads,
              keyIds: [...opened.keyIds],
              ...shared,
            },
          });
      });
      ctx.body = { payloads: result.map(payloadToJson) };
    } catch (error) {
      if (error instanceof PayloadDecryptionError) throw new UndecodablePayloadError(error.message);
      throw error;
    }
  };
  const router = new Router({ prefix: '/codec' });
  router.post('/encode', transform('encode'));
  router.post('/decode', transform('decode'));
  return router;
}
