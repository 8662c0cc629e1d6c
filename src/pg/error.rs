//! Every error a user can cause, each with its SQLSTATE, a message naming the offending thing,
//! and a DETAIL or HINT where one helps. Raised with [`EtError::raise`], which never returns.

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::{PgLogLevel, PgSqlErrorCode};

/// The `function` of [`EtError::WrongIsolation`] for an ingest statement of session windows.
pub const SESSION_INGEST: &str = "an ingest statement into session windows";

#[derive(Debug, Clone)]
pub enum EtError {
    /// 42704: no pipeline has that name.
    UnknownPipeline { name: String },
    /// 42704: the pipeline has no source of that name.
    UnknownSource { pipeline: String, source: String },
    /// 42710: a pipeline with that name exists.
    DuplicatePipeline { name: String },
    /// 22004: a required argument is NULL.
    NullArgument {
        function: &'static str,
        argument: &'static str,
    },
    /// 0A000: the function does not apply to this kind of pipeline.
    NotSupported { message: String, hint: String },
    /// 22023: an argument has a value the function cannot use.
    InvalidParameter {
        message: String,
        detail: Option<String>,
        hint: Option<String>,
    },
    /// 42622: a generated name would exceed PostgreSQL's name length.
    NameTooLong { name: String, limit: usize },
    /// 42P01-like lookups on columns: 42703.
    UndefinedColumn {
        table: String,
        column: String,
        hint: Option<String>,
    },
    /// 42703: a key object names a column that is not a key of the pipeline.
    UnknownKeyColumn {
        pipeline: String,
        column: String,
        keys: Vec<String>,
    },
    /// 42804: a column has the wrong type.
    WrongColumnType {
        table: String,
        column: String,
        found: String,
        expected: String,
        hint: Option<String>,
    },
    /// 42701: a name is used twice among keys, aggregates and the columns the views add.
    DuplicateColumn { name: String, detail: String },
    /// 42601: the aggregate list does not parse.
    AggregateSyntax {
        message: String,
        position: usize,
        hint: Option<String>,
    },
    /// 42883: an aggregate is not defined for the column's type.
    UndefinedAggregate {
        function: String,
        column: String,
        type_name: String,
    },
    /// 42809: the source is not a table.
    WrongObjectType { name: String },
    /// 22004: a row of the statement has no event time.
    NullEventTime { pipeline: String, column: String },
    /// 22004: a row of a pipeline with offsets has no offset, or no source.
    NullOffset {
        pipeline: String,
        column: String,
        source: bool,
    },
    /// 22008: a row's event time is infinite or has no window inside the timestamp range.
    EventTimeOutOfRange {
        pipeline: String,
        column: String,
        value: String,
        infinite: bool,
    },
    /// 25000: the call needs READ COMMITTED.
    WrongIsolation {
        function: &'static str,
        pipeline: String,
    },
    /// 25000: a read of committed versions in a transaction that has written.
    WroteInTransaction {
        function: &'static str,
        pipeline: String,
    },
    /// 55000: the source table of the pipeline no longer exists.
    SourceGone { pipeline: String },
    /// 55000: a table of the pipeline is gone (its owner dropped or renamed it).
    TableGone { pipeline: String, table: String },
    /// 55000: the source's unique index on the event id, the pipeline's ledger, is gone.
    LedgerIndexGone {
        pipeline: String,
        table: String,
        column: String,
    },
    /// 55000: history and refused rows are written by the pipeline only.
    ReadOnly {
        pipeline: String,
        what: String,
        operation: String,
    },
    /// 42939: a key or aggregate takes a name the views use.
    ReservedColumn {
        name: String,
        pipeline: String,
        /// What carries the name: "key column" or "aggregate".
        what: &'static str,
        detail: String,
    },
    /// 42883: a key or event-id column has no ordering to group or deduplicate by.
    NotGroupable {
        table: String,
        column: String,
        type_name: String,
        role: String,
        /// The type lacks a default hash function (session keys), not a btree ordering.
        hash: bool,
    },
    /// 42501: creating a pipeline on a table the caller does not own.
    NotTableOwner { table: String, owner: String },
    /// 42501: managing a pipeline the caller does not own. `action` completes "to ...".
    NotPipelineOwner {
        pipeline: String,
        /// None for a caller that may not read the pipeline: the hint names nobody.
        owner: Option<String>,
        action: &'static str,
    },
    /// 42501: any other missing privilege; the hint names the grant.
    PermissionDenied { message: String, hint: String },
    /// 2BP01: a change to the source table that would break a pipeline using the column.
    ColumnInUse {
        table: String,
        column: String,
        pipeline: String,
    },
    /// 55000: an internal function called outside the place it is made for.
    WrongContext { message: String },
    /// 22003: an ingest statement would take a backend's part of a window's sum beyond the bound
    /// that keeps the window's firing from overflowing.
    AccumulatorOverflow {
        pipeline: String,
        aggregate: String,
        window_start: String,
        type_name: String,
        limit: String,
    },
    /// 2BP01: an ALTER would rename something an aggregate's expression names.
    NameInUse {
        pipeline: String,
        aggregate: String,
        expression: String,
        error: String,
    },
    /// 42P17: an aggregate's argument or FILTER calls a function that is not immutable.
    MutableAggregateExpression {
        aggregate: String,
        what: &'static str,
    },
    /// 55000: a kept transition state of type internal was serialized by another server
    /// major version, whose format this one does not read.
    StateOfOtherMajor { what: String, written: u16 },
    /// XX001: bytes given as a kept transition state that no pipeline of this database wrote.
    ForeignState { what: String },
}

impl EtError {
    pub fn sqlstate(&self) -> PgSqlErrorCode {
        use EtError::*;
        use PgSqlErrorCode::*;
        match self {
            UnknownPipeline { .. } => ERRCODE_UNDEFINED_OBJECT,
            UnknownSource { .. } => ERRCODE_UNDEFINED_OBJECT,
            DuplicatePipeline { .. } => ERRCODE_DUPLICATE_OBJECT,
            NullArgument { .. } => ERRCODE_NULL_VALUE_NOT_ALLOWED,
            InvalidParameter { .. } => ERRCODE_INVALID_PARAMETER_VALUE,
            NameTooLong { .. } => ERRCODE_NAME_TOO_LONG,
            UndefinedColumn { .. } | UnknownKeyColumn { .. } => ERRCODE_UNDEFINED_COLUMN,
            WrongColumnType { .. } => ERRCODE_DATATYPE_MISMATCH,
            DuplicateColumn { .. } => ERRCODE_DUPLICATE_COLUMN,
            AggregateSyntax { .. } => ERRCODE_SYNTAX_ERROR,
            UndefinedAggregate { .. } => ERRCODE_UNDEFINED_FUNCTION,
            WrongObjectType { .. } => ERRCODE_WRONG_OBJECT_TYPE,
            NullEventTime { .. } | NullOffset { .. } => ERRCODE_NULL_VALUE_NOT_ALLOWED,
            EventTimeOutOfRange { .. } => ERRCODE_DATETIME_FIELD_OVERFLOW,
            WrongIsolation { .. } | WroteInTransaction { .. } => ERRCODE_INVALID_TRANSACTION_STATE,
            NotSupported { .. } => ERRCODE_FEATURE_NOT_SUPPORTED,
            SourceGone { .. } => ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            TableGone { .. } => ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            LedgerIndexGone { .. } => ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            ReadOnly { .. } => ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            ReservedColumn { .. } => ERRCODE_RESERVED_NAME,
            NotGroupable { .. } => ERRCODE_UNDEFINED_FUNCTION,
            NotTableOwner { .. } | NotPipelineOwner { .. } | PermissionDenied { .. } => {
                ERRCODE_INSUFFICIENT_PRIVILEGE
            }
            WrongContext { .. } => ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            ColumnInUse { .. } => ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST,
            AccumulatorOverflow { .. } => ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
            MutableAggregateExpression { .. } => ERRCODE_INVALID_OBJECT_DEFINITION,
            StateOfOtherMajor { .. } => ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            ForeignState { .. } => ERRCODE_DATA_CORRUPTED,
            NameInUse { .. } => ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST,
        }
    }

    pub fn message(&self) -> String {
        use EtError::*;
        match self {
            UnknownPipeline { name } => format!("pipeline \"{name}\" does not exist"),
            NotSupported { message, .. } => message.clone(),
            UnknownSource { pipeline, source } => {
                format!("source \"{source}\" of pipeline \"{pipeline}\" does not exist")
            }
            DuplicatePipeline { name } => format!("pipeline \"{name}\" already exists"),
            NameInUse {
                pipeline,
                aggregate,
                ..
            } => format!(
                "cannot change the name or schema of what aggregate \"{aggregate}\" of pipeline \"{pipeline}\" uses"
            ),
            MutableAggregateExpression { aggregate, what } => {
                format!("the {what} of aggregate \"{aggregate}\" is not immutable")
            }
            StateOfOtherMajor { what, written, .. } => format!(
                "the kept state of {what} was written by PostgreSQL {written}"
            ),
            ForeignState { what } => format!(
                "the bytes given as a kept state of {what} were not written by a pipeline of this database"
            ),
            AccumulatorOverflow {
                pipeline,
                aggregate,
                window_start,
                ..
            } => format!(
                "aggregate \"{aggregate}\" of pipeline \"{pipeline}\" is out of range in the window starting {window_start}"
            ),
            NullArgument { function, argument } => {
                format!("argument \"{argument}\" of {function} must not be NULL")
            }
            InvalidParameter { message, .. } => message.clone(),
            NameTooLong { name, .. } => format!("pipeline name \"{name}\" is too long"),
            UndefinedColumn { table, column, .. } => {
                format!("column \"{column}\" of relation {table} does not exist")
            }
            UnknownKeyColumn {
                pipeline, column, ..
            } => format!("\"{column}\" is not a key column of pipeline \"{pipeline}\""),
            WroteInTransaction { function, pipeline } => format!(
                "{function} of pipeline \"{pipeline}\" must run in a transaction that has written nothing"
            ),
            WrongColumnType {
                table,
                column,
                found,
                expected,
                ..
            } => {
                format!(
                    "column \"{column}\" of relation {table} is of type {found}, not {expected}"
                )
            }
            DuplicateColumn { name, .. } => {
                format!("column name \"{name}\" is used more than once")
            }
            AggregateSyntax { message, .. } => message.clone(),
            UndefinedAggregate {
                function,
                column,
                type_name,
            } => {
                format!("aggregate {function}() is not defined for column \"{column}\" of type {type_name}")
            }
            WrongObjectType { name } => format!("\"{name}\" is not a table"),
            NullEventTime { pipeline, column } => {
                format!(
                    "event time column \"{column}\" is NULL in a row for pipeline \"{pipeline}\""
                )
            }
            NullOffset {
                pipeline,
                column,
                source,
            } => {
                let what = if *source { "source" } else { "offset" };
                format!("{what} column \"{column}\" is NULL in a row for pipeline \"{pipeline}\"")
            }
            EventTimeOutOfRange {
                pipeline,
                column,
                value,
                infinite: true,
            } => {
                format!("event time column \"{column}\" is {value} in a row for pipeline \"{pipeline}\"")
            }
            EventTimeOutOfRange {
                pipeline,
                column,
                value,
                ..
            } => {
                format!("event time {value} in column \"{column}\" has no window of pipeline \"{pipeline}\" inside the timestamp range")
            }
            WrongIsolation { function, pipeline } => {
                format!("{function} of pipeline \"{pipeline}\" must run at isolation level READ COMMITTED")
            }
            TableGone { pipeline, table } => {
                format!("table {table} of pipeline \"{pipeline}\" does not exist")
            }
            LedgerIndexGone { pipeline, table, .. } => {
                format!("pipeline \"{pipeline}\" dedups by a unique index of {table} on its event id, and {table} has none")
            }
            SourceGone { pipeline } => {
                format!("source table of pipeline \"{pipeline}\" no longer exists")
            }
            ReadOnly {
                pipeline,
                what,
                operation,
            } => {
                format!("{what} of pipeline \"{pipeline}\" cannot be changed: {operation} is not allowed")
            }
            ReservedColumn {
                name,
                pipeline,
                what,
                ..
            } => format!("{what} name \"{name}\" of pipeline \"{pipeline}\" is reserved"),
            NotGroupable {
                table,
                column,
                type_name,
                role,
                hash,
            } => {
                let lacks = if *hash { "hash function" } else { "ordering" };
                format!("{role} column \"{column}\" of relation {table} has type {type_name}, which has no {lacks}")
            }
            NotTableOwner { table, .. } => {
                format!("must be owner of table {table} to create a pipeline on it")
            }
            NotPipelineOwner {
                pipeline, action, ..
            } => format!("must be owner of pipeline \"{pipeline}\" to {action}"),
            PermissionDenied { message, .. } => message.clone(),
            WrongContext { message } => message.clone(),
            ColumnInUse {
                table,
                column,
                pipeline,
            } => {
                format!("cannot rename column \"{column}\" of relation {table}: pipeline \"{pipeline}\" uses it")
            }
        }
    }

    pub fn detail(&self) -> Option<String> {
        use EtError::*;
        match self {
            InvalidParameter { detail, .. } => detail.clone(),
            StateOfOtherMajor { .. } => Some(
                "An aggregate whose transition state is internal is kept in its serialized form, which only the server major version that wrote it reads. The versions already published are unchanged.".into(),
            ),
            ForeignState { .. } => Some(
                "A kept state carries a seal made with this database's secret; these bytes have none that matches, and are not handed to the aggregate's deserialization function.".into(),
            ),
            NameInUse {
                expression, error, ..
            } => Some(format!(
                "The aggregate reads {expression}, kept by name; after the change it reads: {error}. Every insert into the pipeline's source would fail. Nothing was changed."
            )),
            NameTooLong { limit, .. } => Some(format!(
                "The views of a pipeline are named after it with a suffix of up to 12 bytes such as \"_provisional\"; pipeline names can have at most {limit} bytes."
            )),
            DuplicateColumn { detail, .. } => Some(detail.clone()),
            AggregateSyntax { position, .. } => Some(format!("The error is at character {position} of the aggregate list.")),
            NullEventTime { .. } => Some("Every row needs an event time; no row of the statement was applied.".into()),
            NullOffset { .. } => Some("Every row of a pipeline with offsets needs its offset and its source; no row of the statement was applied.".into()),
            EventTimeOutOfRange { .. } => Some("No row of the statement was applied.".into()),
            AccumulatorOverflow { type_name, limit, .. } => Some(format!(
                "Each backend's part of a window's sum of {type_name} stays within {limit}, so that adding the parts up when the window fires cannot overflow; the rows of this statement would take it beyond. No row of the statement was applied."
            )),
            WrongIsolation { function, .. } if *function == "eventtime.restate" => Some(
                "Under REPEATABLE READ or SERIALIZABLE the snapshot was taken before the restatement lock, so rows folded meanwhile would be folded again."
                    .into(),
            ),
            WrongIsolation { function: SESSION_INGEST, .. } => Some(
                "Under REPEATABLE READ or SERIALIZABLE the snapshot was taken before the lock of the rows' keys, so the sessions another writer committed meanwhile would not be merged."
                    .into(),
            ),
            WrongIsolation { .. } => Some(
                "Under REPEATABLE READ or SERIALIZABLE the snapshot was taken before the pipeline lock, so rows committed meanwhile would not be fired."
                    .into(),
            ),
            ReadOnly { what, .. } if what == "history" => {
                Some("Published versions are never changed; late rows and restatements add new versions.".into())
            }
            ReadOnly { what, .. } if what == "refused rows" => Some("Refused rows are kept as they arrived, with the window they missed and the watermark that refused them.".into()),
            ReadOnly { what, .. } if what == "offsets" => Some("Each source's committed offset moves with the ingest statements that bring its rows, in their transactions; a job resumes after it (eventtime.sources).".into()),
            ReadOnly { what, .. } if what == "results" => Some("Provisional and current results are read from the pipeline's state and history; rows change them through the source table.".into()),
            ReadOnly { .. } => Some("The folds of restatements and the event-id ledger are written by the pipeline's own statements only.".into()),
            ReservedColumn { detail, .. } => Some(detail.clone()),
            NotGroupable { hash: true, .. } => Some("Session windows find the live sessions of a key, and take its turn, by a hash of the key made with each type's default hash function; this type has none.".into()),
            NotGroupable { .. } => Some("Keys and event ids are grouped and deduplicated with a btree ordering; json and similar types have none.".into()),
            ColumnInUse { .. } => Some(
                "The pipeline's ingest statement names the column; under another name, every insert into the table would fail. Nothing was changed."
                    .into(),
            ),
            _ => None,
        }
    }

    pub fn hint(&self) -> Option<String> {
        use EtError::*;
        match self {
            UnknownPipeline { .. } => Some("The view eventtime.pipelines lists the existing pipelines.".into()),
            UnknownSource { .. } => Some(
                "A source is registered by its first eventtime.advance_watermark(); the view eventtime.sources lists the sources of each pipeline."
                    .into(),
            ),
            DuplicatePipeline { .. } => Some("Choose another name, or drop the pipeline first with eventtime.drop_pipeline().".into()),
            AccumulatorOverflow { type_name, .. } if type_name == "numeric" => {
                Some("Check the statement's rows for values out of scale.".into())
            }
            AccumulatorOverflow { .. } => Some(
                "Check the statement's rows for values out of scale; for sums this large, aggregate a numeric column."
                    .into(),
            ),
            InvalidParameter { hint, .. } => hint.clone(),
            NameInUse { pipeline, .. } => Some(format!(
                "Keep the name, or drop the pipeline with eventtime.drop_pipeline('{pipeline}'), make the change and create the pipeline again."
            )),
            StateOfOtherMajor { .. } => Some(
                "Recreate the pipeline after the upgrade (eventtime.drop_pipeline, then eventtime.create_pipeline) to fold new rows into its windows; or keep the aggregate over a double precision argument, whose state is an ordinary array.".into(),
            ),
            ForeignState { .. } => Some(
                "Write kept states only through the pipeline; a state copied from another database cannot be read in this one.".into(),
            ),
            MutableAggregateExpression { .. } => Some(
                "A pipeline computes an aggregate's argument again when it restates a window, from the row as it was stored: use immutable functions and operators only (now(), random() and casts between text and timestamptz are not; write such values into a column of the source instead)."
                    .into(),
            ),
            NotSupported { hint, .. } => Some(hint.clone()),
            UndefinedColumn { hint, .. } => hint.clone(),
            WroteInTransaction { .. } => Some(
                "The feed returns committed versions only: read it in a transaction of its own, or before the transaction writes."
                    .into(),
            ),
            UnknownKeyColumn { pipeline, keys, .. } => Some(if keys.is_empty() {
                format!("Pipeline \"{pipeline}\" has no key columns: pass NULL for the key.")
            } else {
                format!(
                    "The key columns of pipeline \"{pipeline}\" are: {}.",
                    keys.join(", ")
                )
            }),
            WrongColumnType { hint, .. } => hint.clone(),
            AggregateSyntax { hint, .. } => hint.clone(),
            DuplicateColumn { .. } => Some("Rename the aggregate with AS, or choose other key columns.".into()),
            UndefinedAggregate { function, .. } => Some(match function.as_str() {
                "sum" | "avg" => format!("{function}() takes a numeric or interval column."),
                _ => format!("{function}() takes a column whose type has an ordering."),
            }),
            WrongObjectType { .. } => Some("The source of a pipeline must be a table that ingestion inserts into.".into()),
            NullEventTime { .. } => Some("Give the row an event time, or leave it out of the statement.".into()),
            NullOffset { source: false, .. } => Some("Give each row the offset of its record in its log (a Kafka offset, a line number); a row at or below its source's committed offset is a duplicate.".into()),
            NullOffset { source: true, .. } => Some("Give each row the name of the log it comes from (a Kafka partition, a file), as eventtime.sources shows it.".into()),
            EventTimeOutOfRange { infinite: true, .. } => Some("Event times must be finite.".into()),
            WrongIsolation { function: "an ingest statement", .. } => Some(
                "The pipeline has a watermark_lag, so each ingest statement advances the watermark and fires windows; ingest at READ COMMITTED."
                    .into(),
            ),
            WrongIsolation { function: SESSION_INGEST, .. } => Some(
                "The pipeline has session windows, which each ingest statement merges with the sessions written before it; ingest at READ COMMITTED."
                    .into(),
            ),
            WrongIsolation { .. } => Some("Call it in its own READ COMMITTED transaction.".into()),
            SourceGone { .. } => Some("Drop the pipeline with eventtime.drop_pipeline().".into()),
            LedgerIndexGone { column, .. } => Some(format!("Create the unique index on \"{column}\" again (CREATE UNIQUE INDEX, or the primary key it was): the pipeline keeps no ledger of its own.")),
            TableGone { pipeline, .. } => Some(format!("The pipeline cannot go on without it: drop it with eventtime.drop_pipeline('{pipeline}') and create it again.")),
            ReadOnly { .. } => Some("Only the pipeline writes here; drop the pipeline to remove it.".into()),
            ReservedColumn { .. } => Some("Rename the aggregate with AS; for a key, choose another column.".into()),
            NotGroupable { .. } => Some("Use a column of another type, or cast it in a generated column (jsonb, text).".into()),
            NotTableOwner { table, owner } => Some(format!(
                "Table {table} belongs to role {owner}: create the pipeline as that role, or as a role that inherits its privileges."
            )),
            NotPipelineOwner { pipeline, owner: Some(owner), .. } => Some(format!(
                "Pipeline \"{pipeline}\" belongs to role {owner}, the owner of its source table: run this as that role, or as a role that inherits its privileges."
            )),
            NotPipelineOwner { .. } => Some(
                "A pipeline is managed by the owner of its source table, or a role with its privileges.".into()
            ),
            PermissionDenied { hint, .. } => Some(hint.clone()),
            ColumnInUse { pipeline, .. } => Some(format!(
                "Keep the name, or drop the pipeline with eventtime.drop_pipeline('{}'), rename the column and create the pipeline again.",
                pipeline.replace('\'', "''")
            )),
            _ => None,
        }
    }

    /// Raises the error in PostgreSQL. The statement fails and nothing of it is applied.
    pub fn raise(self) -> ! {
        let mut report = ErrorReport::new(self.sqlstate(), self.message(), "pg_eventtime");
        if let Some(d) = self.detail() {
            report = report.set_detail(d);
        }
        if let Some(h) = self.hint() {
            report = report.set_hint(h);
        }
        report.report(PgLogLevel::ERROR);
        unreachable!("ERROR reports do not return")
    }
}

/// `value`, or the 22004 error naming `argument` of `function` when it is NULL.
pub fn required<T>(value: Option<T>, function: &'static str, argument: &'static str) -> T {
    value.unwrap_or_else(|| EtError::NullArgument { function, argument }.raise())
}

pub fn invalid(message: impl Into<String>, hint: Option<&str>) -> EtError {
    EtError::InvalidParameter {
        message: message.into(),
        detail: None,
        hint: hint.map(String::from),
    }
}
