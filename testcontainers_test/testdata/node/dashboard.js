// Runs dashboard queries with node-postgres (npm "pg") in the simple query
// protocol (no parameters) and prints their results as one JSON document.
//
//   node dashboard.js URL < queries.json
//
// queries.json is a JSON array of SQL strings. The output is an array with
// one element per query: {"fields":[{"name","dataTypeID"}],"rows":[[...]],
// "command","rowCount","notices":[message...]} or {"error":{"code","message"}}.
// Rows are arrays (rowMode "array") of the values node-postgres parsed. The
// notices are those the client's 'notice' event delivered while the query
// ran. The Go test (dashboard_test.go) judges the output.
'use strict';
const { Client } = require('pg');

async function main() {
  const [url] = process.argv.slice(2);
  if (!url) {
    throw new Error('usage: node dashboard.js URL < queries.json');
  }
  const chunks = [];
  for await (const c of process.stdin) {
    chunks.push(c);
  }
  const queries = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  const client = new Client({ connectionString: url, connectionTimeoutMillis: 20000 });
  let notices = [];
  client.on('notice', (msg) => notices.push(msg.message));
  await client.connect();
  const out = [];
  try {
    for (const text of queries) {
      notices = [];
      try {
        const res = await client.query({ text, rowMode: 'array' });
        out.push({
          fields: res.fields.map((f) => ({ name: f.name, dataTypeID: f.dataTypeID })),
          rows: res.rows,
          command: res.command,
          rowCount: res.rowCount,
          notices,
        });
      } catch (err) {
        out.push({ error: { code: err.code || '', message: err.message }, notices });
      }
    }
  } finally {
    await client.end().catch(() => {});
  }
  console.log(JSON.stringify(out));
}

main().catch((err) => {
  console.error(err && err.stack ? err.stack : String(err));
  process.exit(1);
});
