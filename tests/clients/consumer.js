// A consumer of pg_eventtime's feed written with node-postgres, run by `scripts/test.sh clients`
// after job_and_consumer.py (whose pipeline orders_hourly it reads again).
//
// 1. The typed feed from the start equals the history, numeric sums as strings with every digit
//    (node-postgres gives numeric as text), and resuming after any cursor gives exactly the rest.
// 2. LISTEN eventtime: a writer's late rows (by INSERT and by eventtime.ingest) and an advance on another connection each notify once
//    at commit; the consumer reads the feed after its cursor and sees each new version once.
'use strict';
const assert = require('assert');
const { Client } = require('pg');

const database = process.argv[2] || 'eventtime_clients';

async function connect() {
  const c = new Client({ database });
  await c.connect();
  return c;
}

async function replay(c) {
  const feed = (await c.query(
    `SELECT store, window_start, version, kind, orders, revenue, cursor FROM orders_hourly_changes()`)).rows;
  const history = (await c.query(
    `SELECT store, window_start, version, kind, orders, revenue::text AS revenue FROM orders_hourly_history`)).rows;
  assert.ok(history.length > 100, `the history has ${history.length} versions`);
  assert.strictEqual(feed.length, history.length, 'the feed and the history differ in length');
  const key = (r) => `${r.store}|${r.window_start.toISOString()}|${r.version}`;
  const byKey = new Map(history.map((r) => [key(r), r]));
  const seen = new Set();
  const last = new Map();
  for (const r of feed) {
    const h = byKey.get(key(r));
    assert.ok(h, `version ${key(r)} is not in the history`);
    assert.ok(!seen.has(key(r)), `version ${key(r)} came twice`);
    seen.add(key(r));
    assert.strictEqual(typeof r.revenue, 'string');
    assert.strictEqual(r.revenue, h.revenue, `revenue of ${key(r)} lost digits`);
    assert.strictEqual(String(r.orders), String(h.orders));
    const w = `${r.store}|${r.window_start.toISOString()}`;
    assert.strictEqual(r.version, (last.get(w) || 0) + 1, `versions of ${w} out of order`);
    last.set(w, r.version);
  }
  for (const k of [0, Math.floor(feed.length / 2), feed.length - 1]) {
    const rest = (await c.query(
      `SELECT store, window_start, version FROM orders_hourly_changes($1)`, [feed[k].cursor])).rows;
    assert.deepStrictEqual(rest.map(key), feed.slice(k + 1).map(key), `resuming after row ${k}`);
  }
  return feed.length;
}

async function listen(c) {
  const writer = await connect();
  await writer.query(`DROP TABLE IF EXISTS clicks CASCADE`);
  await writer.query(`SELECT eventtime.drop_pipeline(name) FROM eventtime.pipelines WHERE name = 'clicks_minute'`);
  await writer.query(`CREATE TABLE clicks (click_id bigint, page text, at timestamptz)`);
  await writer.query(`SELECT eventtime.create_pipeline(name => 'clicks_minute', source => 'clicks',
      event_time => 'at', key => ARRAY['page'], event_id => 'click_id', window_size => '1 minute',
      allowed_lateness => '10 minutes')`);
  const notes = [];
  c.on('notification', (n) => { if (n.channel === 'eventtime') notes.push(JSON.parse(n.payload)); });
  await c.query('LISTEN eventtime');
  const waitFor = async (count) => {
    for (let i = 0; i < 100 && notes.filter((n) => n.pipeline === 'clicks_minute').length < count; i++) {
      await new Promise((r) => setTimeout(r, 50));
    }
    return notes.filter((n) => n.pipeline === 'clicks_minute');
  };
  // Rows of two pages in one minute, then the minute fires.
  await writer.query(`INSERT INTO clicks SELECT g, 'p' || (g % 2), '2026-11-01 10:00:30+00' FROM generate_series(1, 10) g`);
  await writer.query(`SELECT eventtime.advance_watermark('clicks_minute', '2026-11-01 10:05+00')`);
  let mine = await waitFor(1);
  assert.strictEqual(mine.length, 1, 'one notification for the advance');
  assert.deepStrictEqual(mine[0].versions, { main: 2, late: 0, merged: 0, restatement: 0 });
  let rows = (await c.query(`SELECT page, version, kind, events, cursor FROM clicks_minute_changes()`)).rows;
  const cursor = rows[rows.length - 1].cursor; // the feed's own order: resume after its last row
  assert.deepStrictEqual(rows.map((r) => [r.page, r.version, r.kind, String(r.events)]).sort(),
    [['p0', 1, 'main', '5'], ['p1', 1, 'main', '5']]);
  // A late row in a transaction that rolls back notifies nothing; the one that commits does,
  // and its redelivery is a duplicate (no notification, no version).
  await writer.query('BEGIN');
  await writer.query(`INSERT INTO clicks VALUES (11, 'p0', '2026-11-01 10:00:40+00')`);
  await writer.query('ROLLBACK');
  await writer.query(`INSERT INTO clicks VALUES (11, 'p0', '2026-11-01 10:00:40+00')`);
  await writer.query(`INSERT INTO clicks VALUES (11, 'p0', '2026-11-01 10:00:40+00')`);
  // eventtime.ingest from Node: JSON.stringify writes a Date as an ISO string in UTC.
  const counts = (await writer.query(`SELECT * FROM eventtime.ingest('clicks_minute', $1)`,
    [JSON.stringify([{ click_id: 12, page: 'p1', at: new Date('2026-11-01T10:00:50Z') }])])).rows[0];
  assert.deepStrictEqual([counts.accepted, counts.late, counts.refused, counts.duplicates].map(String), ['0', '1', '0', '0']);
  mine = await waitFor(3);
  assert.strictEqual(mine.length, 3, `three notifications in all, not ${mine.length}`);
  assert.deepStrictEqual(mine[1].versions, { main: 0, late: 1, merged: 0, restatement: 0 });
  rows = (await c.query(`SELECT page, version, kind, events FROM clicks_minute_changes($1)`, [cursor])).rows;
  assert.deepStrictEqual(rows.map((r) => [r.page, r.version, r.kind, String(r.events)]),
    [['p0', 2, 'late', '6'], ['p1', 2, 'late', '6']]);
  await c.query('UNLISTEN eventtime');
  await writer.end();
}

(async () => {
  const c = await connect();
  try {
    const replayed = await replay(c);
    await listen(c);
    console.log(`node consumer (pg ${require('pg/package.json').version}): ${replayed} versions replayed and resumed, notifications once per committed statement`);
  } finally {
    await c.end();
  }
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
