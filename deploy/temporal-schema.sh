#!/bin/sh
# Creates Temporal's two databases and brings their schema to the server's version; idempotent, run before the server
# starts (docker-compose.yml's temporal-schema service, and `npm run test:production`).
# Connection: SQL_PLUGIN (postgres12), SQL_HOST, SQL_PORT, SQL_USER, SQL_PASSWORD (temporal-sql-tool's variables);
# database names: DBNAME (temporal) and VISIBILITY_DBNAME (temporal_visibility), as the server reads them.
set -eu
tool=${TEMPORAL_SQL_TOOL:-temporal-sql-tool}
for pair in "${DBNAME:-temporal}:temporal" "${VISIBILITY_DBNAME:-temporal_visibility}:visibility"; do
  database=${pair%%:*}
  schema=postgresql/v12/${pair#*:}
  "$tool" --db "$database" create-database
  "$tool" --db "$database" setup-schema -v 0.0
  "$tool" --db "$database" update-schema --schema-name "$schema"
done
