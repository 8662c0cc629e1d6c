//! The `aggregates` argument of `create_pipeline`, read by PostgreSQL itself: the list is the
//! select list of `SELECT <list> FROM ONLY <source>`, which the server's parser reads
//! ([`parse`]) and its parse analysis resolves ([`Parsed::analyze`]), so that names fold and
//! quote, operators, casts, `CASE` and functions resolve, and errors are worded exactly as in any
//! query. Each item must be one call of an aggregate with a name (`count`, `sum`, `min`, `max` and
//! `avg` by accumulators of their own, any other as `core::aggregates::GenericAgg` says); its
//! argument, and its `FILTER (WHERE ...)`, may be any expression over the source row that
//! PostgreSQL deems immutable, without subqueries, aggregates, window functions or functions
//! returning sets. An argument that is a column stays a column ([`AggSpec::arg`]); any other,
//! or any with a `FILTER`, is kept as PostgreSQL's deparse of it ([`AggExpr`]), and the
//! pipeline's trigger is made to depend on what it uses, as a view's rule does.
//!
//! Names resolve as in every function of this extension, with `search_path` pinned to
//! `pg_catalog, pg_temp`: an expression names functions, operators and types of other schemas
//! with their schema (`public.net(amount)`, `OPERATOR(public.+)`).

use std::cell::Cell;
use std::ffi::{CStr, CString};

use pgrx::pg_sys;
use pgrx::pg_sys::panic::{CaughtError, ErrorReport};
use pgrx::prelude::*;
use pgrx::{is_a, PgList};

use crate::core::aggregates::{AggExpr, AggFunc, AggSpec, Kept};
use crate::core::ident::quote_ident;

use super::error::EtError;

const HINT: &str = "Write a list such as 'count(*) AS orders, sum(price * quantity) AS revenue'; \
each item is an aggregate (count, sum, min, max, avg, one with a combine function such as \
stddev or bool_and, one with DISTINCT, or an ordered-set one such as percentile_cont(0.9) WITHIN \
GROUP (ORDER BY x)) of a column or an immutable expression of the source row, with an optional \
FILTER (WHERE ...), and a name.";

/// What precedes the list in the query PostgreSQL reads: positions in it are moved back by this.
const PREFIX: &str = "SELECT ";

thread_local! {
    /// The cursor position of the last error raised while the list was read (0: none).
    static ERROR_POSITION: Cell<i32> = const { Cell::new(0) };
}

/// An error context callback that keeps the error's cursor position, which a caught error
/// report does not carry.
unsafe extern "C-unwind" fn keep_position(_arg: *mut std::ffi::c_void) {
    // SAFETY: called by errfinish while the error is being reported, when it has one.
    let pos = unsafe { pg_sys::geterrposition() };
    ERROR_POSITION.with(|p| p.set(pos));
}

/// Pops the callback pushed by [`read_by_postgres`], also when an error unwinds past it.
struct Popped(*mut pg_sys::ErrorContextCallback);

impl Drop for Popped {
    fn drop(&mut self) {
        // SAFETY: restores the stack as it was before the push.
        unsafe { pg_sys::error_context_stack = self.0 };
    }
}

/// Runs `f` (a parse or a parse analysis of `query`); an error it raises is raised again with its
/// SQLSTATE, message and hint, its position moved into the aggregate list (`text`).
fn read_by_postgres<T>(text: &str, f: impl FnOnce() -> T) -> T {
    ERROR_POSITION.with(|p| p.set(0));
    // The error is raised again below, never resumed from: what `f` touched is not reused.
    let f = std::panic::AssertUnwindSafe(f);
    PgTryBuilder::new(move || {
        let mut callback = pg_sys::ErrorContextCallback {
            // SAFETY: reading the current stack head.
            previous: unsafe { pg_sys::error_context_stack },
            callback: Some(keep_position),
            arg: std::ptr::null_mut(),
        };
        let _popped = Popped(callback.previous);
        // SAFETY: `callback` outlives its time on the stack: `_popped` pops it first.
        unsafe { pg_sys::error_context_stack = &mut callback };
        f()
    })
    .catch_others(|e| match e {
        CaughtError::PostgresError(r) | CaughtError::ErrorReport(r) => {
            let pos = ERROR_POSITION.with(|p| p.get());
            let len = text.chars().count() as i32;
            let position = (pos - PREFIX.len() as i32).clamp(1, len + 1);
            let mut detail = format!("The error is at character {position} of the aggregate list.");
            if let Some(d) = r.detail() {
                detail = format!("{d}\n{detail}");
            }
            let mut report =
                ErrorReport::new(r.sql_error_code(), r.message().to_string(), "pg_eventtime")
                    .set_detail(detail);
            report = report.set_hint(r.hint().unwrap_or(HINT).to_string());
            report.report(PgLogLevel::ERROR);
            unreachable!("ERROR reports do not return")
        }
        other => other.rethrow(),
    })
    .execute()
}

/// The list as PostgreSQL's parser read it: the aggregates, and the raw statement to analyse.
pub struct Parsed {
    pub specs: Vec<AggSpec>,
    /// Per aggregate: whether it has a `FILTER`, or an argument that is not a plain column.
    needs_expr: Vec<bool>,
    raw: *mut pg_sys::RawStmt,
    query: CString,
    text: String,
}

fn syntax(text: &str, location: i32, message: String, hint: Option<String>) -> ! {
    let position = if location < 0 {
        1
    } else {
        // `location` is a byte offset into the query.
        let byte = (location as usize).saturating_sub(PREFIX.len());
        text.get(..byte).map(|s| s.chars().count()).unwrap_or(0) + 1
    };
    EtError::AggregateSyntax {
        message,
        position,
        hint: Some(hint.unwrap_or_else(|| HINT.to_string())),
    }
    .raise()
}

fn not_supported(message: String, hint: &str) -> ! {
    EtError::NotSupported {
        message,
        hint: hint.to_string(),
    }
    .raise()
}

/// # Safety
/// `node` is a `String` node.
unsafe fn str_value(node: *mut pg_sys::Node) -> String {
    // SAFETY: as the caller says.
    unsafe {
        CStr::from_ptr((*(node as *mut pg_sys::String)).sval)
            .to_string_lossy()
            .into_owned()
    }
}

/// Reads the aggregate list `text` of a pipeline on source `source_sql` (a quoted name).
pub fn parse(text: &str, source_sql: &str) -> Parsed {
    if text.trim().is_empty() {
        syntax(text, -1, "the aggregate list is empty".into(), None);
    }
    let query =
        CString::new(format!("{PREFIX}{text}\nFROM ONLY {source_sql}")).unwrap_or_else(|_| {
            syntax(
                text,
                -1,
                "the aggregate list contains a zero byte".into(),
                None,
            )
        });
    // SAFETY: the parser reads a NUL-terminated string and returns a list of RawStmt nodes.
    let stmts = read_by_postgres(text, || unsafe { pg_sys::pg_parse_query(query.as_ptr()) });
    // SAFETY: a list of RawStmt pointers, as pg_parse_query returns it.
    let stmts = unsafe { PgList::<pg_sys::RawStmt>::from_pg(stmts) };
    let one = "the aggregate list must be a list of aggregates, and nothing after it";
    if stmts.len() != 1 {
        syntax(text, -1, one.into(), None);
    }
    let raw = stmts.get_ptr(0).expect("one statement");
    // SAFETY: `raw` is a RawStmt; its `stmt` is a node, read as a SelectStmt only after its tag.
    let select = unsafe {
        let stmt = (*raw).stmt;
        if !is_a(stmt, pg_sys::NodeTag::T_SelectStmt) {
            syntax(text, -1, one.into(), None);
        }
        &*(stmt as *mut pg_sys::SelectStmt)
    };
    let from = unsafe { PgList::<pg_sys::Node>::from_pg(select.fromClause) };
    if select.op != pg_sys::SetOperation::SETOP_NONE
        || !select.distinctClause.is_null()
        || !select.intoClause.is_null()
        || !select.whereClause.is_null()
        || !select.groupClause.is_null()
        || !select.havingClause.is_null()
        || !select.windowClause.is_null()
        || !select.valuesLists.is_null()
        || !select.sortClause.is_null()
        || !select.limitOffset.is_null()
        || !select.limitCount.is_null()
        || !select.lockingClause.is_null()
        || !select.withClause.is_null()
        || from.len() != 1
    {
        syntax(text, -1, one.into(), None);
    }
    // SAFETY: the target list of a SelectStmt is a list of ResTarget nodes.
    let targets = unsafe { PgList::<pg_sys::ResTarget>::from_pg(select.targetList) };
    let mut specs = Vec::new();
    let mut needs_expr = Vec::new();
    for t in targets.iter_ptr() {
        // SAFETY: `t` is a ResTarget; its `val` is a node, read by its tag.
        let (name, val, location) = unsafe { ((*t).name, (*t).val, (*t).location) };
        if !unsafe { is_a(val, pg_sys::NodeTag::T_FuncCall) } {
            syntax(
                text,
                location,
                "each item of the aggregate list must be one aggregate call, such as sum(amount) AS total".into(),
                None,
            );
        }
        // SAFETY: tagged T_FuncCall.
        let call = unsafe { &*(val as *mut pg_sys::FuncCall) };
        let names = unsafe { PgList::<pg_sys::Node>::from_pg(call.funcname) };
        // SAFETY: a function name is a list of String nodes.
        let parts: Vec<String> = names.iter_ptr().map(|n| unsafe { str_value(n) }).collect();
        let fname = parts.last().cloned().unwrap_or_default();
        // DISTINCT and ordered-set aggregates keep their values (see `Kept`), whatever the
        // aggregate, and so do PostgreSQL's own that collect them; otherwise the five by their
        // own accumulators, and any other name as the analysis resolves it.
        let within_group = call.agg_within_group;
        let builtin = parts.len() == 1 || (parts.len() == 2 && parts[0] == "pg_catalog");
        let keeps = call.agg_distinct
            || within_group
            || (builtin && Kept::COLLECTING.contains(&fname.as_str()));
        let func = builtin
            .then(|| AggFunc::from_name(&fname))
            .flatten()
            .filter(|_| !keeps)
            .unwrap_or(AggFunc::Generic);
        let function = (func == AggFunc::Generic).then(|| {
            parts
                .iter()
                .map(|p| quote_ident(p))
                .collect::<Vec<_>>()
                .join(".")
        });
        if !call.over.is_null() {
            not_supported(
                format!("{fname}() OVER (...) is a window function, not an aggregate of a window"),
                "A pipeline's windows are its event-time windows: write the aggregate without OVER.",
            );
        }
        if !call.agg_order.is_null() && !within_group {
            not_supported(
                format!("{fname}() with ORDER BY inside the call is not supported in a pipeline"),
                "A window's state is combined from partials in no particular order: write the aggregate without ORDER BY (ordered-set aggregates such as percentile_cont(0.9) WITHIN GROUP (ORDER BY x) are supported).",
            );
        }
        if call.func_variadic {
            not_supported(
                format!("{fname}(VARIADIC ...) is not supported in a pipeline"),
                "Write the aggregate's arguments one by one.",
            );
        }
        let mut kept = keeps.then(|| Kept {
            distinct: call.agg_distinct,
            within_group,
            filtered: !call.agg_filter.is_null(),
            ..Kept::default()
        });
        if within_group {
            // SAFETY: the WITHIN GROUP list of a FuncCall is a list of SortBy nodes.
            let order = unsafe { PgList::<pg_sys::SortBy>::from_pg(call.agg_order) };
            if order.len() != 1 {
                not_supported(
                    format!("{fname}() WITHIN GROUP with {} sort expressions is not supported in a pipeline", order.len()),
                    "An ordered-set aggregate of a pipeline orders one value, as percentile_cont, percentile_disc and mode do.",
                );
            }
            let by = order.get_ptr(0).expect("one sort expression");
            // SAFETY: a SortBy node of the parser.
            let (dir, nulls) = unsafe { ((*by).sortby_dir, (*by).sortby_nulls) };
            let mut written = String::new();
            match dir {
                pg_sys::SortByDir::SORTBY_DESC => written.push_str(" DESC"),
                pg_sys::SortByDir::SORTBY_USING => not_supported(
                    format!("{fname}() WITHIN GROUP (ORDER BY ... USING ...) is not supported in a pipeline"),
                    "Write the order as ASC or DESC.",
                ),
                _ => {}
            }
            match nulls {
                pg_sys::SortByNulls::SORTBY_NULLS_FIRST => written.push_str(" NULLS FIRST"),
                pg_sys::SortByNulls::SORTBY_NULLS_LAST => written.push_str(" NULLS LAST"),
                _ => {}
            }
            if let Some(k) = kept.as_mut() {
                k.order = written;
            }
        }
        let args = unsafe { PgList::<pg_sys::Node>::from_pg(call.args) };
        if call.agg_star && func != AggFunc::Count {
            syntax(
                text,
                call.location,
                format!("{fname}(*) is not an aggregate; only count(*) takes \"*\""),
                None,
            );
        }
        if call.agg_distinct && args.len() > 1 {
            not_supported(
                format!(
                    "{fname}(DISTINCT ...) of two or more arguments is not supported in a pipeline"
                ),
                "A pipeline keeps the distinct values of one argument: write the aggregate of one.",
            );
        }
        // Two or more arguments for any aggregate but the five (corr(y, x), regr_slope(y, x));
        // the arguments of an ordered-set aggregate are its direct arguments.
        let many = func == AggFunc::Generic && !within_group && args.len() > 1;
        if !call.agg_star && args.len() != 1 && !many && !within_group {
            syntax(
                text,
                call.location,
                format!(
                    "{fname}() takes one argument, a column or an expression of the source row"
                ),
                None,
            );
        }
        // An argument that is one unqualified column name is that column.
        let column = args.get_ptr(0).filter(|_| !many && !keeps).and_then(|a| {
            // SAFETY: a node read by its tag; a ColumnRef's fields are String or A_Star nodes.
            unsafe {
                if !is_a(a, pg_sys::NodeTag::T_ColumnRef) {
                    return None;
                }
                let fields =
                    PgList::<pg_sys::Node>::from_pg((*(a as *mut pg_sys::ColumnRef)).fields);
                let f = fields.get_ptr(0)?;
                (fields.len() == 1 && is_a(f, pg_sys::NodeTag::T_String)).then(|| str_value(f))
            }
        });
        if name.is_null() {
            syntax(
                text,
                location,
                format!("aggregate {fname}() has no name"),
                Some(format!(
                    "Name each aggregate, for example '{fname}(...) AS total'."
                )),
            );
        }
        // SAFETY: a NUL-terminated name from the parser.
        let alias = unsafe { CStr::from_ptr(name) }
            .to_string_lossy()
            .into_owned();
        needs_expr.push(
            !call.agg_filter.is_null() || (!call.agg_star && column.is_none()) || many || keeps,
        );
        specs.push(AggSpec {
            func,
            arg: column,
            alias,
            expr: None,
            function,
            kept,
        });
    }
    if specs.is_empty() {
        syntax(text, -1, one.into(), None);
    }
    Parsed {
        specs,
        needs_expr,
        raw,
        query,
        text: text.to_string(),
    }
}

/// The analysed expressions of a pipeline's aggregates: what its trigger comes to depend on.
pub struct Analysed {
    rtable: *mut pg_sys::List,
    nodes: Vec<*mut pg_sys::Node>,
    /// Per aggregate: the type of its expression argument (`None`: `count(*)`, or a column).
    pub expr_types: Vec<Option<pg_sys::Oid>>,
    /// Per aggregate: the aggregate function PostgreSQL resolved the call to.
    pub functions: Vec<pg_sys::Oid>,
    /// Per aggregate: the collation of its expression argument (as [`Self::expr_types`]).
    pub expr_collations: Vec<Option<pg_sys::Oid>>,
}

impl Parsed {
    /// Whether some aggregate needs an expression (and the analysis of [`Self::analyze`]).
    pub fn has_expressions(&self) -> bool {
        self.needs_expr.iter().any(|e| *e)
    }

    /// Resolves the list against source `source_oid` by PostgreSQL's parse analysis and sets
    /// [`AggSpec::expr`] of every aggregate with a `FILTER` or an expression argument. Run
    /// after the checks of the plain columns, whose errors name the pipeline's own terms.
    pub fn analyze(&mut self, source_oid: pg_sys::Oid) -> Analysed {
        let text = self.text.clone();
        // SAFETY: `raw` came from pg_parse_query of `query`, which lives as long as `self`.
        let query = read_by_postgres(&text, || unsafe {
            pg_sys::parse_analyze_fixedparams(
                self.raw,
                self.query.as_ptr(),
                std::ptr::null(),
                0,
                std::ptr::null_mut(),
            )
        });
        // SAFETY: parse analysis returns a Query.
        let q = unsafe { &*query };
        let rtable = unsafe { PgList::<pg_sys::RangeTblEntry>::from_pg(q.rtable) };
        let only_source = rtable.len() == 1
            && rtable
                .get_ptr(0)
                // SAFETY: a range table entry of the analysed query.
                .map(|r| unsafe { (*r).relid == source_oid && !(*r).inh })
                .unwrap_or(false);
        if !only_source {
            syntax(
                &text,
                -1,
                "the aggregate list must be a list of aggregates, and nothing after it".into(),
                None,
            );
        }
        if q.hasSubLinks {
            not_supported(
                "a subquery in the aggregate list is not supported".into(),
                "An aggregate's argument and FILTER are computed from the row alone: join what you need into the source table first.",
            );
        }
        if q.hasTargetSRFs || q.hasWindowFuncs {
            not_supported(
                "a function returning a set, or a window function, in the aggregate list is not supported".into(),
                "An aggregate's argument and FILTER are one value computed from the row alone.",
            );
        }
        let targets = unsafe { PgList::<pg_sys::TargetEntry>::from_pg(q.targetList) };
        let mut nodes = Vec::new();
        let mut expr_types = Vec::new();
        let mut functions = Vec::new();
        let mut expr_collations = Vec::new();
        let context = {
            let alias = CString::new(AggExpr::ROW).expect("no NUL");
            // SAFETY: a deparse context for the source relation under the alias.
            unsafe { pg_sys::deparse_context_for(alias.as_ptr(), source_oid) }
        };
        for (i, te) in targets.iter_ptr().enumerate() {
            // SAFETY: a target entry of the analysed query; its expression is a node.
            let expr = unsafe { (*te).expr as *mut pg_sys::Node };
            if !unsafe { is_a(expr, pg_sys::NodeTag::T_Aggref) } {
                syntax(
                    &text,
                    // SAFETY: any expression node has a location (or -1).
                    unsafe { pg_sys::exprLocation(expr) },
                    "each item of the aggregate list must be one aggregate call, such as sum(amount) AS total".into(),
                    None,
                );
            }
            // SAFETY: tagged T_Aggref.
            let agg = unsafe { &*(expr as *mut pg_sys::Aggref) };
            functions.push(agg.aggfnoid);
            let spec = &mut self.specs[i];
            if spec.func == AggFunc::Generic {
                // The trigger depends on the aggregate, as a view's rule does.
                nodes.push(expr);
            }
            if !self.needs_expr[i] {
                expr_types.push(None);
                expr_collations.push(None);
                continue;
            }
            let args = unsafe { PgList::<pg_sys::TargetEntry>::from_pg(agg.args) };
            // SAFETY: the arguments of an aggregate are target entries.
            let arg_nodes: Vec<*mut pg_sys::Node> = args
                .iter_ptr()
                .map(|te| unsafe { (*te).expr as *mut pg_sys::Node })
                .collect();
            let arg = arg_nodes.first().copied();
            let filter = agg.aggfilter as *mut pg_sys::Node;
            let mut columns: Vec<String> = Vec::new();
            let checked = arg_nodes
                .iter()
                .map(|n| ("argument", Some(*n)))
                .chain([("FILTER", Some(filter))]);
            for (what, node) in checked {
                let Some(node) = node.filter(|n| !n.is_null()) else {
                    continue;
                };
                // SAFETY: an analysed expression.
                if unsafe { pg_sys::contain_mutable_functions(node) } {
                    EtError::MutableAggregateExpression {
                        aggregate: spec.alias.clone(),
                        what,
                    }
                    .raise()
                }
                for c in used_columns(node, source_oid, &spec.alias) {
                    if !columns.contains(&c) {
                        columns.push(c);
                    }
                }
                nodes.push(node);
            }
            let deparse = |node: *mut pg_sys::Node| -> String {
                // SAFETY: an analysed expression over the one relation of `context`.
                unsafe {
                    CStr::from_ptr(pg_sys::deparse_expression(node, context, true, false))
                        .to_string_lossy()
                        .into_owned()
                }
            };
            let filtered = |value: String| {
                if filter.is_null() {
                    value
                } else {
                    format!("CASE WHEN ({}) THEN ({value}) END", deparse(filter))
                }
            };
            let value = match (arg, &spec.arg) {
                (_, Some(c)) => format!("{}.{}", AggExpr::ROW, quote_ident(c)),
                (Some(a), None) => deparse(a),
                (None, None) => "1".to_string(),
            };
            // Two or more arguments: the FILTER folded into the first, which a strict
            // transition function skips the row for; the row's state is made of them later,
            // from the aggregate's functions (`GenericAgg::row_state`).
            let many: Vec<String> = if arg_nodes.len() > 1 {
                arg_nodes
                    .iter()
                    .enumerate()
                    .map(|(j, n)| {
                        let d = deparse(*n);
                        if j == 0 {
                            filtered(d)
                        } else {
                            d
                        }
                    })
                    .collect()
            } else {
                Vec::new()
            };
            let sql = filtered(value);
            if let Some(c) = spec.arg.take() {
                if !columns.contains(&c) {
                    columns.push(c);
                }
            }
            // The direct arguments of an ordered-set aggregate: constants, computed once.
            if let Some(k) = spec.kept.as_mut() {
                // SAFETY: the direct arguments of an Aggref are expressions.
                let direct = unsafe { PgList::<pg_sys::Node>::from_pg(agg.aggdirectargs) };
                for d in direct.iter_ptr() {
                    // SAFETY: an analysed expression.
                    let reads_row = unsafe {
                        pg_sys::contain_var_clause(d) || pg_sys::contain_mutable_functions(d)
                    };
                    if reads_row {
                        not_supported(
                            format!(
                                "the direct argument of aggregate \"{}\" must be a constant",
                                spec.alias
                            ),
                            "Write the fraction of an ordered-set aggregate as a constant, such as percentile_cont(0.9) WITHIN GROUP (ORDER BY x).",
                        );
                    }
                    nodes.push(d);
                    k.direct.push(deparse(d));
                }
            }
            // SAFETY: an analysed expression.
            expr_types.push(arg.map(|a| unsafe { pg_sys::exprType(a) }));
            // SAFETY: an analysed expression.
            expr_collations.push(arg.map(|a| unsafe { pg_sys::exprCollation(a) }));
            spec.expr = Some(AggExpr {
                sql,
                columns,
                args: many,
                filtered: !filter.is_null(),
            });
        }
        Analysed {
            rtable: q.rtable,
            nodes,
            expr_types,
            functions,
            expr_collations,
        }
    }
}

/// The names of the source columns `node` reads; a whole-row or system column is refused.
fn used_columns(node: *mut pg_sys::Node, source_oid: pg_sys::Oid, aggregate: &str) -> Vec<String> {
    let mut set: *mut pg_sys::Bitmapset = std::ptr::null_mut();
    // SAFETY: collects the attribute numbers of the Vars of range table entry 1.
    unsafe { pg_sys::pull_varattnos(node, 1, &mut set) };
    let mut out = Vec::new();
    let mut m = -1;
    loop {
        // SAFETY: iterating a bitmapset built above.
        m = unsafe { pg_sys::bms_next_member(set, m) };
        if m < 0 {
            break;
        }
        let attnum = m + pg_sys::FirstLowInvalidHeapAttributeNumber;
        if attnum <= 0 {
            not_supported(
                format!(
                    "aggregate \"{aggregate}\" reads a whole row or a system column of the source"
                ),
                "An aggregate's argument and FILTER name the source's columns one by one.",
            );
        }
        // SAFETY: an attribute of the source, which exists (the analysis resolved it).
        let name = unsafe { pg_sys::get_attname(source_oid, attnum as i16, false) };
        out.push(
            unsafe { CStr::from_ptr(name) }
                .to_string_lossy()
                .into_owned(),
        );
    }
    out
}

impl Analysed {
    /// Makes `depender` (the pipeline's trigger) depend on the functions, operators, types,
    /// collations and columns the expressions use: PostgreSQL refuses to drop them while the
    /// pipeline exists (and `CASCADE` is refused by the extension's event trigger).
    pub fn record_dependencies(&self, depender: &pg_sys::ObjectAddress) {
        for node in &self.nodes {
            // SAFETY: analysed expressions over `rtable`, alive for the current statement.
            unsafe {
                pg_sys::recordDependencyOnExpr(
                    depender,
                    *node,
                    self.rtable,
                    pg_sys::DependencyType::DEPENDENCY_NORMAL,
                )
            };
        }
    }
}
