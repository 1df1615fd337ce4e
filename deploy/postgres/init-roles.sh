#!/bin/sh
# The database roles of docker-compose.yml, made by the postgres image's superuser (POSTGRES_USER) on the first start
# of an empty data volume (/docker-entrypoint-initdb.d). Idempotent: run it again to add the roles to an older volume
# or to change their passwords (docs/operators.md, "Database roles"):
#   docker compose exec postgres sh /docker-entrypoint-initdb.d/init-roles.sh
#   webhooks_owner   owns the webhooks database and its tables: `webhooks migrate` and `webhooks audit prune` only
#   webhooks_api     the API; webhooks_worker the delivery workers: what `webhooks migrate` grants them (db/roles.ts)
#   temporal         the Temporal server and its schema step: its own two databases, nothing of the service's
# Passwords from the container's environment: DATABASE_OWNER_PASSWORD, DATABASE_API_PASSWORD,
# DATABASE_WORKER_PASSWORD, TEMPORAL_DB_PASSWORD (never on a command line).
set -eu
# The service's database: POSTGRES_DB, as the image names it (webhooks in docker-compose.yml).
export POSTGRES_DB="${POSTGRES_DB:-webhooks}"
for variable in DATABASE_OWNER_PASSWORD DATABASE_API_PASSWORD DATABASE_WORKER_PASSWORD TEMPORAL_DB_PASSWORD; do
  eval "value=\${$variable:-}"
  if [ -z "$value" ]; then
    echo "init-roles.sh: $variable is not set" >&2
    exit 1
  fi
done
psql -v ON_ERROR_STOP=1 --no-psqlrc --username "${POSTGRES_USER:-postgres}" --dbname postgres <<'SQL'
\getenv owner_password DATABASE_OWNER_PASSWORD
\getenv api_password DATABASE_API_PASSWORD
\getenv worker_password DATABASE_WORKER_PASSWORD
\getenv temporal_password TEMPORAL_DB_PASSWORD
\getenv database POSTGRES_DB
SELECT format('CREATE ROLE %I', name) FROM (VALUES ('webhooks_owner'), ('webhooks_api'), ('webhooks_worker'), ('temporal')) AS r(name)
 WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r.name) \gexec
ALTER ROLE webhooks_owner LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD :'owner_password';
ALTER ROLE webhooks_api LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD :'api_password';
ALTER ROLE webhooks_worker LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD :'worker_password';
-- temporal-sql-tool creates Temporal's two databases (deploy/temporal-schema.sh): they are the temporal role's.
ALTER ROLE temporal LOGIN NOSUPERUSER CREATEDB NOCREATEROLE PASSWORD :'temporal_password';
SELECT format('CREATE DATABASE %I OWNER webhooks_owner', :'database')
 WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = :'database') \gexec
ALTER DATABASE :"database" OWNER TO webhooks_owner;
-- Only the service's roles reach its database (PUBLIC's default CONNECT would let temporal in too).
REVOKE ALL ON DATABASE :"database" FROM PUBLIC;
GRANT CONNECT ON DATABASE :"database" TO webhooks_api, webhooks_worker;
\connect :"database"
-- The owner creates the tables; no other role creates anything in the schema.
ALTER SCHEMA public OWNER TO webhooks_owner;
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
SQL
