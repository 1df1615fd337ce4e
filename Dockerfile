# syntax=docker/dockerfile:1
# Image for both processes: the API (default command) and the delivery worker
# (compose overrides the command with `node dist/worker/main.js`).
# glibc base: Temporal's native core bridge ships prebuilt binaries for glibc, not musl.
ARG NODE_IMAGE=node:20.20.2-bookworm-slim

# --- build: all dependencies, TypeScript compile, prebuilt workflow bundle ----------------------------
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN npm run build

# --- production dependencies only -----------------------------------------------------------------------
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

# --- runtime -------------------------------------------------------------------------------------------------
FROM ${NODE_IMAGE} AS runtime
# Production: both processes exit at start naming every missing key (PAYLOAD_ENCRYPTION_KEYS, WEBHOOK_SECRET_KEYS,
# the JWT settings, METRICS_TOKEN for the API); they never generate their own (even with NODE_ENV unset).
ENV NODE_ENV=production \
    PORT=3000
WORKDIR /app
# Owned by root and read-only for the app user: the process cannot rewrite its own code.
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
USER node
EXPOSE 3000
# Exec form: node is the process that receives SIGTERM and drains (no shell in between).
CMD ["node", "dist/api/server.js"]
