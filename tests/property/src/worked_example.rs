//! SPEC §2's worked example, exactly: a daily window ending 2026-10-30 00:00 UTC with 24 hours
//! of allowed lateness, the seed story's Tuesday of 1,402 orders, and order 8841 with event time
//! 2026-10-29 18:02 UTC arriving under three watermarks. Each watermark gets its own pipeline,
//! so that each landing is seen from a clean start.

use postgres::Client;

use crate::db::{self, Row};
use crate::values::{quote_ident, quote_literal, ts_key, utc};

const DB: &str = "eventtime_property_worked_example";

struct Example {
    db: Client,
    seed: u64,
}

impl Example {
    fn rows(&mut self, sql: &str) -> Vec<Row> {
        db::text_rows(&mut self.db, sql)
    }

    /// A source table and pipeline `<name>` holding Tuesday's 1,402 orders, as in the seed story.
    fn pipeline(&mut self, name: &str) {
        let t = quote_ident(name);
        let sql = format!(
            "CREATE TABLE {t} (order_id bigint, store text, amount numeric, ordered_at timestamptz);
             SELECT eventtime.create_pipeline(name => {n}, source => {src}, event_time => 'ordered_at',
                 key => ARRAY['store'], event_id => 'order_id', window_size => interval '1 day',
                 allowed_lateness => interval '24 hours', aggregates => 'count(*) AS orders, sum(amount) AS revenue');
             INSERT INTO {t} SELECT g, 'web', 10 + g % 7, timestamptz '2026-10-29 00:00+00' + g * interval '61 seconds'
             FROM generate_series(1, 1402) g;",
            n = quote_literal(name),
            src = quote_literal(&t),
        );
        self.db.batch_execute(&sql).unwrap_or_else(|e| {
            panic!(
                "seed {}: setting up {name}: {}",
                self.seed,
                db::describe(&e)
            )
        });
    }

    fn advance(&mut self, name: &str, w: &str) {
        let sql = format!(
            "SELECT * FROM eventtime.advance_watermark({}, {})",
            quote_literal(name),
            quote_literal(&format!("{w}+00"))
        );
        self.rows(&sql);
    }

    /// Order 8841 through `eventtime.ingest`: (accepted, late, refused, duplicates).
    fn order_8841(&mut self, name: &str) -> Vec<Option<String>> {
        let sql = format!(
            "SELECT accepted::text, late::text, refused::text, duplicates::text FROM eventtime.ingest({}, \
             '{{\"order_id\": 8841, \"store\": \"web\", \"amount\": 42, \"ordered_at\": \"2026-10-29 18:02:00+00\"}}')",
            quote_literal(name)
        );
        self.rows(&sql).remove(0)
    }

    /// (version, kind, orders, sealed, watermark) of every firing of Tuesday, and the text of
    /// each whole history row.
    fn tuesday(&mut self, name: &str) -> (Vec<Row>, Vec<String>) {
        let sql = format!(
            "SELECT version::text, kind, orders::text, sealed::text, us(watermark), h::text FROM {} h \
             WHERE store = 'web' AND window_start = '2026-10-29 00:00+00' ORDER BY version",
            quote_ident(&format!("{name}_history"))
        );
        let mut rows = self.rows(&sql);
        let texts = rows.iter_mut().map(|r| r.pop().unwrap().unwrap()).collect();
        (rows, texts)
    }
}

fn s(v: &str) -> Option<String> {
    Some(v.to_string())
}

fn counts(accepted: u8, late: u8, refused: u8, duplicates: u8) -> Vec<Option<String>> {
    [accepted, late, refused, duplicates]
        .iter()
        .map(|c| s(&c.to_string()))
        .collect()
}

fn firing(version: &str, kind: &str, orders: &str, sealed: &str, watermark: &str) -> Row {
    vec![
        s(version),
        s(kind),
        s(orders),
        s(sealed),
        s(&ts_key(utc(watermark))),
    ]
}

pub fn run(seed: u64) {
    println!("seed {seed}");
    let mut ex = Example {
        db: db::fresh_database(DB),
        seed,
    };
    let ctx = format!("seed {seed}, SPEC §2 worked example");

    // The pure landing rule.
    let landings = ex.rows(
        "SELECT eventtime.landing('2026-10-29 18:02+00', '2026-10-30 00:00+00', w, '24 hours')
         FROM unnest(ARRAY['2026-10-29 20:00+00', '2026-10-30 12:00+00', '2026-11-01 00:00+00']::timestamptz[]) w
         ORDER BY w",
    );
    assert_eq!(
        landings,
        vec![
            vec![s("open")],
            vec![s("late-firing")],
            vec![s("side-output")]
        ],
        "{ctx}: eventtime.landing"
    );

    // Watermark 2026-10-29 20:00: open; the order is counted in the main firing.
    ex.pipeline("at_2000");
    ex.advance("at_2000", "2026-10-29 20:00");
    assert_eq!(
        ex.order_8841("at_2000"),
        counts(1, 0, 0, 0),
        "{ctx}: under 2026-10-29 20:00 the order is open"
    );
    ex.advance("at_2000", "2026-10-30 00:00");
    let (firings, _) = ex.tuesday("at_2000");
    assert_eq!(
        firings,
        vec![firing("1", "main", "1403", "true", "2026-10-30 00:00")],
        "{ctx}: open order in version 1"
    );

    // Watermark 2026-10-30 12:00: late-firing; version 2 beside the sealed version 1.
    ex.pipeline("at_noon");
    ex.advance("at_noon", "2026-10-30 00:00");
    let (_, sealed) = ex.tuesday("at_noon");
    ex.advance("at_noon", "2026-10-30 12:00");
    assert_eq!(
        ex.order_8841("at_noon"),
        counts(0, 1, 0, 0),
        "{ctx}: under 2026-10-30 12:00 the order is late"
    );
    let (firings, texts) = ex.tuesday("at_noon");
    assert_eq!(
        firings,
        vec![
            firing("1", "main", "1402", "true", "2026-10-30 00:00"),
            firing("2", "late", "1403", "false", "2026-10-30 12:00"),
        ],
        "{ctx}: late order makes version 2"
    );
    assert_eq!(
        texts[..1],
        sealed[..],
        "{ctx}: version 1 unchanged by the late order"
    );

    // Watermark 2026-11-01 00:00: side-output; refused with its window and the watermark, and
    // the day's sealed total stays at version 1, 1,402 orders.
    ex.pipeline("at_nov1");
    ex.advance("at_nov1", "2026-10-30 00:00");
    let (_, sealed) = ex.tuesday("at_nov1");
    ex.advance("at_nov1", "2026-11-01 00:00");
    assert_eq!(
        ex.order_8841("at_nov1"),
        counts(0, 0, 1, 0),
        "{ctx}: under 2026-11-01 00:00 the order is refused"
    );
    let refused_sql = "SELECT store, event_id::text, us(event_time), us(window_start), us(window_end), us(deadline), \
                       us(watermark), \"row\"->>'amount' FROM at_nov1_refused";
    let expected_refused = vec![vec![
        s("web"),
        s("8841"),
        s(&ts_key(utc("2026-10-29 18:02"))),
        s(&ts_key(utc("2026-10-29 00:00"))),
        s(&ts_key(utc("2026-10-30 00:00"))),
        s(&ts_key(utc("2026-10-31 00:00"))),
        s(&ts_key(utc("2026-11-01 00:00"))),
        s("42"),
    ]];
    assert_eq!(
        ex.rows(refused_sql),
        expected_refused,
        "{ctx}: order 8841 in refused rows"
    );
    let (firings, texts) = ex.tuesday("at_nov1");
    assert_eq!(
        firings,
        vec![firing("1", "main", "1402", "true", "2026-10-30 00:00")],
        "{ctx}: only version 1"
    );
    assert_eq!(
        texts, sealed,
        "{ctx}: sealed version 1 unchanged by the refused order"
    );
    let published = ex.rows("SELECT version::text, orders::text FROM at_nov1_sealed UNION ALL SELECT version::text, orders::text FROM at_nov1_latest");
    assert_eq!(
        published,
        vec![vec![s("1"), s("1402")]; 2],
        "{ctx}: sealed and latest both version 1 with 1,402 orders"
    );

    // The broker redelivers it: a duplicate, and still one refused row.
    assert_eq!(
        ex.order_8841("at_nov1"),
        counts(0, 0, 0, 1),
        "{ctx}: the redelivered refused order is a duplicate"
    );
    assert_eq!(
        ex.rows(refused_sql),
        expected_refused,
        "{ctx}: still one refused row after the redelivery"
    );
    let pipeline = ex.rows("SELECT refused::text, duplicates::text, firings::text FROM eventtime.pipelines WHERE name = 'at_nov1'");
    assert_eq!(
        pipeline,
        vec![vec![s("1"), s("1"), s("1")]],
        "{ctx}: pipelines (refused, duplicates, firings)"
    );

    drop(ex);
    db::drop_database(DB);
}
