// Connects with node-postgres (npm "pg") and prints one JSON line on stdout.
//
//   node connect.js URL [CA_FILE]
//
// With CA_FILE the connection uses TLS and verifies the server's certificate
// against it. On success it prints {"ok":true,"tls":...,"rows":[...]} after a
// simple-protocol and a parameterised (extended-protocol) query; on failure
// {"ok":false,"code":SQLSTATE,"severity":...,"message":...}. The exit status
// is 0 either way: the Go test judges the JSON.
'use strict';
const fs = require('fs');
const { Client } = require('pg');

async function main() {
  const [url, caFile] = process.argv.slice(2);
  if (!url) {
    throw new Error('usage: node connect.js URL [CA_FILE]');
  }
  const config = { connectionString: url, connectionTimeoutMillis: 20000 };
  if (caFile) {
    config.ssl = { ca: fs.readFileSync(caFile), rejectUnauthorized: true };
  }
  const client = new Client(config);
  try {
    await client.connect();
    const simple = await client.query('SELECT current_user AS "user", 1 + 1 AS two');
    const extended = await client.query('SELECT $1::int + 1 AS n, $2::text AS s', [41, 'héllo']);
    const tls = Boolean(client.connection && client.connection.stream && client.connection.stream.encrypted);
    console.log(JSON.stringify({ ok: true, tls, rows: [simple.rows[0], extended.rows[0]] }));
  } catch (err) {
    console.log(JSON.stringify({ ok: false, code: err.code || '', severity: err.severity || '', message: err.message }));
  } finally {
    await client.end().catch(() => {});
  }
}

main().catch((err) => {
  console.error(err && err.stack ? err.stack : String(err));
  process.exit(1);
});
