//! The `aggregates` argument of `create_pipeline`: a comma-separated list of
//! `count(*)`, `count(col)`, `sum(col)`, `min(col)`, `max(col)` or `avg(col)`, each `AS name`.
//! Names follow SQL: unquoted names fold to lower case, double-quoted names are taken as written.
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

    fn parse(name: &str) -> Option<AggFunc> {
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

/// One aggregate as the user wrote it. `arg` is `None` for `count(*)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AggSpec {
    pub func: AggFunc,
    pub arg: Option<String>,
    pub alias: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based character position in the aggregate list.
    pub position: usize,
    pub message: String,
    pub hint: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident { text: String, quoted: bool },
    LParen,
    RParen,
    Star,
    Comma,
}

fn tokenize(input: &str) -> Result<Vec<(usize, Tok)>, ParseError> {
    let chars: Vec<char> = input.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let pos = i + 1;
        match c {
            c if c.is_whitespace() => i += 1,
            '(' => {
                out.push((pos, Tok::LParen));
                i += 1;
            }
            ')' => {
                out.push((pos, Tok::RParen));
                i += 1;
            }
            '*' => {
                out.push((pos, Tok::Star));
                i += 1;
            }
            ',' => {
                out.push((pos, Tok::Comma));
                i += 1;
            }
            '"' => {
                let mut text = String::new();
                i += 1;
                loop {
                    match chars.get(i) {
                        None => {
                            return Err(ParseError {
                                position: pos,
                                message: "unterminated quoted name in aggregate list".into(),
                                hint: None,
                            })
                        }
                        Some('"') if chars.get(i + 1) == Some(&'"') => {
                            text.push('"');
                            i += 2;
                        }
                        Some('"') => {
                            i += 1;
                            break;
                        }
                        Some(&c) => {
                            text.push(c);
                            i += 1;
                        }
                    }
                }
                if text.is_empty() {
                    return Err(ParseError {
                        position: pos,
                        message: "zero-length quoted name in aggregate list".into(),
                        hint: None,
                    });
                }
                out.push((pos, Tok::Ident { text, quoted: true }));
            }
            c if c.is_alphabetic() || c == '_' => {
                let mut text = String::new();
                while let Some(&c) = chars.get(i) {
                    if c.is_alphanumeric() || c == '_' || c == '$' {
                        text.extend(c.to_lowercase());
                        i += 1;
                    } else {
                        break;
                    }
                }
                out.push((
                    pos,
                    Tok::Ident {
                        text,
                        quoted: false,
                    },
                ));
            }
            other => {
                return Err(ParseError {
                    position: pos,
                    message: format!("unexpected character \"{other}\" in aggregate list"),
                    hint: Some(HINT.into()),
                })
            }
        }
    }
    Ok(out)
}

const HINT: &str = "Write a list such as 'count(*) AS orders, sum(amount) AS revenue'; \
the functions are count, sum, min, max and avg, each over one column of the source table.";

pub fn parse(input: &str) -> Result<Vec<AggSpec>, ParseError> {
    let toks = tokenize(input)?;
    let end = input.chars().count() + 1;
    let mut i = 0;
    let mut out = Vec::new();
    let err = |position: usize, message: String| ParseError {
        position,
        message,
        hint: Some(HINT.into()),
    };
    let at = |i: usize| toks.get(i).map(|t| t.0).unwrap_or(end);
    loop {
        let (fpos, fname) = match toks.get(i) {
            Some((
                p,
                Tok::Ident {
                    text,
                    quoted: false,
                },
            )) => (*p, text.clone()),
            _ => {
                return Err(err(
                    at(i),
                    "expected an aggregate function in aggregate list".into(),
                ))
            }
        };
        let func = AggFunc::parse(&fname).ok_or_else(|| ParseError {
            position: fpos,
            message: format!("aggregate function \"{fname}\" is not supported"),
            hint: Some(HINT.into()),
        })?;
        i += 1;
        if toks.get(i).map(|t| &t.1) != Some(&Tok::LParen) {
            return Err(err(
                at(i),
                format!("expected \"(\" after \"{fname}\" in aggregate list"),
            ));
        }
        i += 1;
        let arg = match toks.get(i) {
            Some((_, Tok::Star)) if func == AggFunc::Count => None,
            Some((p, Tok::Star)) => {
                return Err(err(
                    *p,
                    format!("{fname}(*) is not an aggregate; only count(*) takes \"*\""),
                ))
            }
            Some((_, Tok::Ident { text, .. })) => Some(text.clone()),
            _ => {
                return Err(err(
                    at(i),
                    format!("expected a column name or \"*\" in {fname}()"),
                ))
            }
        };
        i += 1;
        if toks.get(i).map(|t| &t.1) != Some(&Tok::RParen) {
            return Err(err(
                at(i),
                format!("expected \")\" to close {fname}(); each aggregate takes one column"),
            ));
        }
        i += 1;
        if let Some((
            _,
            Tok::Ident {
                text,
                quoted: false,
            },
        )) = toks.get(i)
        {
            if text == "as" {
                i += 1;
            }
        }
        let alias = match toks.get(i) {
            Some((_, Tok::Ident { text, .. })) => text.clone(),
            _ => {
                return Err(ParseError {
                    position: at(i),
                    message: format!("aggregate {fname}() has no name"),
                    hint: Some(format!(
                        "Name each aggregate, for example '{fname}(...) AS total'."
                    )),
                })
            }
        };
        i += 1;
        out.push(AggSpec { func, arg, alias });
        match toks.get(i) {
            None => break,
            Some((_, Tok::Comma)) => i += 1,
            Some((p, _)) => return Err(err(*p, "expected \",\" between aggregates".into())),
        }
    }
    Ok(out)
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
        let mut out = vec![
            match (self.spec.func, self.spec.arg.is_some(), self.avg_kind) {
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
            },
        ];
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
        let mut out = vec![match (self.spec.func, self.spec.arg.is_some()) {
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

    fn spec(func: AggFunc, arg: Option<&str>, alias: &str) -> AggSpec {
        AggSpec {
            func,
            arg: arg.map(String::from),
            alias: alias.into(),
        }
    }

    #[test]
    fn parses_the_spec_example() {
        let got = parse("count(*) AS orders, sum(amount) AS revenue").unwrap();
        assert_eq!(
            got,
            vec![
                spec(AggFunc::Count, None, "orders"),
                spec(AggFunc::Sum, Some("amount"), "revenue")
            ]
        );
    }

    #[test]
    fn names_fold_unless_quoted_and_as_is_optional() {
        let got =
            parse(" MAX( Amount )  Top , avg(\"Net \"\"Value\"\"\") AS \"Mean Net\"").unwrap();
        assert_eq!(
            got,
            vec![
                spec(AggFunc::Max, Some("amount"), "top"),
                spec(AggFunc::Avg, Some("Net \"Value\""), "Mean Net")
            ]
        );
    }

    #[test]
    fn rejects_what_is_not_in_the_grammar() {
        for (input, pos) in [
            ("median(x) AS m", 1),
            ("sum(*) AS s", 5),
            ("sum(a, b) AS s", 6),
            ("count(*)", 9),
            ("count(*) AS n sum(x) AS s", 15),
            ("sum(a) AS s,", 13),
            ("sum(a) AS s; DROP TABLE t", 12),
            ("", 1),
            ("sum(\"a) AS s", 5),
        ] {
            let e = parse(input).unwrap_err();
            assert_eq!(e.position, pos, "{input}: {e:?}");
        }
    }

    #[test]
    fn avg_kinds_follow_postgres_result_types() {
        assert_eq!(AvgKind::for_input("integer"), Some(AvgKind::Numeric));
        assert_eq!(AvgKind::for_input("real"), Some(AvgKind::Float));
        assert_eq!(AvgKind::for_input("interval"), Some(AvgKind::Interval));
        assert_eq!(AvgKind::for_input("text"), None);
    }
}
