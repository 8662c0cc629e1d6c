//! The aggregates of a pipeline: `count(*)`, `count(x)`, `sum(x)`, `min(x)`, `max(x)` or
//! `avg(x)`, or any other aggregate (of one argument or more) with a combine function and a
//! transition type that is an ordinary type ([`GenericAgg`]), each `AS name`, where `x` is a column of the
//! source or an immutable expression over its row, with an optional `FILTER (WHERE ...)`.
//! PostgreSQL's own parser reads the list (`pg::aggparse`); this module keeps what it found.
//!
//! Each aggregate is kept in the window state as an accumulator that two partial results can be
//! merged into (see [`AggFunc`]); the published value is computed from the accumulator.

use serde::{Deserialize, Serialize};

use super::ident::{quote_ident, quote_literal};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AggFunc {
    Count,
    Sum,
    Min,
    Max,
    Avg,
    /// Any other aggregate: its name is [`AggSpec::function`], its functions [`GenericAgg`].
    Generic,
}

impl AggFunc {
    pub fn name(self) -> &'static str {
        match self {
            AggFunc::Count => "count",
            AggFunc::Sum => "sum",
            AggFunc::Min => "min",
            AggFunc::Max => "max",
            AggFunc::Avg => "avg",
            AggFunc::Generic => "aggregate",
        }
    }

    /// The function of an unqualified (or `pg_catalog`) aggregate name.
    pub fn from_name(name: &str) -> Option<AggFunc> {
        Some(match name {
            "count" => AggFunc::Count,
            "sum" => AggFunc::Sum,
            "min" => AggFunc::Min,
            "max" => AggFunc::Max,
            "avg" => AggFunc::Avg,
            _ => return None,
        })
    }
}

/// One aggregate as the user wrote it. `arg` is the column of `func(column)`; `None` for
/// `count(*)` and for an argument that is an expression or has a `FILTER`, which `expr` holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AggSpec {
    pub func: AggFunc,
    pub arg: Option<String>,
    pub alias: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expr: Option<AggExpr>,
    /// For [`AggFunc::Generic`]: the aggregate's name as written, each part quoted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    /// For `DISTINCT` and ordered-set aggregates: how the call is written over its values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept: Option<Kept>,
}

/// An aggregate that needs every value of its window, not a partial state: `DISTINCT` in any
/// aggregate (`count(DISTINCT store)`), the ordered-set aggregates (`percentile_cont(0.9)
/// WITHIN GROUP (ORDER BY latency)`, `percentile_disc`, `mode`) and PostgreSQL's own that
/// collect their values ([`Kept::COLLECTING`]: `array_agg(id)`, neither `DISTINCT` nor
/// `WITHIN GROUP`). The window state keeps the values ([`KeptValues`]); every version is the
/// aggregate, as written, over them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Kept {
    pub distinct: bool,
    /// An ordered-set aggregate: its direct arguments (constants, deparsed by PostgreSQL) and
    /// the sort order of its aggregated argument as written (` DESC`, ` NULLS FIRST`, or empty).
    #[serde(default)]
    pub within_group: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub direct: Vec<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub order: String,
    /// Whether the call has a `FILTER`, which is folded into the argument as a NULL.
    #[serde(default)]
    pub filtered: bool,
}

impl Kept {
    /// PostgreSQL's aggregates of one argument whose result is the values themselves: they have
    /// no combine function on every supported major (`array_agg` has one from 16 on, but of a
    /// polymorphic type), so a window keeps every value for them, as for a percentile.
    pub const COLLECTING: [&'static str; 3] = ["array_agg", "json_agg", "jsonb_agg"];

    /// The aggregate `name` over `value`, written as the user wrote it (`collate`: empty, or
    /// the ` COLLATE ...` of the argument).
    pub fn call(&self, name: &str, value: &str, collate: &str) -> String {
        if self.within_group {
            format!(
                "{name}({}) WITHIN GROUP (ORDER BY {value}{collate}{})",
                self.direct.join(", "),
                self.order
            )
        } else if self.distinct {
            format!("{name}(DISTINCT {value}{collate})")
        } else {
            format!("{name}({value}{collate})")
        }
    }
}

/// An argument that is more than a column: PostgreSQL's own deparse of it over the source row
/// aliased [`AggExpr::ROW`], every name in it qualified as `search_path = pg_catalog, pg_temp`
/// needs. A `FILTER (WHERE f)` is folded into it as `CASE WHEN f THEN arg END` (`THEN 1` for
/// `count(*)`): the five aggregates skip NULLs, so the aggregate of that is the filtered one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AggExpr {
    pub sql: String,
    /// The source columns it reads.
    pub columns: Vec<String>,
    /// For an aggregate of two or more arguments (`corr(y, x)`): each argument, deparsed as
    /// [`AggExpr::sql`] is, the `FILTER` folded into the first. [`AggExpr::sql`] is then the
    /// transition state of the row alone ([`GenericAgg::row_state`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Whether the call has a `FILTER`, folded into [`AggExpr::sql`] as a NULL.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub filtered: bool,
}

impl AggExpr {
    /// The alias of the source row the expression's columns are qualified with.
    pub const ROW: &'static str = "_et_src";
}

impl AggSpec {
    /// Whether the aggregate has an argument (a column or an expression): all but `count(*)`.
    pub fn has_arg(&self) -> bool {
        self.arg.is_some() || self.expr.is_some()
    }

    /// The name the aggregate is called by.
    pub fn call_name(&self) -> &str {
        self.function.as_deref().unwrap_or(self.func.name())
    }

    /// The source columns the aggregate reads.
    pub fn columns(&self) -> Vec<&str> {
        match &self.expr {
            Some(e) => e.columns.iter().map(String::as_str).collect(),
            None => self.arg.iter().map(String::as_str).collect(),
        }
    }
}

/// How an `avg` accumulates: PostgreSQL's `avg` returns numeric for integer and numeric input,
/// double precision for real and double precision, and interval for interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AvgKind {
    Numeric,
    Float,
    Interval,
}

impl AvgKind {
    /// The accumulator kind for an input type, given by its `regtype` name.
    pub fn for_input(type_name: &str) -> Option<AvgKind> {
        match type_name {
            "smallint" | "integer" | "bigint" | "numeric" => Some(AvgKind::Numeric),
            "real" | "double precision" => Some(AvgKind::Float),
            "interval" => Some(AvgKind::Interval),
            _ => None,
        }
    }
}

/// An aggregate other than the five, computed by its own functions as PostgreSQL's partial
/// aggregation does: a statement's rows go through its transition function (from its initial
/// condition), partials meet through its combine function, every version is its final
/// function's result. Its transition type is an ordinary type (not `internal`, not
/// polymorphic), which the state column keeps, and its transition and combine functions are
/// strict, so a `FILTER` folded into the argument (see [`AggExpr`]) skips rows as `FILTER` does.
///
/// The pipeline owns five helper objects per such aggregate, named from [`GenericAgg::helper`]
/// ([`ResolvedAgg::helper_ddl`]): the aggregates `_part(arg)` (the transition function without
/// the final one: a statement's partial) and `_comb(state)` (the combine function as a
/// transition function: a window's state rows into one), and the SQL functions `_merge(state,
/// state)`, `_one(arg)` (the partial of one row) and `_final(state)`. The SQL functions' bodies
/// are kept parsed (`BEGIN ATOMIC`) and the aggregates name their functions by oid, so a rename
/// of a function they call changes nothing; dropping one is refused as a dependency.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GenericAgg {
    /// The aggregate, as `regprocedure` shows it.
    pub aggregate: String,
    /// The transition, combine and final functions, each as a quoted qualified name.
    pub transfn: String,
    pub combinefn: String,
    pub finalfn: Option<String>,
    /// Whether the final function takes NULLs of the argument type after the state.
    pub final_extra: bool,
    /// The aggregate's declared argument type and its transition type, as `format_type` gives;
    /// for an aggregate of two or more arguments, the transition type (see [`Self::arg_types`]).
    pub arg_type: String,
    /// For an aggregate of two or more arguments (`corr`, `covar_*`, `regr_*`, a user's): their
    /// declared types. The ingest statements then compute each row's transition state from
    /// its arguments ([`Self::row_state`]) and aggregate those states with the combine
    /// function, so the helpers take the state where the others take the argument.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub arg_types: Vec<String>,
    pub state_type: String,
    pub initcond: Option<String>,
    /// Whether the state is one of PostgreSQL's moments (`double precision[]` of a count and
    /// sums, as `stddev`, `variance`, `corr`, `covar_*` and `regr_*` of floats keep), whose
    /// elements are kept within a bound at ingest (see `pg::overflow`): their combine function
    /// fails on an overflow, which would otherwise fail the window's firing.
    pub bounded: bool,
    /// The schema-qualified prefix of the helper objects: `_eventtime.p<id>_a<i>`.
    #[serde(default)]
    pub helper: String,
    /// Set for an aggregate of [`Kept`] values: the state is an array of them, and the
    /// aggregate's own functions run only in its final helper (see [`KeptValues`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<KeptValues>,
    /// Set for an aggregate whose transition state is `internal` (see [`SerialFns`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial: Option<SerialFns>,
}

/// The state of an aggregate whose transition state is `internal` (`stddev(numeric)`,
/// `variance(bigint)`, a user's aggregate in C with serialization functions): the aggregate's
/// serialization of it, sealed (`core::sealed`), in a `bytea` column
/// ([`GenericAgg::state_type`]).
///
/// Its helpers ([`ResolvedAgg::helper_ddl`]) are aggregates of transition type `internal`,
/// made by the catalog's owner: `_part(arg)` (the aggregate's transition function, then
/// `_eventtime.sealed_out`: a statement's partial), `_comb(bytea)` (`_eventtime.sealed_in`,
/// which opens, deserializes and combines each kept state, then `sealed_out`) and `_fin(bytea)`
/// (`sealed_in`, then the aggregate's final function); each names the aggregate's combine and
/// serialization functions, which `sealed_in` and `sealed_out` read from it. The SQL functions
/// `_one(arg)`, `_merge(bytea, bytea)` and `_final(bytea)` call them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SerialFns {
    pub serialfn: String,
    pub deserialfn: String,
    /// The aggregate's `FINALFUNC_MODIFY`: `READ_ONLY`, `SHAREABLE` or `READ_WRITE`.
    pub final_modify: String,
    /// What the errors of a kept state name: `aggregate "sd" of pipeline "readings"`.
    pub what: String,
}

/// The state of an aggregate of [`Kept`] values: an array of its argument's type
/// ([`GenericAgg::state_type`]), sorted and without repeats for `DISTINCT` (one NULL at most),
/// every value otherwise. NULLs are left out where the aggregate ignores them (a strict
/// transition function; `percentile_cont`, `percentile_disc` and `mode`), which is also how a
/// `FILTER` folded into the argument skips a row.
///
/// Its helpers ([`ResolvedAgg::helper_ddl`]): `_norm(state)` (the array as kept: sorted and
/// unique for `DISTINCT`, NULLs out where they are ignored), `_merge(state, state)`, the
/// aggregate `_comb(state)` (concatenated, then `_norm`), and `_final(state)`: the aggregate as
/// written over `unnest(state)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptValues {
    /// The aggregate's qualified name.
    pub call: String,
    pub elem_type: String,
    pub skip_nulls: bool,
    /// ` COLLATE ...` of the argument, or empty for the default collation.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub collate: String,
}

impl GenericAgg {
    /// The transition state of one row whose arguments are `args` (in the order of
    /// [`Self::arg_types`]): the transition function applied to the initial condition, which
    /// a strict transition function skips, as PostgreSQL does, when an argument is NULL. (An
    /// aggregate of two or more arguments with a strict transition function has an initial
    /// condition: PostgreSQL refuses it otherwise.)
    pub fn row_state(&self, args: &[String]) -> String {
        let st = &self.state_type;
        let init = match &self.initcond {
            Some(i) => format!("{}::{st}", quote_literal(i)),
            None => format!("NULL::{st}"),
        };
        let nulls: Vec<String> = args.iter().map(|a| format!("({a}) IS NULL")).collect();
        let typed: Vec<String> = args
            .iter()
            .zip(&self.arg_types)
            .map(|(a, t)| format!("({a})::{t}"))
            .collect();
        format!(
            "CASE WHEN {} THEN {init} ELSE {}({init}, {}) END",
            nulls.join(" OR "),
            self.transfn,
            typed.join(", ")
        )
    }
}

/// An aggregate with the types resolved against the source table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolvedAgg {
    #[serde(flatten)]
    pub spec: AggSpec,
    /// The type of the published column: PostgreSQL's own result type for `func(arg)`.
    pub result_type: String,
    /// The type of the accumulator column in the window state.
    pub acc_type: String,
    /// Set for `avg` only.
    pub avg_kind: Option<AvgKind>,
    /// Set for [`AggFunc::Generic`] only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generic: Option<GenericAgg>,
}

/// The algebra of a resolved aggregate in a pipeline's window state: its accumulator columns,
/// the partial aggregate of a statement's rows, the merge of a partial into the stored state, the
/// partial of a single row, and the published value. The `i`-th aggregate of a pipeline owns the
/// state columns `_et_a<i>` (and `_et_a<i>_n` for `avg`) and reads its argument from `_et_v<i>`.
/// A new aggregate is a new arm in each of these, and nothing else.
impl ResolvedAgg {
    /// The accumulator column `i` of the state.
    pub fn acc_column(i: usize) -> String {
        quote_ident(&format!("_et_a{i}"))
    }

    /// The count beside the accumulator of `avg` number `i`.
    pub fn acc_n_column(i: usize) -> String {
        quote_ident(&format!("_et_a{i}_n"))
    }

    /// The column the ingest statement gives the argument of aggregate `i`.
    pub fn arg_column(i: usize) -> String {
        quote_ident(&format!("_et_v{i}"))
    }

    /// The state columns of aggregate `i`, as (name, type).
    pub fn acc_columns(&self, i: usize) -> Vec<(String, String)> {
        let mut out = vec![(Self::acc_column(i), self.acc_type.clone())];
        if self.avg_kind.is_some() {
            out.push((Self::acc_n_column(i), "bigint NOT NULL".to_string()));
        }
        out
    }

    /// The partial aggregates, one per state column, over the rows of one statement of a key and
    /// window. `filter` (empty, or ` FILTER (WHERE ...)`) follows each aggregate call.
    pub fn partials(&self, i: usize, filter: &str) -> Vec<String> {
        let v = Self::arg_column(i);
        if let Some(g) = &self.generic {
            if let Some(k) = &g.values {
                return vec![format!(
                    "{}_norm(pg_catalog.array_agg(({v})::{}){filter})",
                    g.helper, k.elem_type
                )];
            }
            if g.serial.is_some() && !g.arg_types.is_empty() {
                let fields: Vec<String> = (1..=g.arg_types.len())
                    .map(|j| format!("(({v})::{}).a{j}", g.arg_type))
                    .collect();
                return vec![format!("{}_part({}){filter}", g.helper, fields.join(", "))];
            }
            return vec![format!("{}_part(({v})::{}){filter}", g.helper, g.arg_type)];
        }
        let mut out = vec![match (self.spec.func, self.spec.has_arg(), self.avg_kind) {
            (AggFunc::Count, false, _) => format!("count(*){filter}"),
            (AggFunc::Count, true, _) => format!("count({v}){filter}"),
            (AggFunc::Sum, _, _) => format!("sum({v}){filter}"),
            (AggFunc::Min, _, _) => format!("min({v}){filter}"),
            (AggFunc::Max, _, _) => format!("max({v}){filter}"),
            (AggFunc::Avg, _, Some(AvgKind::Numeric)) => {
                format!("sum({v}){filter}::numeric")
            }
            (AggFunc::Avg, _, Some(AvgKind::Float)) => {
                format!("sum({v}::double precision){filter}")
            }
            (AggFunc::Avg, _, _) | (AggFunc::Generic, _, _) => format!("sum({v}){filter}"),
        }];
        if self.avg_kind.is_some() {
            out.push(format!("count({v}){filter}"));
        }
        out
    }

    /// The partials of [`Self::partials`] over one row whose argument is the expression `arg`
    /// (`None` for `count(*)`): the aggregate of one value is the value in the accumulator's type
    /// (NULL for NULL), and a count is 1 or 0.
    pub fn one_row_partials(&self, arg: Option<String>) -> Vec<String> {
        let v = arg.unwrap_or_default();
        if let Some(g) = &self.generic {
            if let Some(k) = &g.values {
                return vec![format!("{}_norm(ARRAY[({v})::{}])", g.helper, k.elem_type)];
            }
            return vec![format!("{}_one(({v})::{})", g.helper, g.arg_type)];
        }
        let present = format!("CASE WHEN {v} IS NULL THEN 0::bigint ELSE 1::bigint END");
        let mut out = vec![match (self.spec.func, self.spec.has_arg()) {
            (AggFunc::Count, false) => "1::bigint".to_string(),
            (AggFunc::Count, true) => present.clone(),
            _ => format!("({v})::{}", self.acc_type),
        }];
        if self.avg_kind.is_some() {
            out.push(present);
        }
        out
    }

    /// Whether the accumulator column ([`Self::acc_column`]) is a sum, or holds sums, which can
    /// overflow when state rows are added up (the count beside an `avg` is not: it counts rows).
    pub fn sums(&self) -> bool {
        match &self.generic {
            Some(g) => g.bounded,
            None => matches!(self.spec.func, AggFunc::Sum | AggFunc::Avg),
        }
    }

    /// `SET` items that merge a statement's partials (`excluded`) into the stored state (`s`).
    pub fn merges(&self, i: usize) -> Vec<String> {
        self.merge_items(i)
            .into_iter()
            .map(|(c, e)| format!("{c} = {e}"))
            .collect()
    }

    /// The items of [`Self::merges`] as (column, expression): the accumulator first.
    pub fn merge_items(&self, i: usize) -> Vec<(String, String)> {
        let c = Self::acc_column(i);
        if let Some(g) = &self.generic {
            return vec![(
                c.clone(),
                format!("{}_merge(s.{c}, excluded.{c})", g.helper),
            )];
        }
        let mut out = vec![(
            c.clone(),
            match self.spec.func {
                AggFunc::Count => format!("s.{c} + excluded.{c}"),
                AggFunc::Min => format!("LEAST(s.{c}, excluded.{c})"),
                AggFunc::Max => format!("GREATEST(s.{c}, excluded.{c})"),
                AggFunc::Sum | AggFunc::Avg | AggFunc::Generic => format!(
                    "CASE WHEN s.{c} IS NULL THEN excluded.{c} WHEN excluded.{c} IS NULL THEN s.{c} ELSE s.{c} + excluded.{c} END"
                ),
            },
        )];
        if self.avg_kind.is_some() {
            let n = Self::acc_n_column(i);
            out.push((n.clone(), format!("s.{n} + excluded.{n}")));
        }
        out
    }

    /// Aggregates over the state rows of one window (its statements' partials) that give its
    /// accumulators: one expression per state column, each in the accumulator's type.
    pub fn combine(&self, i: usize) -> Vec<String> {
        let c = Self::acc_column(i);
        let t = &self.acc_type;
        if let Some(g) = &self.generic {
            return vec![format!("{}_comb({c})", g.helper)];
        }
        let mut out = vec![match self.spec.func {
            AggFunc::Count => format!("sum({c})::bigint"),
            AggFunc::Min => format!("min({c})"),
            AggFunc::Max => format!("max({c})"),
            AggFunc::Sum | AggFunc::Avg | AggFunc::Generic => format!("sum({c})::{t}"),
        }];
        if self.avg_kind.is_some() {
            out.push(format!("sum({})::bigint", Self::acc_n_column(i)));
        }
        out
    }

    /// The accumulators of aggregate `i` after adding the partials `new` (in the order of
    /// [`Self::partials`]) to the accumulators of the row aliased `old`, which may be all NULL
    /// (no row): one expression per state column, NULL-safe as the aggregates are.
    pub fn merge_values(&self, i: usize, old: &str, new: &[String]) -> Vec<String> {
        let c = format!("{old}.{}", Self::acc_column(i));
        let p = &new[0];
        if let Some(g) = &self.generic {
            return vec![format!("{}_merge({c}, {p})", g.helper)];
        }
        let mut out = vec![match self.spec.func {
            AggFunc::Count => format!("coalesce({c}, 0) + {p}"),
            AggFunc::Min => format!("LEAST({c}, {p})"),
            AggFunc::Max => format!("GREATEST({c}, {p})"),
            AggFunc::Sum | AggFunc::Avg | AggFunc::Generic => format!(
                "CASE WHEN {c} IS NULL THEN {p} WHEN {p} IS NULL THEN {c} ELSE {c} + {p} END"
            ),
        }];
        if self.avg_kind.is_some() {
            out.push(format!(
                "coalesce({old}.{}, 0) + {}",
                Self::acc_n_column(i),
                new[1]
            ));
        }
        out
    }

    /// The published value, from the state row aliased `u`, in PostgreSQL's own result type.
    pub fn final_value(&self, i: usize, u: &str) -> String {
        let c = format!("{u}.{}", Self::acc_column(i));
        let n = format!("{u}.{}", Self::acc_n_column(i));
        let e = match (self.avg_kind, &self.generic) {
            (_, Some(g)) => format!("{}_final({c})", g.helper),
            (None, _) => c,
            (Some(AvgKind::Interval), _) => format!("{c} / NULLIF({n}, 0)::double precision"),
            (Some(_), _) => format!("{c} / NULLIF({n}, 0)"),
        };
        format!("({e})::{}", self.result_type)
    }
}

/// The helper objects of a [`GenericAgg`] (see there).
impl ResolvedAgg {
    /// The statements that create the helper objects, in dependency order; none for the five.
    pub fn helper_ddl(&self) -> Vec<String> {
        let Some(g) = &self.generic else {
            return Vec::new();
        };
        if let Some(k) = &g.values {
            return self.kept_ddl(g, k);
        }
        if let Some(f) = &g.serial {
            return self.serial_ddl(g, f);
        }
        let (h, st, arg) = (&g.helper, &g.state_type, &g.arg_type);
        let init = g.initcond.as_deref().map(quote_literal);
        let initcond = init
            .as_ref()
            .map(|i| format!(", INITCOND = {i}"))
            .unwrap_or_default();
        // A strict transition function skips NULL inputs; from a NULL initial condition the
        // first input is the state, as PostgreSQL does it.
        // With two or more arguments, the argument is already a row's state (see
        // `GenericAgg::arg_types`): the combine function takes it where the transition
        // function takes an argument.
        let multi = !g.arg_types.is_empty();
        let step = if multi { &g.combinefn } else { &g.transfn };
        let one = match &init {
            _ if multi => "v".to_string(),
            Some(i) => format!(
                "CASE WHEN v IS NULL THEN {i}::{st} ELSE {}({i}::{st}, v) END",
                g.transfn
            ),
            None => format!("v::{st}"),
        };
        let extra: Vec<String> = if multi {
            g.arg_types.iter().map(|t| format!(", NULL::{t}")).collect()
        } else {
            vec![format!(", NULL::{arg}")]
        };
        let fin = match &g.finalfn {
            Some(f) if g.final_extra => format!("{f}(s{})", extra.concat()),
            Some(f) => format!("{f}(s)"),
            None => "s".to_string(),
        };
        vec![
            format!(
                "CREATE AGGREGATE {h}_part({arg}) (SFUNC = {step}, STYPE = {st}{initcond})"
            ),
            format!(
                "CREATE AGGREGATE {h}_comb({st}) (SFUNC = {}, STYPE = {st}{initcond})",
                g.combinefn
            ),
            format!(
                "CREATE FUNCTION {h}_merge(a {st}, b {st}) RETURNS {st} LANGUAGE sql PARALLEL SAFE\n\
                 BEGIN ATOMIC SELECT CASE WHEN a IS NULL THEN b WHEN b IS NULL THEN a ELSE {}(a, b) END; END",
                g.combinefn
            ),
            format!(
                "CREATE FUNCTION {h}_one(v {arg}) RETURNS {st} LANGUAGE sql PARALLEL SAFE\n\
                 BEGIN ATOMIC SELECT {one}; END"
            ),
            format!(
                "CREATE FUNCTION {h}_final(s {st}) RETURNS {} LANGUAGE sql PARALLEL SAFE\n\
                 BEGIN ATOMIC SELECT {fin}; END",
                self.result_type
            ),
        ]
    }

    /// The helpers of an aggregate of kept values (see [`KeptValues`]), in dependency order.
    fn kept_ddl(&self, g: &GenericAgg, k: &KeptValues) -> Vec<String> {
        let (h, st) = (&g.helper, &g.state_type);
        let c = &k.collate;
        let nulls = if k.skip_nulls {
            " WHERE u IS NOT NULL"
        } else {
            ""
        };
        let norm = match self.spec.kept.as_ref().map(|k| k.distinct) {
            Some(true) => format!(
                "ARRAY(SELECT DISTINCT u{c} FROM pg_catalog.unnest(s) u{nulls} ORDER BY u{c})"
            ),
            _ if k.skip_nulls => "COALESCE(pg_catalog.array_remove(s, NULL), '{}')".into(),
            _ => "COALESCE(s, '{}')".into(),
        };
        let call = self
            .spec
            .kept
            .clone()
            .unwrap_or_default()
            .call(&k.call, "u", c);
        vec![
            format!(
                "CREATE FUNCTION {h}_norm(s {st}) RETURNS {st} LANGUAGE sql IMMUTABLE PARALLEL SAFE\n\
                 BEGIN ATOMIC SELECT {norm}; END"
            ),
            format!(
                "CREATE FUNCTION {h}_merge(a {st}, b {st}) RETURNS {st} LANGUAGE sql IMMUTABLE PARALLEL SAFE\n\
                 BEGIN ATOMIC SELECT CASE WHEN a IS NULL THEN b WHEN b IS NULL THEN a ELSE {h}_norm(pg_catalog.array_cat(a, b)) END; END"
            ),
            format!(
                "CREATE AGGREGATE {h}_comb({st}) (SFUNC = pg_catalog.array_cat, STYPE = {st}, FINALFUNC = {h}_norm)"
            ),
            format!(
                "CREATE FUNCTION {h}_final(s {st}) RETURNS {} LANGUAGE sql PARALLEL SAFE\n\
                 BEGIN ATOMIC SELECT {call} FROM pg_catalog.unnest(s) u; END",
                self.result_type
            ),
        ]
    }

    /// The helpers of an aggregate whose transition state is `internal` (see [`SerialFns`]),
    /// in dependency order.
    fn serial_ddl(&self, g: &GenericAgg, f: &SerialFns) -> Vec<String> {
        let (h, arg) = (&g.helper, &g.arg_type);
        let (args, fields) = Self::serial_args(g);
        let functions = format!(
            "COMBINEFUNC = {}, SERIALFUNC = {}, DESERIALFUNC = {}",
            g.combinefn, f.serialfn, f.deserialfn
        );
        let fin = g.finalfn.as_deref().unwrap_or_default();
        let what = quote_literal(&f.what);
        let mut out = Vec::new();
        if !g.arg_types.is_empty() {
            let columns: Vec<String> = g
                .arg_types
                .iter()
                .enumerate()
                .map(|(j, t)| format!("a{} {t}", j + 1))
                .collect();
            out.push(format!("CREATE TYPE {arg} AS ({})", columns.join(", ")));
        }
        // Not PARALLEL SAFE: the seal reads the database's key as the catalog's owner.
        out.extend([
            format!(
                "CREATE AGGREGATE {h}_part({args}) (SFUNC = {}, STYPE = internal, FINALFUNC = _eventtime.sealed_out, {functions})",
                g.transfn
            ),
            format!(
                "CREATE AGGREGATE {h}_comb(bytea) (SFUNC = _eventtime.sealed_in, STYPE = internal, FINALFUNC = _eventtime.sealed_out, {functions})"
            ),
            format!(
                "CREATE AGGREGATE {h}_fin(bytea) (SFUNC = _eventtime.sealed_in, STYPE = internal, FINALFUNC = {fin}, FINALFUNC_MODIFY = {}, {functions})",
                f.final_modify
            ),
        ]);
        for a in [
            format!("{h}_part({args})"),
            format!("{h}_comb(bytea)"),
            format!("{h}_fin(bytea)"),
        ] {
            out.push(format!("COMMENT ON AGGREGATE {a} IS {what}"));
        }
        out.extend([
            format!(
                "CREATE FUNCTION {h}_merge(a bytea, b bytea) RETURNS bytea LANGUAGE sql\n\
                 BEGIN ATOMIC SELECT {h}_comb(x) FROM (VALUES (a), (b)) t(x); END"
            ),
            format!(
                "CREATE FUNCTION {h}_one(v {arg}) RETURNS bytea LANGUAGE sql\n\
                 BEGIN ATOMIC SELECT {h}_part({fields}); END"
            ),
            format!(
                "CREATE FUNCTION {h}_final(s bytea) RETURNS {} LANGUAGE sql\n\
                 BEGIN ATOMIC SELECT {h}_fin(s); END",
                self.result_type
            ),
        ]);
        out
    }

    /// The argument types of an internal-state aggregate's `_part` helper, and its arguments
    /// from the argument `v` of `_one`: the argument itself, or for two or more arguments, the
    /// fields of their row (of the composite type [`GenericAgg::arg_type`]).
    fn serial_args(g: &GenericAgg) -> (String, String) {
        if g.arg_types.is_empty() {
            return (g.arg_type.clone(), "v".to_string());
        }
        let fields: Vec<String> = (1..=g.arg_types.len())
            .map(|j| format!("(v).a{j}"))
            .collect();
        (g.arg_types.join(", "), fields.join(", "))
    }

    /// The helper objects as (`AGGREGATE` or `FUNCTION`, signature), dependents first.
    pub fn helpers(&self) -> Vec<(&'static str, String)> {
        let Some(g) = &self.generic else {
            return Vec::new();
        };
        let (h, st, arg) = (&g.helper, &g.state_type, &g.arg_type);
        if g.serial.is_some() {
            let (args, _) = Self::serial_args(g);
            let mut out = vec![
                ("FUNCTION", format!("{h}_final(bytea)")),
                ("FUNCTION", format!("{h}_one({arg})")),
                ("FUNCTION", format!("{h}_merge(bytea, bytea)")),
                ("AGGREGATE", format!("{h}_fin(bytea)")),
                ("AGGREGATE", format!("{h}_comb(bytea)")),
                ("AGGREGATE", format!("{h}_part({args})")),
            ];
            if !g.arg_types.is_empty() {
                out.push(("TYPE", arg.clone()));
            }
            return out;
        }
        if g.values.is_some() {
            return vec![
                ("FUNCTION", format!("{h}_final({st})")),
                ("AGGREGATE", format!("{h}_comb({st})")),
                ("FUNCTION", format!("{h}_merge({st}, {st})")),
                ("FUNCTION", format!("{h}_norm({st})")),
            ];
        }
        vec![
            ("FUNCTION", format!("{h}_final({st})")),
            ("FUNCTION", format!("{h}_one({arg})")),
            ("FUNCTION", format!("{h}_merge({st}, {st})")),
            ("AGGREGATE", format!("{h}_comb({st})")),
            ("AGGREGATE", format!("{h}_part({arg})")),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stddev() -> ResolvedAgg {
        ResolvedAgg {
            spec: AggSpec {
                func: AggFunc::Generic,
                arg: Some("amount".into()),
                alias: "sd".into(),
                expr: None,
                function: Some("stddev".into()),
                kept: None,
            },
            result_type: "double precision".into(),
            acc_type: "double precision[]".into(),
            avg_kind: None,
            generic: Some(GenericAgg {
                aggregate: "stddev(double precision)".into(),
                transfn: "pg_catalog.float8_accum".into(),
                combinefn: "pg_catalog.float8_combine".into(),
                finalfn: Some("pg_catalog.float8_stddev_samp".into()),
                final_extra: false,
                arg_type: "double precision".into(),
                arg_types: Vec::new(),
                state_type: "double precision[]".into(),
                initcond: Some("{0,0,0}".into()),
                bounded: true,
                helper: "_eventtime.p7_a2".into(),
                values: None,
                serial: None,
            }),
        }
    }

    #[test]
    fn two_arguments_make_a_row_state_that_the_combine_function_aggregates() {
        let mut a = stddev();
        let g = a.generic.as_mut().unwrap();
        g.transfn = "pg_catalog.float8_regr_accum".into();
        g.combinefn = "pg_catalog.float8_regr_combine".into();
        g.arg_type = "double precision[]".into();
        g.arg_types = vec!["double precision".into(), "double precision".into()];
        g.initcond = Some("{0,0,0,0,0,0}".into());
        assert_eq!(
            a.generic
                .as_ref()
                .unwrap()
                .row_state(&["y".into(), "x".into()]),
            "CASE WHEN (y) IS NULL OR (x) IS NULL THEN '{0,0,0,0,0,0}'::double precision[] \
             ELSE pg_catalog.float8_regr_accum('{0,0,0,0,0,0}'::double precision[], \
             (y)::double precision, (x)::double precision) END"
        );
        let ddl = a.helper_ddl();
        assert!(
            ddl[0].contains("_part(double precision[]) (SFUNC = pg_catalog.float8_regr_combine")
        );
        assert!(ddl[3].contains("BEGIN ATOMIC SELECT v; END"), "{}", ddl[3]);
    }

    #[test]
    fn generic_aggregates_go_through_their_helpers() {
        let a = stddev();
        assert_eq!(
            a.partials(2, " FILTER (WHERE x)"),
            vec![r#"_eventtime.p7_a2_part(("_et_v2")::double precision) FILTER (WHERE x)"#]
        );
        assert_eq!(
            a.one_row_partials(Some("v.amount".into())),
            vec!["_eventtime.p7_a2_one((v.amount)::double precision)"]
        );
        assert_eq!(
            a.merge_values(2, "m", &["p".into()]),
            vec![r#"_eventtime.p7_a2_merge(m."_et_a2", p)"#]
        );
        assert_eq!(a.combine(2), vec![r#"_eventtime.p7_a2_comb("_et_a2")"#]);
        assert_eq!(
            a.final_value(2, "u"),
            r#"(_eventtime.p7_a2_final(u."_et_a2"))::double precision"#
        );
        assert!(a.sums(), "float moments are bounded at ingest");
        let ddl = a.helper_ddl();
        assert_eq!(ddl.len(), a.helpers().len());
        assert!(ddl[0].starts_with("CREATE AGGREGATE _eventtime.p7_a2_part(double precision) (SFUNC = pg_catalog.float8_accum, STYPE = double precision[], INITCOND = '{0,0,0}')"));
        // One row from the initial condition, a NULL argument skipped as a strict function does.
        assert!(ddl[3].contains("CASE WHEN v IS NULL THEN '{0,0,0}'::double precision[] ELSE pg_catalog.float8_accum('{0,0,0}'::double precision[], v) END"));
        assert!(ddl[4].contains("pg_catalog.float8_stddev_samp(s)"));
        // Dropped dependents first: the functions, then the aggregates.
        assert_eq!(
            a.helpers()[4],
            (
                "AGGREGATE",
                "_eventtime.p7_a2_part(double precision)".to_string()
            )
        );
    }

    #[test]
    fn an_internal_state_is_kept_sealed_through_helpers_of_the_aggregates_functions() {
        let mut a = stddev();
        a.result_type = "numeric".into();
        let g = a.generic.as_mut().unwrap();
        g.transfn = "pg_catalog.numeric_accum".into();
        g.combinefn = "pg_catalog.numeric_combine".into();
        g.finalfn = Some("pg_catalog.numeric_stddev_samp".into());
        g.arg_type = "numeric".into();
        g.state_type = "bytea".into();
        g.initcond = None;
        g.bounded = false;
        g.serial = Some(SerialFns {
            serialfn: "pg_catalog.numeric_serialize".into(),
            deserialfn: "pg_catalog.numeric_deserialize".into(),
            final_modify: "READ_ONLY".into(),
            what: "aggregate \"sd\" of pipeline \"o'k\"".into(),
        });
        assert_eq!(
            a.partials(2, ""),
            vec![r#"_eventtime.p7_a2_part(("_et_v2")::numeric)"#]
        );
        assert!(!a.sums());
        let ddl = a.helper_ddl();
        let functions = "COMBINEFUNC = pg_catalog.numeric_combine, SERIALFUNC = pg_catalog.numeric_serialize, DESERIALFUNC = pg_catalog.numeric_deserialize";
        assert_eq!(ddl[0], format!("CREATE AGGREGATE _eventtime.p7_a2_part(numeric) (SFUNC = pg_catalog.numeric_accum, STYPE = internal, FINALFUNC = _eventtime.sealed_out, {functions})"));
        assert_eq!(ddl[1], format!("CREATE AGGREGATE _eventtime.p7_a2_comb(bytea) (SFUNC = _eventtime.sealed_in, STYPE = internal, FINALFUNC = _eventtime.sealed_out, {functions})"));
        assert_eq!(ddl[2], format!("CREATE AGGREGATE _eventtime.p7_a2_fin(bytea) (SFUNC = _eventtime.sealed_in, STYPE = internal, FINALFUNC = pg_catalog.numeric_stddev_samp, FINALFUNC_MODIFY = READ_ONLY, {functions})"));
        assert_eq!(
            ddl[3],
            r#"COMMENT ON AGGREGATE _eventtime.p7_a2_part(numeric) IS 'aggregate "sd" of pipeline "o''k"'"#
        );
        assert!(ddl[6].contains("SELECT _eventtime.p7_a2_comb(x) FROM (VALUES (a), (b)) t(x)"));
        assert!(
            ddl[8].starts_with("CREATE FUNCTION _eventtime.p7_a2_final(s bytea) RETURNS numeric")
        );
        assert!(ddl.iter().all(|d| !d.contains("PARALLEL SAFE")));
        // Each helper is dropped, dependents first.
        let helpers = a.helpers();
        assert_eq!(helpers.len(), 6);
        assert_eq!(
            helpers[0],
            ("FUNCTION", "_eventtime.p7_a2_final(bytea)".to_string())
        );
        assert_eq!(
            helpers[5],
            ("AGGREGATE", "_eventtime.p7_a2_part(numeric)".to_string())
        );
    }

    #[test]
    fn a_generic_aggregate_without_initial_condition_starts_from_its_first_value() {
        let mut a = stddev();
        let g = a.generic.as_mut().unwrap();
        g.initcond = None;
        g.finalfn = None;
        let ddl = a.helper_ddl();
        assert!(!ddl[0].contains("INITCOND"));
        assert!(ddl[3].contains("SELECT v::double precision[]"));
        assert!(ddl[4].contains("BEGIN ATOMIC SELECT s; END"));
    }

    fn kept(kept: Kept, skip_nulls: bool) -> ResolvedAgg {
        let mut a = stddev();
        a.spec.kept = Some(kept);
        let g = a.generic.as_mut().unwrap();
        g.state_type = "double precision[]".into();
        g.bounded = false;
        g.values = Some(KeptValues {
            call: "pg_catalog.percentile_cont".into(),
            elem_type: "double precision".into(),
            skip_nulls,
            collate: String::new(),
        });
        a
    }

    #[test]
    fn an_ordered_set_aggregate_keeps_its_values_and_runs_over_them() {
        let a = kept(
            Kept {
                within_group: true,
                direct: vec!["'0.9'::double precision".into()],
                order: " DESC".into(),
                ..Kept::default()
            },
            true,
        );
        assert_eq!(
            a.partials(2, ""),
            vec![r#"_eventtime.p7_a2_norm(pg_catalog.array_agg(("_et_v2")::double precision))"#]
        );
        assert_eq!(
            a.one_row_partials(Some("v.ms".into())),
            vec!["_eventtime.p7_a2_norm(ARRAY[(v.ms)::double precision])"]
        );
        assert!(!a.sums());
        let ddl = a.helper_ddl();
        assert_eq!(ddl.len(), a.helpers().len());
        // Every value kept, NULLs left out, as percentile_cont ignores them.
        assert!(
            ddl[0].contains("COALESCE(pg_catalog.array_remove(s, NULL), '{}')"),
            "{}",
            ddl[0]
        );
        assert!(
            ddl[2].contains("SFUNC = pg_catalog.array_cat")
                && ddl[2].contains("FINALFUNC = _eventtime.p7_a2_norm")
        );
        assert!(ddl[3].contains(
            "SELECT pg_catalog.percentile_cont('0.9'::double precision) WITHIN GROUP (ORDER BY u DESC) FROM pg_catalog.unnest(s) u"
        ), "{}", ddl[3]);
        assert_eq!(
            a.helpers()[3],
            (
                "FUNCTION",
                "_eventtime.p7_a2_norm(double precision[])".to_string()
            )
        );
    }

    #[test]
    fn distinct_keeps_each_value_once_sorted() {
        let mut a = kept(
            Kept {
                distinct: true,
                ..Kept::default()
            },
            false,
        );
        a.generic.as_mut().unwrap().values.as_mut().unwrap().collate =
            r#" COLLATE "pg_catalog"."C""#.into();
        let ddl = a.helper_ddl();
        assert!(ddl[0].contains(
            r#"ARRAY(SELECT DISTINCT u COLLATE "pg_catalog"."C" FROM pg_catalog.unnest(s) u ORDER BY u COLLATE "pg_catalog"."C")"#
        ), "{}", ddl[0]);
        assert!(
            ddl[3].contains(r#"pg_catalog.percentile_cont(DISTINCT u COLLATE "pg_catalog"."C")"#)
        );
        let skipping = kept(
            Kept {
                distinct: true,
                ..Kept::default()
            },
            true,
        );
        assert!(skipping.helper_ddl()[0]
            .contains("FROM pg_catalog.unnest(s) u WHERE u IS NOT NULL ORDER BY u"));
    }

    #[test]
    fn a_collecting_aggregate_keeps_every_value_nulls_included() {
        let mut a = kept(Kept::default(), false);
        a.generic.as_mut().unwrap().values.as_mut().unwrap().call = "pg_catalog.array_agg".into();
        let ddl = a.helper_ddl();
        assert!(ddl[0].contains("SELECT COALESCE(s, '{}')"), "{}", ddl[0]);
        assert!(
            ddl[3].contains("SELECT pg_catalog.array_agg(u) FROM pg_catalog.unnest(s) u"),
            "{}",
            ddl[3]
        );
        assert!(Kept::COLLECTING.contains(&"json_agg"));
    }

    #[test]
    fn avg_kinds_follow_postgres_result_types() {
        assert_eq!(AvgKind::for_input("integer"), Some(AvgKind::Numeric));
        assert_eq!(AvgKind::for_input("real"), Some(AvgKind::Float));
        assert_eq!(AvgKind::for_input("interval"), Some(AvgKind::Interval));
        assert_eq!(AvgKind::for_input("text"), None);
    }
}
