//! The pipeline: one definition, resolved against the source table at creation, from which
//! everything a pipeline runs is generated (`core::sqlgen`). It is stored as it is, in JSON, in
//! the catalog column `definition`; the identity of the pipeline (id, name, source table, the
//! schema of its views, its event-time column) lives in catalog columns of its own and is filled
//! in when the definition is read.

use serde::{Deserialize, Serialize};

use super::aggregates::ResolvedAgg;
use super::window::WindowSpec;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Column {
    pub name: String,
    /// The type as `format_type` prints it, typmod included.
    #[serde(rename = "type")]
    pub type_name: String,
    /// The column's collation (quoted, schema-qualified) when it is not its type's default: the
    /// pipeline's tables compare, group and hash the values as the source column does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collation: Option<String>,
    /// The equality operator of the type's default btree operator class, as
    /// `OPERATOR(schema.=)`: the one the pipeline's unique indexes use, so a condition written
    /// with it is an index condition, whatever the `search_path` shows (a key column only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eq_op: Option<String>,
}

impl Column {
    /// The column's type for a column definition, with its collation.
    pub fn sql_type(&self) -> String {
        match &self.collation {
            Some(c) => format!("{} COLLATE {c}", self.type_name),
            None => self.type_name.clone(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PipelineDef {
    #[serde(skip)]
    pub id: i32,
    #[serde(skip)]
    pub name: String,
    /// The source table, schema-qualified and quoted.
    #[serde(skip)]
    pub source: String,
    /// The schema of the source table, where the views go.
    #[serde(skip)]
    pub view_schema: String,
    #[serde(skip)]
    pub event_time: String,
    pub keys: Vec<Column>,
    pub event_id: Option<Column>,
    pub window: WindowSpec,
    #[serde(rename = "lateness_us")]
    pub lateness: i64,
    #[serde(rename = "aggregates")]
    pub aggs: Vec<ResolvedAgg>,
    /// With a lag, each ingest statement advances the pipeline's `watermark_lag` source to the
    /// greatest event time it saw minus the lag, and fires what that makes due.
    #[serde(rename = "watermark_lag_us", default)]
    pub watermark_lag: Option<i64>,
    /// Processing time after which a source that has not advanced stops counting.
    #[serde(rename = "idle_timeout_us", default)]
    pub idle_timeout: Option<i64>,
    /// `eventtime.tick()` advances the source `clock` to `now()` minus this.
    #[serde(rename = "clock_lag_us", default)]
    pub clock_lag: Option<i64>,
    /// No watermark may be later than `now()` plus this (`'infinity'` excepted); with a lag,
    /// event times later than that do not move the watermark.
    #[serde(rename = "max_ahead_us", default)]
    pub max_ahead: Option<i64>,
    /// The state row of a fired window holds only what its late statements added (its `version`
    /// counts them); each late version adds it to the window's main firing, read from history by
    /// the key columns' `eq_op`. The firing then writes nothing to the state. False for session
    /// pipelines, whose fired sessions keep their whole state in one row (merges read it), and
    /// for pipelines created before this layout existed, which keep theirs.
    #[serde(default)]
    pub late_deltas: bool,
    /// With [`Self::late_deltas`]: the state row of a fired window's late rows is marked by the
    /// column `_et_late` (true), which the predicate of its unique index reads, instead of by
    /// `version > 0`. Its upsert, which counts the versions in `version`, then changes no indexed
    /// column, so it is a HOT update. False for pipelines created before this column existed,
    /// whose index reads `version`.
    #[serde(default)]
    pub late_row_flag: bool,
    /// Whether a row refused for several windows (hopping windows, calendar periods sliding by
    /// less than their size) keeps its document once: the refused row of its first window holds
    /// `row`, the others name it in `_et_doc_of`. False for pipelines created before, whose
    /// refused rows each hold the document, and for kinds with one window per row.
    #[serde(default)]
    pub refused_doc_once: bool,
    /// With [`Self::late_deltas`]: an open window keeps one state row per writing backend (its
    /// `_et_slot`), which each ingest statement upserts, instead of one row per statement; and
    /// every sum the state keeps stays within a bound that no firing can exceed by adding the
    /// rows up (see `_eventtime.acc_check`). False for pipelines created before, which append a
    /// row per statement and add them up unchecked when the window fires.
    #[serde(default)]
    pub state_slots: bool,
    /// Exactly-once by source offsets (SPEC §12): the column of each row's offset in its log and,
    /// with several logs, the column that names the row's source. None for pipelines without
    /// offsets, and for those created before offsets existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offsets: Option<Offsets>,
    /// With [`Self::event_id`]: the source table has a unique index on the event id (alone, or
    /// with key columns and `NULLS NOT DISTINCT`), on which the pipeline's trigger depends. Two
    /// committed rows of the source then never share an id in one key, so every row of an ingest
    /// statement is new: the index is the ledger, and the pipeline keeps none of its own (no
    /// table `ids`). False for pipelines without such an index, and for those created before.
    #[serde(default)]
    pub id_index: bool,
    /// Batched late firings (SPEC §3, `late_firing`): a fired window's late rows are kept as
    /// pending rows of its state, one per writing backend and arrival watermark, and its next
    /// version is written by the first advance or `tick()` at least this long (processing time,
    /// in microseconds) after the first of them was written. None: one late version per ingest
    /// statement, as for every pipeline created before.
    #[serde(
        rename = "late_firing_us",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub late_firing: Option<i64>,
}

impl PipelineDef {
    /// The event id the pipeline's own ledger (table `ids`) dedups by: the event id, unless the
    /// source's unique index dedups ([`Self::id_index`]).
    pub fn ledger(&self) -> Option<&Column> {
        self.event_id.as_ref().filter(|_| !self.id_index)
    }
}

/// The offsets of a pipeline's rows (SPEC §12). Each source's committed offset lives in the
/// pipeline's table `offsets`; a row at or below it is a duplicate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Offsets {
    /// The offset column (an integer type, compared as `bigint`).
    pub column: String,
    /// The column naming the row's source (its text form); None: every row's source is
    /// [`SINGLE_SOURCE`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_column: Option<String>,
}

/// The source of every row of a pipeline with offsets and no `source_column`: the name of the
/// two-argument `advance_watermark`'s source too.
pub const SINGLE_SOURCE: &str = "default";

/// A keyed daily pipeline with event ids, `count(*)` and `avg(amount)`, and a name that needs
/// quoting: the one the unit tests of the generated SQL and its golden snapshots use.
#[cfg(test)]
pub(crate) fn sample() -> PipelineDef {
    use super::aggregates::{AggFunc, AggSpec, AvgKind};

    PipelineDef {
        id: 7,
        name: "Orders \"daily\"".into(),
        source: "\"public\".\"orders\"".into(),
        view_schema: "public".into(),
        event_time: "ordered_at".into(),
        keys: vec![Column {
            name: "store".into(),
            type_name: "text".into(),
            collation: None,
            eq_op: Some("OPERATOR(pg_catalog.=)".into()),
        }],
        event_id: Some(Column {
            name: "order_id".into(),
            type_name: "bigint".into(),
            collation: None,
            eq_op: None,
        }),
        window: WindowSpec::Tumbling {
            size: 86_400_000_000,
            origin: -946_684_800_000_000,
        },
        lateness: 86_400_000_000,
        watermark_lag: None,
        idle_timeout: None,
        clock_lag: None,
        max_ahead: Some(86_400_000_000),
        late_deltas: true,
        late_row_flag: true,
        refused_doc_once: false,
        state_slots: true,
        offsets: None,
        id_index: false,
        late_firing: None,
        aggs: vec![
            ResolvedAgg {
                spec: AggSpec {
                    func: AggFunc::Count,
                    arg: None,
                    alias: "orders".into(),
                    expr: None,
                    function: None,
                    kept: None,
                },
                result_type: "bigint".into(),
                acc_type: "bigint".into(),
                avg_kind: None,
                generic: None,
            },
            ResolvedAgg {
                spec: AggSpec {
                    func: AggFunc::Avg,
                    arg: Some("amount".into()),
                    alias: "mean".into(),
                    expr: None,
                    function: None,
                    kept: None,
                },
                result_type: "numeric".into(),
                acc_type: "numeric".into(),
                avg_kind: Some(AvgKind::Numeric),
                generic: None,
            },
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_definition_is_stored_without_the_identity_and_read_back_whole() {
        let mut def = sample();
        def.idle_timeout = Some(60_000_000);
        let json: serde_json::Value = serde_json::to_value(&def).unwrap();
        // The catalog's format: the window by kind, durations in microseconds, no identity.
        assert_eq!(
            json["window"],
            serde_json::json!({"kind": "tumbling", "size_us": 86_400_000_000i64, "origin_us": -946_684_800_000_000i64})
        );
        assert_eq!(json["keys"][0]["type"], "text");
        assert_eq!(json["lateness_us"], 86_400_000_000i64);
        assert_eq!(json["aggregates"][1]["avg_kind"], "numeric");
        assert!(json.get("name").is_none() && json.get("id").is_none());
        let back: PipelineDef = serde_json::from_value(json).unwrap();
        assert_eq!(back.keys, def.keys);
        assert_eq!(back.window, def.window);
        assert_eq!(
            (back.idle_timeout, back.max_ahead, back.clock_lag),
            (def.idle_timeout, def.max_ahead, None)
        );
        // Settings added later default to none in definitions written before them.
        let old = serde_json::json!({"keys": [], "event_id": null, "window": {"kind": "tumbling", "size_us": 1, "origin_us": 0},
                                     "lateness_us": 0, "aggregates": []});
        let old: PipelineDef = serde_json::from_value(old).unwrap();
        assert_eq!(
            (
                old.watermark_lag,
                old.idle_timeout,
                old.clock_lag,
                old.max_ahead
            ),
            (None, None, None, None)
        );
    }
}
