import type { Knex } from 'knex';

/**
 * The delivery log partitioned by day (UTC) of each delivery's creation, so that retention drops a whole day's
 * partitions instead of deleting rows (no long DELETE, no dead tuples left for vacuum), and reads stay indexed within
 * each partition. `deliveries` is partitioned on `created_at` with the primary key (id, created_at);
 * `delivery_attempts` carries its delivery's `created_at` as `delivery_created_at` and is partitioned on it with the
 * same bounds, so a day's attempts are dropped with their day's deliveries.
 *
 * No foreign key from the attempts to the deliveries: PostgreSQL refuses to drop a partition of a referenced table
 * (other objects depend on it) and checks every referencing row on DETACH, which defeats dropping a day. The writes of
 * db/deliveries.ts write both rows in one statement, and an erasure or a purge deletes the attempts with their rows.
 *
 * `delivery_log_maintain(retention_days, days_ahead)` (SECURITY DEFINER, owned by the owner running this migration,
 * executed by the worker role: db/roles.ts) creates the days ahead and drops the days past retention; the workers are
 * no tables' owners and cannot run DDL themselves. A DEFAULT partition of each table takes any row whose day has no
 * partition yet (the workers stopped for a week), so an insert never fails; the next maintenance moves them out.
 *
 * The index on `updated_at` (migration 003) served the row-by-row purge only; it is not made again.
 *
 * `last_attempt_at` on the delivery's row (written by the attempt's own statement, at the attempt's `at`): the list
 * showed each row's last attempt through a subquery on `delivery_attempts`, which across partitions the planner can
 * no longer answer from the one partition's index for one row (it sorts every attempt of the delivery), and planning
 * it for every partition costs more than the read itself.
 */

const DELIVERY_INDEXES = [
  ['deliveries_project_id_created_at_id_index', '(project_id, created_at, id)'],
  ['deliveries_project_status_created_id', '(project_id, status, created_at, id)'],
  ['deliveries_project_type_created_id', '(project_id, type, created_at, id)'],
  ['deliveries_project_status_type_created_id', '(project_id, status, type, created_at, id)'],
] as const;

/** One day's pair of partitions (idempotent): made apart, filled with the DEFAULT partitions' rows of that day, attached. */
const ADD_DAY = `
CREATE FUNCTION delivery_log_add_day(day date) RETURNS boolean
LANGUAGE plpgsql SET search_path = :schema, pg_temp AS $$
DECLARE
  suffix text := to_char(day, 'YYYYMMDD');
  lo timestamptz := day::timestamp AT TIME ZONE 'UTC';
  hi timestamptz := (day + 1)::timestamp AT TIME ZONE 'UTC';
BEGIN
  IF to_regclass('deliveries_p' || suffix) IS NOT NULL THEN
    RETURN false;
  END IF;
  -- Made as plain tables, filled, then attached: CREATE TABLE … PARTITION OF would refuse while DEFAULT holds rows
  -- of the day.
  EXECUTE format('CREATE TABLE %I (LIKE deliveries)', 'deliveries_p' || suffix);
  EXECUTE format('CREATE TABLE %I (LIKE delivery_attempts)', 'delivery_attempts_p' || suffix);
  -- A row the DEFAULT partition holds for this day would make ATTACH fail: it moves first.
  EXECUTE format('WITH moved AS (DELETE FROM deliveries_default WHERE created_at >= $1 AND created_at < $2 RETURNING *)
                  INSERT INTO %I SELECT * FROM moved', 'deliveries_p' || suffix) USING lo, hi;
  EXECUTE format('WITH moved AS (DELETE FROM delivery_attempts_default
                                  WHERE delivery_created_at >= $1 AND delivery_created_at < $2 RETURNING *)
                  INSERT INTO %I SELECT * FROM moved', 'delivery_attempts_p' || suffix) USING lo, hi;
  -- A second first write of an id on the same day fails on it (23505; the activity retries and finds the row): the
  -- primary key (id, created_at) would let two rows of one id differ by a millisecond.
  EXECUTE format('CREATE UNIQUE INDEX %I ON %I (id)', 'deliveries_p' || suffix || '_id', 'deliveries_p' || suffix);
  EXECUTE format('ALTER TABLE deliveries ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
                 'deliveries_p' || suffix, lo, hi);
  EXECUTE format('ALTER TABLE delivery_attempts ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
                 'delivery_attempts_p' || suffix, lo, hi);
  RETURN true;
END $$`;

/**
 * Drops each pair of partitions whose whole day ended more than retention_days ago, unless it still holds a pending or
 * held delivery (it goes at a later call, once they have ended); creates the days from today through today +
 * days_ahead, and any day the DEFAULT partitions hold rows of (dropped at once if past retention).
 *
 * When there is anything to drop or create (about once a day) both parents are locked ACCESS EXCLUSIVE first,
 * deliveries then attempts, the order every read and write of the log takes them: dropping a partition locks its
 * parent so anyway, and a drop or an ATTACH (which locks the DEFAULT partition) taken piecemeal would deadlock with a
 * read holding `deliveries` and waiting for the other. What runs under the lock is catalog work and a look at each
 * day's open rows through their partial index: milliseconds (the days' rows are counted before). A lock not had within lock_timeout leaves the work for the next call ('busy')
 * rather than keep the log's readers queued behind it.
 */
const MAINTAIN = `
CREATE FUNCTION delivery_log_maintain(retention_days integer, days_ahead integer)
RETURNS TABLE (action text, day date, deliveries bigint, attempts bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = :schema, pg_temp SET lock_timeout = '1s' AS $$
#variable_conflict use_column
DECLARE
  today date := (now() AT TIME ZONE 'UTC')::date;
  horizon timestamptz := now() - make_interval(days => retention_days);
  d date;
  due date[] := '{}';
  due_deliveries bigint[] := '{}';
  due_attempts bigint[] := '{}';
  missing date[] := '{}';
  open_rows bigint;
  n_deliveries bigint;
  n_attempts bigint;
  i integer;
BEGIN
  IF retention_days IS NULL OR retention_days < 1 THEN
    RAISE EXCEPTION 'retention_days must be at least 1, got %', retention_days USING ERRCODE = '22023';
  END IF;
  IF days_ahead IS NULL OR days_ahead < 0 OR days_ahead > 60 THEN
    RAISE EXCEPTION 'days_ahead must be between 0 and 60, got %', days_ahead USING ERRCODE = '22023';
  END IF;
  -- One maintenance at a time (every worker runs it): a second waits, then finds the work done.
  PERFORM pg_advisory_xact_lock(hashtext('delivery_log_maintain'));
  -- The days past retention holding no open delivery, looked at and counted without a lock (a past day's rows only
  -- go, never come); the others are kept.
  FOR d IN
    SELECT to_date(substr(c.relname, length('deliveries_p') + 1), 'YYYYMMDD')
      FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
     WHERE i.inhparent = 'deliveries'::regclass AND c.relname ~ '^deliveries_p[0-9]{8}$'
     ORDER BY 1
  LOOP
    CONTINUE WHEN ((d + 1)::timestamp AT TIME ZONE 'UTC') > horizon;
    open_rows := delivery_log_open_rows(d);
    IF open_rows > 0 THEN
      action := 'kept'; day := d; deliveries := open_rows; attempts := NULL;
      RETURN NEXT;
    ELSE
      due := due || d;
      EXECUTE format('SELECT count(*) FROM %I', 'deliveries_p' || to_char(d, 'YYYYMMDD')) INTO n_deliveries;
      EXECUTE format('SELECT count(*) FROM %I', 'delivery_attempts_p' || to_char(d, 'YYYYMMDD')) INTO n_attempts;
      due_deliveries := due_deliveries || n_deliveries;
      due_attempts := due_attempts || n_attempts;
    END IF;
  END LOOP;
  SELECT coalesce(array_agg(g ORDER BY g), '{}') INTO missing FROM (
    SELECT g::date AS g FROM generate_series(today, today + days_ahead, interval '1 day') AS g
    UNION SELECT DISTINCT (created_at AT TIME ZONE 'UTC')::date FROM deliveries_default
  ) AS days WHERE to_regclass('deliveries_p' || to_char(g, 'YYYYMMDD')) IS NULL;
  IF cardinality(due) = 0 AND cardinality(missing) = 0 THEN
    RETURN;
  END IF;
  BEGIN
    LOCK TABLE deliveries IN ACCESS EXCLUSIVE MODE;
    LOCK TABLE delivery_attempts IN ACCESS EXCLUSIVE MODE;
  EXCEPTION WHEN lock_not_available THEN
    FOREACH d IN ARRAY due LOOP
      action := 'busy'; day := d; deliveries := NULL; attempts := NULL;
      RETURN NEXT;
    END LOOP;
    RETURN;
  END;
  FOREACH d IN ARRAY missing LOOP
    PERFORM delivery_log_add_day(d);
    action := 'created'; day := d;
    EXECUTE format('SELECT count(*) FROM %I', 'deliveries_p' || to_char(d, 'YYYYMMDD')) INTO deliveries;
    EXECUTE format('SELECT count(*) FROM %I', 'delivery_attempts_p' || to_char(d, 'YYYYMMDD')) INTO attempts;
    RETURN NEXT;
    IF ((d + 1)::timestamp AT TIME ZONE 'UTC') <= horizon THEN
      due := due || d;
      due_deliveries := due_deliveries || deliveries;
      due_attempts := due_attempts || attempts;
    END IF;
  END LOOP;
  FOR i IN 1 .. coalesce(array_length(due, 1), 0) LOOP
    d := due[i];
    day := d;
    -- Looked at again under the lock (through the index of open rows): a redelivery may have made one pending since.
    open_rows := delivery_log_open_rows(d);
    IF open_rows > 0 THEN
      action := 'kept'; deliveries := open_rows; attempts := NULL;
    ELSE
      deliveries := due_deliveries[i]; attempts := due_attempts[i];
      EXECUTE format('DROP TABLE %I', 'delivery_attempts_p' || to_char(d, 'YYYYMMDD'));
      EXECUTE format('DROP TABLE %I', 'deliveries_p' || to_char(d, 'YYYYMMDD'));
      action := 'dropped';
    END IF;
    RETURN NEXT;
  END LOOP;
END $$`;

/** How many of a day's deliveries are still pending or held (a day holding any is not dropped). */
const OPEN_ROWS = `
CREATE FUNCTION delivery_log_open_rows(day date) RETURNS bigint
LANGUAGE plpgsql SET search_path = :schema, pg_temp AS $$
DECLARE
  n bigint;
BEGIN
  EXECUTE format('SELECT count(*) FROM %I WHERE status IN (''pending'', ''held'')', 'deliveries_p' || to_char(day, 'YYYYMMDD'))
    INTO n;
  RETURN n;
END $$`;

async function schemaName(knex: Knex): Promise<string> {
  const { rows } = await knex.raw<{ rows: { schema: string }[] }>('SELECT current_schema() AS schema');
  return rows[0]!.schema;
}

async function createFunctions(knex: Knex): Promise<void> {
  const schema = knex.raw('??', [await schemaName(knex)]).toQuery();
  for (const body of [ADD_DAY, OPEN_ROWS, MAINTAIN]) await knex.raw(body.replace(':schema', schema));
  // Nobody runs them but the owner and the roles db/roles.ts grants EXECUTE to.
  await knex.raw('REVOKE ALL ON FUNCTION delivery_log_add_day(date) FROM PUBLIC');
  await knex.raw('REVOKE ALL ON FUNCTION delivery_log_open_rows(date) FROM PUBLIC');
  await knex.raw('REVOKE ALL ON FUNCTION delivery_log_maintain(integer, integer) FROM PUBLIC');
}

export async function up(knex: Knex): Promise<void> {
  // The attempts' `seq` keeps counting from where it is: it is a page's cursor in the API.
  await knex.raw('ALTER SEQUENCE delivery_attempts_seq_seq OWNED BY NONE');
  await knex.raw('ALTER TABLE delivery_attempts RENAME TO delivery_attempts_unpartitioned');
  await knex.raw('ALTER TABLE deliveries RENAME TO deliveries_unpartitioned');
  // The columns of migrations 003, 009 and 021, in their order.
  await knex.raw(`
    CREATE TABLE deliveries (
      id text NOT NULL,
      project_id text NOT NULL,
      type text NOT NULL,
      status text NOT NULL,
      attempts integer NOT NULL DEFAULT 0,
      last_status_code integer,
      last_error text,
      workflow_id text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now()),
      updated_at timestamptz NOT NULL DEFAULT now(),
      run_id text,
      person_hash text,
      last_attempt_at timestamptz
    ) PARTITION BY RANGE (created_at)`);
  await knex.raw(`
    CREATE TABLE delivery_attempts (
      seq bigint NOT NULL DEFAULT nextval('delivery_attempts_seq_seq'),
      delivery_id text NOT NULL,
      delivery_created_at timestamptz NOT NULL,
      workflow_id text NOT NULL,
      run_attempt integer NOT NULL,
      at timestamptz NOT NULL DEFAULT now(),
      status_code integer,
      error_code text,
      duration_ms integer NOT NULL
    ) PARTITION BY RANGE (delivery_created_at)`);
  await knex.raw('CREATE TABLE deliveries_default PARTITION OF deliveries DEFAULT');
  await knex.raw('CREATE TABLE delivery_attempts_default PARTITION OF delivery_attempts DEFAULT');
  await knex.raw('CREATE UNIQUE INDEX deliveries_default_id ON deliveries_default (id)');
  await createFunctions(knex);
  // Every day from the oldest row's through a week ahead, then the rows (indexes are built after, on full tables).
  await knex.raw(`
    SELECT delivery_log_add_day(day::date)
      FROM generate_series(
             (SELECT least((now() AT TIME ZONE 'UTC')::date, (min(created_at) AT TIME ZONE 'UTC')::date)
                FROM deliveries_unpartitioned),
             (now() AT TIME ZONE 'UTC')::date + 7, interval '1 day') AS day`);
  await knex.raw(`
    INSERT INTO deliveries (id, project_id, type, status, attempts, last_status_code, last_error, workflow_id,
                            created_at, updated_at, run_id, person_hash, last_attempt_at)
    SELECT d.id, project_id, type, status, attempts, last_status_code, last_error, d.workflow_id, created_at, updated_at,
           run_id, person_hash, last.at
      FROM deliveries_unpartitioned d
      LEFT JOIN (SELECT DISTINCT ON (delivery_id) delivery_id, at FROM delivery_attempts_unpartitioned
                  ORDER BY delivery_id, seq DESC) AS last ON last.delivery_id = d.id`);
  await knex.raw(`
    INSERT INTO delivery_attempts (seq, delivery_id, delivery_created_at, workflow_id, run_attempt, at, status_code,
                                   error_code, duration_ms)
    SELECT a.seq, a.delivery_id, d.created_at, a.workflow_id, a.run_attempt, a.at, a.status_code, a.error_code,
           a.duration_ms
      FROM delivery_attempts_unpartitioned a JOIN deliveries_unpartitioned d ON d.id = a.delivery_id`);
  await knex.raw('DROP TABLE delivery_attempts_unpartitioned');
  await knex.raw('DROP TABLE deliveries_unpartitioned');
  await knex.raw('ALTER SEQUENCE delivery_attempts_seq_seq OWNED BY delivery_attempts.seq');
  await knex.raw('ALTER TABLE deliveries ADD CONSTRAINT deliveries_pkey PRIMARY KEY (id, created_at)');
  for (const [name, columns] of DELIVERY_INDEXES) await knex.raw(`CREATE INDEX ${name} ON deliveries ${columns}`);
  await knex.raw('CREATE INDEX deliveries_person_hash ON deliveries (person_hash) WHERE person_hash IS NOT NULL');
  // The few open rows, so the maintenance finds whether a past day still holds one without reading the day.
  await knex.raw(`CREATE INDEX deliveries_open ON deliveries (status) WHERE status IN ('pending', 'held')`);
  await knex.raw(
    'ALTER TABLE delivery_attempts ADD CONSTRAINT delivery_attempts_pkey PRIMARY KEY (seq, delivery_created_at)',
  );
  await knex.raw(`ALTER TABLE delivery_attempts ADD CONSTRAINT delivery_attempts_run_attempt_unique
                    UNIQUE (delivery_id, delivery_created_at, workflow_id, run_attempt)`);
  await knex.raw(
    'CREATE INDEX delivery_attempts_delivery_seq ON delivery_attempts (delivery_id, delivery_created_at, seq)',
  );
  await knex.raw('ANALYZE deliveries');
  await knex.raw('ANALYZE delivery_attempts');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP FUNCTION delivery_log_maintain(integer, integer)');
  await knex.raw('DROP FUNCTION delivery_log_open_rows(date)');
  await knex.raw('DROP FUNCTION delivery_log_add_day(date)');
  await knex.raw('ALTER SEQUENCE delivery_attempts_seq_seq OWNED BY NONE');
  await knex.raw('ALTER TABLE delivery_attempts RENAME TO delivery_attempts_partitioned');
  await knex.raw('ALTER TABLE deliveries RENAME TO deliveries_partitioned');
  await knex.raw('ALTER INDEX deliveries_pkey RENAME TO deliveries_partitioned_pkey');
  for (const [name] of DELIVERY_INDEXES) await knex.raw(`DROP INDEX ${name}`);
  await knex.raw('DROP INDEX deliveries_person_hash');
  await knex.raw('DROP INDEX deliveries_open');
  await knex.raw('DROP INDEX delivery_attempts_delivery_seq');
  await knex.raw('ALTER TABLE delivery_attempts_partitioned DROP CONSTRAINT delivery_attempts_pkey');
  await knex.raw('ALTER TABLE delivery_attempts_partitioned DROP CONSTRAINT delivery_attempts_run_attempt_unique');
  // As migrations 003, 009, 010 and 021 left them. Of two rows with one id (days apart), the newest stays.
  await knex.raw(`
    CREATE TABLE deliveries (
      id text PRIMARY KEY,
      project_id text NOT NULL,
      type text NOT NULL,
      status text NOT NULL,
      attempts integer NOT NULL DEFAULT 0,
      last_status_code integer,
      last_error text,
      workflow_id text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now()),
      updated_at timestamptz NOT NULL DEFAULT now(),
      run_id text,
      person_hash text
    )`);
  await knex.raw(`
    INSERT INTO deliveries SELECT DISTINCT ON (id) id, project_id, type, status, attempts, last_status_code, last_error,
           workflow_id, created_at, updated_at, run_id, person_hash
      FROM deliveries_partitioned ORDER BY id, created_at DESC`);
  await knex.raw(`
    CREATE TABLE delivery_attempts (
      seq bigint PRIMARY KEY DEFAULT nextval('delivery_attempts_seq_seq'),
      delivery_id text NOT NULL,
      workflow_id text NOT NULL,
      run_attempt integer NOT NULL,
      at timestamptz NOT NULL DEFAULT now(),
      status_code integer,
      error_code text,
      duration_ms integer NOT NULL,
      CONSTRAINT delivery_attempts_delivery_id_foreign FOREIGN KEY (delivery_id) REFERENCES deliveries (id)
        ON DELETE CASCADE,
      CONSTRAINT delivery_attempts_delivery_id_workflow_id_run_attempt_unique UNIQUE (delivery_id, workflow_id, run_attempt)
    )`);
  await knex.raw(`
    INSERT INTO delivery_attempts (seq, delivery_id, workflow_id, run_attempt, at, status_code, error_code, duration_ms)
    SELECT a.seq, a.delivery_id, a.workflow_id, a.run_attempt, a.at, a.status_code, a.error_code, a.duration_ms
      FROM delivery_attempts_partitioned a JOIN deliveries d ON d.id = a.delivery_id AND d.created_at = a.delivery_created_at`);
  await knex.raw('DROP TABLE delivery_attempts_partitioned');
  await knex.raw('DROP TABLE deliveries_partitioned');
  await knex.raw('ALTER SEQUENCE delivery_attempts_seq_seq OWNED BY delivery_attempts.seq');
  await knex.raw('CREATE INDEX deliveries_project_id_created_at_id_index ON deliveries (project_id, created_at, id)');
  await knex.raw('CREATE INDEX deliveries_updated_at_index ON deliveries (updated_at)');
  for (const [name, columns] of DELIVERY_INDEXES.slice(1))
    await knex.raw(`CREATE INDEX ${name} ON deliveries ${columns}`);
  await knex.raw('CREATE INDEX deliveries_person_hash ON deliveries (person_hash) WHERE person_hash IS NOT NULL');
  await knex.raw('CREATE INDEX delivery_attempts_delivery_seq ON delivery_attempts (delivery_id, seq)');
}
