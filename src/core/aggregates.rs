//! The aggregates of a pipeline: `count(*)`, `count(x)`, `sum(x)`, `min(x)`, `max(x)` or
//! `avg(x)`, each `AS name`, where `x` is a column of the source or an immutable expression over
//! its row, with an optional `FILTER (WHERE ...)`. PostgreSQL's own parser reads the list
//! (`pg::aggparse`); this module keeps what it found.
//!
//! Each aggregate is kept in the window state as an accumulator that two partial results can be
//! merged into (see [`AggFunc`]); the published value is computed from the accumulator.

use serde::{Deserialize, Serialize};

use super::ident::quote_ident;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AggFunc {
    Count,
    Sum,
    Min,
    Max,
    Avg,
}

impl AggFunc {
    pub fn name(self) -> &'static str {
        match self {
            AggFunc::Count => "count",
            AggFunc::Sum => "sum",
            AggFunc::Min => "min",
            AggFunc::Max => "max",
            AggFunc::Avg => "avg",
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
            (AggFunc::Avg, _, _) => format!("sum({v}){filter}"),
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

    /// Whether the accumulator column ([`Self::acc_column`]) is a sum, which can overflow when
    /// state rows are added up (the count beside an `avg` is not: it counts rows).
    pub fn sums(&self) -> bool {
        matches!(self.spec.func, AggFunc::Sum | AggFunc::Avg)
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
        let mut out = vec![(
            c.clone(),
            match self.spec.func {
                AggFunc::Count => format!("s.{c} + excluded.{c}"),
                AggFunc::Min => format!("LEAST(s.{c}, excluded.{c})"),
                AggFunc::Max => format!("GREATEST(s.{c}, excluded.{c})"),
                AggFunc::Sum | AggFunc::Avg => format!(
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
        let mut out = vec![match self.spec.func {
            AggFunc::Count => format!("sum({c})::bigint"),
            AggFunc::Min => format!("min({c})"),
            AggFunc::Max => format!("max({c})"),
            AggFunc::Sum | AggFunc::Avg => format!("sum({c})::{t}"),
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
        let mut out = vec![match self.spec.func {
            AggFunc::Count => format!("coalesce({c}, 0) + {p}"),
            AggFunc::Min => format!("LEAST({c}, {p})"),
            AggFunc::Max => format!("GREATEST({c}, {p})"),
            AggFunc::Sum | AggFunc::Avg => format!(
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
        let e = match self.avg_kind {
            None => c,
            Some(AvgKind::Interval) => format!("{c} / NULLIF({n}, 0)::double precision"),
            Some(_) => format!("{c} / NULLIF({n}, 0)"),
        };
        format!("({e})::{}", self.result_type)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn avg_kinds_follow_postgres_result_types() {
        assert_eq!(AvgKind::for_input("integer"), Some(AvgKind::Numeric));
        assert_eq!(AvgKind::for_input("real"), Some(AvgKind::Float));
        assert_eq!(AvgKind::for_input("interval"), Some(AvgKind::Interval));
        assert_eq!(AvgKind::for_input("text"), None);
    }
}
