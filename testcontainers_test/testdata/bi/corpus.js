// corpus.js prints, as JSON, the SQL that BI tools generate for the test's
// events table, for each time zone named on the command line:
//
//   node corpus.js UTC America/New_York Asia/Kolkata
//
// {"versions": {package: version}, "statements": [{tool, shape, zone, sql,
// params, session_time_zone, note}]}. sql is the text the tool would send to
// PostgreSQL; params, when the tool binds parameters ($1, $2, ...), their
// values as the tool holds them; session_time_zone, when set, the TimeZone the
// application gives its session before the statement.
//
// The table is events(id bigint PRIMARY KEY, created_at timestamptz NOT NULL,
// user_id bigint NOT NULL, country text, device text NOT NULL, amount
// numeric(10,2) NOT NULL), 2026-01-01 to early April 2026. Every distinct count
// is in an output column (or, in Malloy's JSON rows, under a key) whose name
// contains "users", and nothing else is: the test compares those within the
// sketch's error and every other value exactly.
//
// Nothing here connects to a database: Cube compiles its model and plans with
// its JavaScript planner (@cubejs-backend/native, which holds the Rust planner
// and the Jinja engine, is installed without its binary), Malloy reads the
// table's schema from a connection that answers from the table definition
// above, knex and kysely only build queries.
'use strict';

const path = require('path');

const zones = process.argv.slice(2);
if (zones.length === 0) {
  console.error('usage: node corpus.js ZONE...');
  process.exit(2);
}

function version(pkg) {
  return require(path.join(__dirname, 'node_modules', pkg, 'package.json')).version;
}

const statements = [];
function add(tool, shape, zone, sql, params, extra) {
  statements.push({ tool, shape, zone, sql, params: params || [], ...(extra || {}) });
}

// Local calendar dates the dashboards ask about. 2026-03-08 is the change to
// daylight saving time in New York; Kolkata is 5:30 ahead of UTC all year.
const RANGE = {
  days: ['2026-03-01', '2026-03-14'],
  weeks: ['2026-01-05', '2026-03-29'],
  months: ['2026-01-01', '2026-03-31'],
  feb: ['2026-02-01', '2026-02-28'],
  // Rolling windows: a week of 7-day windows (Cube's form joins every
  // output day to every row of the range, which PostgreSQL runs slowly).
  rolling: ['2026-02-01', '2026-02-07'],
};

// The UTC instant of local midnight at the start of date in zone, as ISO text
// with an offset ('2026-03-01T00:00:00-05:00'): what an application computes
// for a dashboard's date range and binds.
function localMidnight(date, zone) {
  const [y, m, d] = date.split('-').map(Number);
  // Find the offset by formatting a UTC guess in the zone, twice (the second
  // pass corrects for an offset change between the guess and the answer).
  let t = Date.UTC(y, m - 1, d);
  for (let i = 0; i < 2; i++) {
    const parts = Object.fromEntries(new Intl.DateTimeFormat('en-US', {
      timeZone: zone, hourCycle: 'h23', year: 'numeric', month: '2-digit', day: '2-digit',
      hour: '2-digit', minute: '2-digit', second: '2-digit',
    }).formatToParts(new Date(t)).map(p => [p.type, p.value]));
    const shown = Date.UTC(+parts.year, +parts.month - 1, +parts.day, +parts.hour, +parts.minute, +parts.second);
    t -= shown - Date.UTC(y, m - 1, d);
  }
  const offsetMin = Math.round((Date.UTC(y, m - 1, d) - t) / 60000);
  const sign = offsetMin < 0 ? '-' : '+';
  const abs = Math.abs(offsetMin);
  const hh = String(Math.floor(abs / 60)).padStart(2, '0');
  const mm = String(abs % 60).padStart(2, '0');
  return `${date}T00:00:00${sign}${hh}:${mm}`;
}

function nextDay(date) {
  const t = new Date(date + 'T00:00:00Z');
  t.setUTCDate(t.getUTCDate() + 1);
  return t.toISOString().slice(0, 10);
}

// ---------------------------------------------------------------- Cube

const cubeModel = `
cube('events', {
  sql_table: 'events',
  measures: {
    count: { type: 'count' },
    users: { type: 'count_distinct', sql: 'user_id' },
    revenue: { type: 'sum', sql: 'amount' },
    min_amount: { type: 'min', sql: 'amount' },
    latest: { type: 'max', sql: 'created_at' },
    ios_users: { type: 'count_distinct', sql: 'user_id', filters: [{ sql: \`\${CUBE}.device = 'ios'\` }] },
    de_revenue: { type: 'sum', sql: 'amount', filters: [{ sql: \`\${CUBE}.country = 'DE'\` }] },
    de_count: { type: 'count', filters: [{ sql: \`\${CUBE}.country = 'DE'\` }] },
    users_7d: { type: 'count_distinct', sql: 'user_id', rolling_window: { trailing: '7 day' } },
  },
  dimensions: {
    id: { sql: 'id', type: 'number', primary_key: true },
    country: { sql: 'country', type: 'string' },
    device: { sql: 'device', type: 'string' },
    created_at: { sql: 'created_at', type: 'time' },
  },
});

// The same table with a key of two columns, as Cube models a table without
// a single-column key: the count measure counts the key's text.
cube('events_keyed', {
  sql_table: 'events',
  measures: {
    count: { type: 'count' },
    users: { type: 'count_distinct', sql: 'user_id' },
    ios_users: { type: 'count_distinct', sql: 'user_id', filters: [{ sql: \`\${CUBE}.device = 'ios'\` }] },
    de_revenue: { type: 'sum', sql: 'amount', filters: [{ sql: \`\${CUBE}.country = 'DE'\` }] },
    de_count: { type: 'count', filters: [{ sql: \`\${CUBE}.country = 'DE'\` }] },
  },
  dimensions: {
    key: { sql: \`\${CUBE}.created_at::text || '-' || \${CUBE}.user_id::text\`, type: 'string', primary_key: true },
    country: { sql: 'country', type: 'string' },
  },
});
`;

async function cube() {
  const { prepareCompiler, createQuery } = require('@cubejs-backend/schema-compiler');
  // The Jinja engine lives in the native module; a JavaScript model does not
  // use it, but the compiler makes one.
  const nativeInstance = {
    newJinjaEngine: () => ({ renderTemplate: () => { throw new Error('Jinja needs @cubejs-backend/native'); } }),
  };
  const repo = {
    localPath: () => __dirname,
    dataSchemaFiles: () => Promise.resolve([{ fileName: 'events.js', content: cubeModel }]),
  };
  const compilers = prepareCompiler(repo, { adapter: 'postgres', nativeInstance });
  await compilers.compiler.compile();
  if (compilers.compiler.errorsReport && compilers.compiler.errorsReport.getErrors().length) {
    throw new Error(JSON.stringify(compilers.compiler.errorsReport.getErrors()));
  }
  const td = (granularity, range) => [{ dimension: 'events.created_at', granularity, dateRange: range }];
  const shapes = {
    users_by_day: { measures: ['events.users'], timeDimensions: td('day', RANGE.days) },
    users_by_week: { measures: ['events.users'], timeDimensions: td('week', RANGE.weeks) },
    users_by_month: { measures: ['events.users'], timeDimensions: td('month', RANGE.months) },
    users_by_country: { measures: ['events.users'], dimensions: ['events.country'] },
    users_by_country_ios: {
      measures: ['events.users'], dimensions: ['events.country'],
      filters: [{ member: 'events.device', operator: 'equals', values: ['ios'] }],
    },
    users_by_country_feb: { measures: ['events.users'], dimensions: ['events.country'], timeDimensions: td(undefined, RANGE.feb) },
    counts_sums_by_day: { measures: ['events.count', 'events.revenue'], timeDimensions: td('day', RANGE.days) },
    measures_by_device: {
      measures: ['events.users', 'events.count', 'events.revenue', 'events.min_amount', 'events.latest'],
      dimensions: ['events.device'], timeDimensions: td(undefined, RANGE.feb),
    },
    filtered_measures_by_country: {
      measures: ['events.ios_users', 'events.de_revenue', 'events.de_count', 'events.users'],
      dimensions: ['events.country'], timeDimensions: td(undefined, RANGE.feb),
    },
    pk_count_by_country: { measures: ['events.users', 'events.count'], dimensions: ['events.country'] },
    composite_key_count_by_country: { measures: ['events_keyed.users', 'events_keyed.count'], dimensions: ['events_keyed.country'] },
    composite_key_filtered_measures_by_country: {
      measures: ['events_keyed.ios_users', 'events_keyed.de_revenue', 'events_keyed.de_count', 'events_keyed.users'],
      dimensions: ['events_keyed.country'],
    },
    rolling_7d_users: { measures: ['events.users_7d'], timeDimensions: td('day', RANGE.rolling) },
  };
  for (const zone of zones) {
    for (const [shape, q] of Object.entries(shapes)) {
      // Cube's API sets a row limit of 10000 when a query has none.
      const query = createQuery(compilers, 'postgres', { ...q, timezone: zone, rowLimit: 10000, useNativeSqlPlanner: false });
      const [sql, params] = query.buildSqlAndParams();
      add('cube', shape, zone, sql, params);
    }
  }
}

// ---------------------------------------------------------------- Malloy

async function malloy() {
  const { SingleConnectionRuntime } = require('@malloydata/malloy');
  const { PostgresConnection } = require('@malloydata/db-postgres');
  // Malloy's own Postgres connection, its schema read from the definition
  // instead of information_schema.
  class TableDefinition extends PostgresConnection {
    async fetchTableSchema(tableKey, tablePath) {
      const columns = [['id', 'bigint'], ['created_at', 'timestamp with time zone'], ['user_id', 'bigint'],
        ['country', 'text'], ['device', 'text'], ['amount', 'numeric']];
      return {
        type: 'table', name: tableKey, dialect: 'postgres', tablePath, connection: this.name,
        fields: columns.map(([name, type]) => ({ ...this.dialect.sqlTypeToMalloyType(type), name })),
      };
    }
    async runSQL() { throw new Error('corpus.js does not run queries'); }
  }
  const runtime = new SingleConnectionRuntime({ connection: new TableDefinition('postgres') });
  const lit = d => '@' + d;
  for (const zone of zones) {
    // A UTC user sets no time zone: Malloy's default is UTC.
    const tz = zone === 'UTC' ? '' : `timezone: '${zone}'\n`;
    const model = `
source: events is postgres.table('public.events') extend {
  measure:
    users is count(user_id)
    event_count is count()
    revenue is amount.sum()
    min_amount is amount.min()
    latest is created_at.max()
    ios_users is count(user_id) { where: device = 'ios' }
    de_revenue is amount.sum() { where: country = 'DE' }
    de_count is count() { where: country = 'DE' }
}
query: users_by_day is events -> {
  ${tz}where: created_at ? ${lit(RANGE.days[0])} to ${lit(nextDay(RANGE.days[1]))}
  group_by: event_day is created_at.day
  aggregate: users
  order_by: event_day
}
query: users_by_week is events -> {
  ${tz}where: created_at ? ${lit(RANGE.weeks[0])} to ${lit(nextDay(RANGE.weeks[1]))}
  group_by: event_week is created_at.week
  aggregate: users
}
query: users_by_month is events -> {
  ${tz}group_by: event_month is created_at.month
  aggregate: users
}
query: users_by_country is events -> {
  ${tz}group_by: country
  aggregate: users
}
query: users_by_country_ios is events -> {
  ${tz}where: device = 'ios'
  group_by: country
  aggregate: users
}
query: users_by_country_feb is events -> {
  ${tz}where: created_at ? ${lit('2026-02')}
  group_by: country
  aggregate: users
}
query: counts_sums_by_day is events -> {
  ${tz}where: created_at ? ${lit(RANGE.days[0])} to ${lit(nextDay(RANGE.days[1]))}
  group_by: event_day is created_at.day
  aggregate: event_count, revenue
}
query: measures_by_device is events -> {
  ${tz}where: created_at ? ${lit('2026-02')}
  group_by: device
  aggregate: users, event_count, revenue, min_amount, latest
}
query: filtered_measures_by_country is events -> {
  ${tz}where: created_at ? ${lit('2026-02')}
  group_by: country
  aggregate: ios_users, de_revenue, de_count, users
}
query: nested_country_device is events -> {
  ${tz}where: created_at ? ${lit('2026-02')}
  group_by: country
  aggregate: users
  nest: by_device is {
    group_by: device
    aggregate: users
  }
}
query: nested_month_country is events -> {
  ${tz}group_by: event_month is created_at.month
  aggregate: users
  nest: by_country is {
    group_by: country
    aggregate: users, revenue
  }
}
`;
    const m = runtime.loadModel(model);
    for (const shape of ['users_by_day', 'users_by_week', 'users_by_month', 'users_by_country', 'users_by_country_ios',
      'users_by_country_feb', 'counts_sums_by_day', 'measures_by_device', 'filtered_measures_by_country',
      'nested_country_device', 'nested_month_country']) {
      const sql = await m.loadQueryByName(shape).getSQL();
      add('malloy', shape, zone, sql, []);
      // Malloy sends its SQL as above: the query in WITH __stage0 AS (...)
      // and one row_to_json column. Its first stage alone is what a
      // rewriter that reads through WITH meets.
      const stage = firstStage(sql);
      if (stage) {
        add('malloy-stage0', shape, zone, stage, [], { note: "the __stage0 query of Malloy's SQL, without the WITH and row_to_json Malloy wraps it in" });
      }
    }
  }
}

// firstStage returns the body of "WITH __stage0 AS (...)" in sql.
function firstStage(sql) {
  const start = sql.indexOf('WITH __stage0 AS (');
  if (start < 0) {
    return '';
  }
  let depth = 0;
  const from = start + 'WITH __stage0 AS ('.length;
  for (let i = from; i < sql.length; i++) {
    if (sql[i] === "'") {
      i = sql.indexOf("'", i + 1);
      continue;
    }
    if (sql[i] === '(') depth++;
    if (sql[i] === ')') {
      if (depth === 0) return sql.slice(from, i).trim();
      depth--;
    }
  }
  return '';
}

// ---------------------------------------------------------------- knex

function knexQueries() {
  // Only builds queries: no connection is made.
  const knex = require('knex')({ client: 'pg' });
  const out = (shape, zone, qb, extra) => {
    const { sql, bindings } = qb.toSQL().toNative();
    add('knex', shape, zone, sql, bindings, extra);
  };
  for (const zone of zones) {
    // The application computes the range's instants and binds them, and
    // binds the zone it groups in.
    const bucket = unit => knex.raw(`date_trunc('${unit}', created_at AT TIME ZONE ?)`, [zone]);
    const range = ([from, to]) => qb => qb.where('created_at', '>=', localMidnight(from, zone)).andWhere('created_at', '<', localMidnight(nextDay(to), zone));
    for (const [shape, unit, r] of [['users_by_day', 'day', RANGE.days], ['users_by_week', 'week', RANGE.weeks], ['users_by_month', 'month', RANGE.months]]) {
      out(shape, zone, knex('events').select(knex.raw('? as ??', [bucket(unit), unit])).countDistinct('user_id as users')
        .modify(range(r)).groupByRaw('1').orderByRaw('1'));
    }
    out('users_by_country', zone, knex('events').select('country').countDistinct('user_id as users').groupBy('country').orderBy('country'));
    out('users_by_country_ios', zone, knex('events').select('country').countDistinct('user_id as users')
      .where('device', 'ios').groupBy('country').orderBy('users', 'desc'));
    out('users_by_country_feb', zone, knex('events').select('country').countDistinct('user_id as users')
      .whereBetween('created_at', [localMidnight(RANGE.feb[0], zone), localMidnight(nextDay(RANGE.feb[1]), zone)])
      .groupBy('country').orderBy('country'));
    out('counts_sums_by_day', zone, knex('events').select(knex.raw('? as ??', [bucket('day'), 'day']))
      .count('* as events').sum('amount as revenue').modify(range(RANGE.days)).groupByRaw('1').orderByRaw('1'));
    out('measures_by_device', zone, knex('events').select('device').countDistinct('user_id as users').count('* as events')
      .sum('amount as revenue').min('amount as min_amount').max('created_at as latest')
      .modify(range(RANGE.feb)).groupBy('device').orderBy('device'));
    // Filtered measures written as CASE, as hand-written reports have them.
    // The conditions on country leave most groups without a matching row:
    // there sum and count of a CASE without ELSE (or ELSE NULL) are NULL
    // and 0, like FILTER's, ...
    out('filtered_measures_by_country', zone, knex('events').select('country')
      .select(knex.raw("count(DISTINCT CASE WHEN device = 'ios' THEN user_id ELSE NULL END) AS ios_users"))
      .select(knex.raw("sum(CASE WHEN country = 'DE' THEN amount END) AS de_revenue"))
      .select(knex.raw("count(CASE WHEN country = 'DE' THEN 1 END) AS de_count"))
      .modify(range(RANGE.feb)).groupBy('country').orderBy('country'));
    // ... while with ELSE 0 sum gives 0, and count counts every row.
    out('filtered_measures_else_0_by_country', zone, knex('events').select('country').countDistinct('user_id as users')
      .select(knex.raw("sum(CASE WHEN country = 'DE' THEN amount ELSE 0 END) AS de_revenue"))
      .select(knex.raw("count(CASE WHEN country = 'DE' THEN 1 ELSE 0 END) AS de_count"))
      .modify(range(RANGE.feb)).groupBy('country').orderBy('country'));
    // The application sets its session's zone and truncates in it.
    out('users_by_day_session_zone', zone, knex('events').select(knex.raw("date_trunc('day', created_at) as day"))
      .countDistinct('user_id as users').modify(range(RANGE.days)).groupByRaw('1').orderByRaw('1'),
    { session_time_zone: zone });
  }
}

// ---------------------------------------------------------------- kysely

function kyselyQueries() {
  const { Kysely, DummyDriver, PostgresAdapter, PostgresIntrospector, PostgresQueryCompiler, sql } = require('kysely');
  const db = new Kysely({
    dialect: {
      createAdapter: () => new PostgresAdapter(),
      createDriver: () => new DummyDriver(),
      createIntrospector: d => new PostgresIntrospector(d),
      createQueryCompiler: () => new PostgresQueryCompiler(),
    },
  });
  const out = (shape, zone, qb) => {
    const c = qb.compile();
    add('kysely', shape, zone, c.sql, c.parameters);
  };
  for (const zone of zones) {
    // The zone written into the SQL (sql.lit), the range's local dates
    // bound as timestamps and placed in the zone by PostgreSQL.
    const bucket = unit => sql`date_trunc(${sql.lit(unit)}, ${sql.ref('created_at')} AT TIME ZONE ${sql.lit(zone)})`;
    const from = d => sql`(${d}::timestamp AT TIME ZONE ${sql.lit(zone)})`;
    const range = ([a, b]) => qb => qb.where('created_at', '>=', from(a)).where('created_at', '<', from(nextDay(b)));
    const users = eb => eb.fn.count('user_id').distinct().as('users');
    for (const [shape, unit, r] of [['users_by_day', 'day', RANGE.days], ['users_by_week', 'week', RANGE.weeks], ['users_by_month', 'month', RANGE.months]]) {
      out(shape, zone, db.selectFrom('events').select(eb => [bucket(unit).as(unit), users(eb)])
        .$call(range(r)).groupBy(bucket(unit)).orderBy(bucket(unit)));
    }
    out('users_by_country', zone, db.selectFrom('events').select(eb => ['country', users(eb)]).groupBy('country').orderBy('country'));
    out('users_by_country_ios', zone, db.selectFrom('events').select(eb => ['country', users(eb)])
      .where('device', '=', 'ios').groupBy('country').orderBy('country'));
    out('users_by_country_feb', zone, db.selectFrom('events').select(eb => ['country', users(eb)])
      .$call(range(RANGE.feb)).groupBy('country').orderBy('country'));
    out('counts_sums_by_day', zone, db.selectFrom('events')
      .select(eb => [bucket('day').as('day'), eb.fn.countAll().as('events'), eb.fn.sum('amount').as('revenue')])
      .$call(range(RANGE.days)).groupBy(bucket('day')).orderBy(bucket('day')));
    out('measures_by_device', zone, db.selectFrom('events')
      .select(eb => ['device', users(eb), eb.fn.countAll().as('events'), eb.fn.sum('amount').as('revenue'),
        eb.fn.min('amount').as('min_amount'), eb.fn.max('created_at').as('latest')])
      .$call(range(RANGE.feb)).groupBy('device').orderBy('device'));
    // Filtered measures built with kysely's CASE builder (the values bound).
    const ios = eb => eb.case().when('device', '=', 'ios');
    const de = eb => eb.case().when('country', '=', 'DE');
    out('filtered_measures_by_country', zone, db.selectFrom('events')
      .select(eb => ['country',
        eb.fn.count(ios(eb).then(eb.ref('user_id')).end()).distinct().as('ios_users'),
        eb.fn.sum(de(eb).then(eb.ref('amount')).end()).as('de_revenue'),
        eb.fn.count(de(eb).then(sql.lit(1)).end()).as('de_count'),
        users(eb)])
      .$call(range(RANGE.feb)).groupBy('country').orderBy('country'));
    out('filtered_measures_else_0_by_country', zone, db.selectFrom('events')
      .select(eb => ['country', users(eb),
        eb.fn.sum(de(eb).then(eb.ref('amount')).else(0).end()).as('de_revenue')])
      .$call(range(RANGE.feb)).groupBy('country').orderBy('country'));
    // count(expression) over NOT NULL columns.
    out('not_null_count_by_country', zone, db.selectFrom('events')
      .select(eb => ['country', users(eb), eb.fn.count('user_id').as('events'),
        eb.fn.count(sql`${sql.ref('created_at')}::text || '-' || ${sql.ref('user_id')}::text`).as('keyed_events')])
      .groupBy('country').orderBy('country'));
    // 7-day active users per day, as analysts write it: a series of days
    // joined to the events of the seven days up to each.
    const days = sql`generate_series(${sql.lit(RANGE.rolling[0])}::timestamp, ${sql.lit(RANGE.rolling[1])}::timestamp, interval '1 day')`;
    out('rolling_7d_users', zone, db.selectFrom(days.as('d'))
      .leftJoin('events', join => join
        .on(sql`${sql.ref('events.created_at')}`, '>=', sql`(${sql.ref('d.d')} - interval '6 days') AT TIME ZONE ${sql.lit(zone)}`)
        .on(sql`${sql.ref('events.created_at')}`, '<', sql`(${sql.ref('d.d')} + interval '1 day') AT TIME ZONE ${sql.lit(zone)}`))
      .select(eb => [sql`${sql.ref('d.d')}::date`.as('day'), eb.fn.count('events.user_id').distinct().as('users_7d')])
      .groupBy('d.d').orderBy('d.d'));
  }
}

(async () => {
  await cube();
  await malloy();
  knexQueries();
  kyselyQueries();
  const versions = {};
  for (const p of ['@cubejs-backend/schema-compiler', '@malloydata/malloy', '@malloydata/db-postgres', 'knex', 'kysely']) {
    versions[p] = version(p);
  }
  // Cube's compiler keeps worker threads running: exit once the output is
  // written (stdout to a pipe is written asynchronously).
  process.stdout.write(JSON.stringify({ versions, statements }, null, 1) + '\n', () => process.exit(0));
})().catch(e => {
  console.error(e && e.stack || e);
  process.exit(1);
});
