//! Accumulators of the built-in aggregates over PostgreSQL datums, computed with the functions of
//! their types: the value cast to the accumulator type (`pg_cast`), then added with the type's
//! `+` (sum, avg) or compared with its btree comparison (min, max) in the argument's collation.
//! These are the functions the SQL of the window state applies to a statement's partials (one
//! row's partial is its value cast to the accumulator type, and partials meet by `+`, `LEAST`,
//! `GREATEST`; see `core::aggregates`), so a group summed here holds what `sum()` over its rows
//! holds, digit for digit, in the order of the rows.

use pgrx::pg_sys;

use crate::core::aggregates::{AggFunc, ResolvedAgg};
use crate::pg::security::as_catalog_owner;

/// A function the backend keeps: its call information lives for the backend's life.
pub struct Fn {
    info: Box<pg_sys::FmgrInfo>,
}

impl Fn {
    /// The function `oid`.
    pub fn new(oid: pg_sys::Oid) -> Fn {
        // SAFETY: a zeroed FmgrInfo is filled by fmgr_info_cxt, in a context that lives as long
        // as the backend (what the function keeps in `fn_extra`).
        unsafe {
            let mut info: Box<pg_sys::FmgrInfo> = Box::new(std::mem::zeroed());
            pg_sys::fmgr_info_cxt(oid, info.as_mut(), pg_sys::TopMemoryContext);
            Fn { info }
        }
    }

    /// The function applied to one argument.
    ///
    /// # Safety
    /// `a` is a datum of the function's argument type.
    pub unsafe fn call1(&self, collation: pg_sys::Oid, a: pg_sys::Datum) -> pg_sys::Datum {
        // SAFETY: as the caller promises; the info was filled by fmgr_info_cxt.
        unsafe {
            pg_sys::FunctionCall1Coll(
                &*self.info as *const _ as *mut pg_sys::FmgrInfo,
                collation,
                a,
            )
        }
    }

    /// The function applied to two arguments.
    ///
    /// # Safety
    /// `a` and `b` are datums of the function's argument types.
    pub unsafe fn call2(
        &self,
        collation: pg_sys::Oid,
        a: pg_sys::Datum,
        b: pg_sys::Datum,
    ) -> pg_sys::Datum {
        // SAFETY: as the caller promises.
        unsafe {
            pg_sys::FunctionCall2Coll(
                &*self.info as *const _ as *mut pg_sys::FmgrInfo,
                collation,
                a,
                b,
            )
        }
    }
}

/// How a type's values are stored, for copies and arrays.
#[derive(Clone, Copy)]
pub struct Storage {
    pub oid: pg_sys::Oid,
    pub len: i16,
    pub byval: bool,
    pub align: std::ffi::c_char,
}

impl Storage {
    pub fn of(oid: pg_sys::Oid) -> Storage {
        let (mut len, mut byval, mut align) = (0i16, false, 0 as std::ffi::c_char);
        // SAFETY: a syscache lookup of an existing type.
        unsafe { pg_sys::get_typlenbyvalalign(oid, &mut len, &mut byval, &mut align) };
        Storage {
            oid,
            len,
            byval,
            align,
        }
    }

    /// `d` copied into the current memory context (itself, for a type passed by value).
    ///
    /// # Safety
    /// `d` is a datum of this type.
    pub unsafe fn copy(&self, d: pg_sys::Datum) -> pg_sys::Datum {
        if self.byval {
            return d;
        }
        // SAFETY: as the caller promises: a value of a type passed by reference (a varlena, a C
        // string, or `len` bytes), copied whole; a varlena that points elsewhere (toasted, or an
        // expanded object) is copied flat.
        unsafe {
            let src = d.cast_mut_ptr::<u8>();
            if self.len == -1 && *src == 0x01 {
                return pg_sys::Datum::from(pg_sys::pg_detoast_datum_copy(
                    src as *mut pg_sys::varlena,
                ));
            }
            let size = match self.len {
                -1 => pgrx::varlena::varsize_any(src as *const pg_sys::varlena),
                -2 => {
                    std::ffi::CStr::from_ptr(src as *const std::ffi::c_char)
                        .to_bytes()
                        .len()
                        + 1
                }
                n => n as usize,
            };
            let dst = pg_sys::palloc(size) as *mut u8;
            std::ptr::copy_nonoverlapping(src, dst, size);
            pg_sys::Datum::from(dst)
        }
    }

    /// Frees a copy made by [`Self::copy`].
    ///
    /// # Safety
    /// `d` was copied by [`Self::copy`] and is not used again.
    pub unsafe fn free(&self, d: pg_sys::Datum) {
        if !self.byval {
            // SAFETY: as the caller promises: a palloc'd copy.
            unsafe { pg_sys::pfree(d.cast_mut_ptr()) };
        }
    }
}

enum Op {
    CountStar,
    Count,
    /// Sum and avg: the accumulator type's `+`.
    Add(Fn),
    /// Min and max: the btree comparison of the type, and whether the least is kept.
    Compare(Fn, bool),
}

/// One aggregate of a pipeline as the engine computes it.
pub struct Accumulator {
    op: Op,
    /// Index of the argument among the columns the front reads (none for `count(*)`).
    pub arg: Option<usize>,
    /// The cast from the argument's type to the accumulator's, unless they are one.
    cast: Option<Fn>,
    collation: pg_sys::Oid,
    pub storage: Storage,
    avg: bool,
}

/// The state of one accumulator in one group.
pub enum State {
    Count(i64),
    /// A sum, least or greatest value so far (NULL before the first non-NULL value), and for
    /// `avg` the number of values.
    Value(Option<pg_sys::Datum>, i64),
}

impl Accumulator {
    /// The accumulator of `agg`, whose argument is front column `arg` of type `arg_type` and
    /// collation `collation`; `None` when the engine cannot compute it (then the statement goes
    /// to the SQL path, which can).
    pub fn resolve(
        agg: &ResolvedAgg,
        arg: Option<usize>,
        arg_type: pg_sys::Oid,
        collation: pg_sys::Oid,
    ) -> Option<Accumulator> {
        let acc: pg_sys::Oid = as_catalog_owner(|| {
            crate::pg::spi::read_one::<pg_sys::Oid>(
                "SELECT pg_catalog.to_regtype($1)::pg_catalog.oid",
                &[agg.acc_type.as_str().into()],
            )
        })
        .ok()
        .flatten()?;
        let storage = Storage::of(acc);
        let op = match agg.spec.func {
            AggFunc::Generic => return None,
            AggFunc::Count if arg.is_none() => Op::CountStar,
            AggFunc::Count => Op::Count,
            AggFunc::Sum | AggFunc::Avg => {
                let plus: pg_sys::Oid = as_catalog_owner(|| {
                    crate::pg::spi::read_one::<pg_sys::Oid>(
                        "SELECT o.oprcode::pg_catalog.oid FROM pg_catalog.pg_operator o \
                         WHERE o.oprname = '+' AND o.oprleft = $1 AND o.oprright = $1 AND o.oprresult = $1 \
                           AND o.oprnamespace = 'pg_catalog'::pg_catalog.regnamespace",
                        &[acc.into()],
                    )
                })
                .ok()
                .flatten()?;
                Op::Add(Fn::new(plus))
            }
            AggFunc::Min | AggFunc::Max => {
                // SAFETY: a type cache lookup of an existing type.
                let cmp = unsafe {
                    let t = pg_sys::lookup_type_cache(acc, pg_sys::TYPECACHE_CMP_PROC as i32);
                    (*t).cmp_proc
                };
                if cmp == pg_sys::InvalidOid {
                    return None;
                }
                Op::Compare(Fn::new(cmp), agg.spec.func == AggFunc::Min)
            }
        };
        let cast = match (&op, arg) {
            (Op::CountStar | Op::Count, _) | (_, None) => None,
            _ if arg_type == acc => None,
            _ => {
                let (func, method): (Option<pg_sys::Oid>, Option<i8>) = as_catalog_owner(|| {
                    crate::pg::spi::read_two::<pg_sys::Oid, i8>(
                        "SELECT c.castfunc, c.castmethod::\"char\" FROM pg_catalog.pg_cast c \
                         WHERE c.castsource = $1 AND c.casttarget = $2 \
                           AND (c.castfunc = 0 OR (SELECT f.pronargs FROM pg_catalog.pg_proc f WHERE f.oid = c.castfunc) = 1)",
                        &[arg_type.into(), acc.into()],
                    )
                })
                .ok()?;
                match (func, method.map(|m| m as u8)) {
                    (Some(f), Some(b'f')) if f != pg_sys::InvalidOid => Some(Fn::new(f)),
                    // Binary coercible: the value is the accumulator's as it is.
                    (_, Some(b'b')) => None,
                    _ => return None,
                }
            }
        };
        Some(Accumulator {
            op,
            arg,
            cast,
            collation,
            storage,
            avg: agg.avg_kind.is_some(),
        })
    }

    /// The state of a group without rows.
    pub fn start(&self) -> State {
        match self.op {
            Op::CountStar | Op::Count => State::Count(0),
            _ => State::Value(None, 0),
        }
    }

    /// Adds a row's argument (`value`, `None` for NULL) to `state`. Copies the new value into
    /// `group_cx`, where the state lives, and frees the one it replaces.
    ///
    /// # Safety
    /// `value` is a datum of the argument's type; `group_cx` is the context of `state`'s values.
    pub unsafe fn add(
        &self,
        state: &mut State,
        value: Option<pg_sys::Datum>,
        group_cx: pg_sys::MemoryContext,
    ) {
        match (&self.op, state) {
            (Op::CountStar, State::Count(n)) => *n += 1,
            (Op::Count, State::Count(n)) => *n += value.is_some() as i64,
            (op, State::Value(acc, n)) => {
                let Some(v) = value else { return };
                // SAFETY: `v` is of the argument type, the cast takes it to the accumulator's,
                // whose `+` and comparison take two of them.
                unsafe {
                    let v = match &self.cast {
                        Some(c) => c.call1(pg_sys::InvalidOid, v),
                        None => v,
                    };
                    *n += 1;
                    let next = match (op, *acc) {
                        (_, None) => Some(v),
                        (Op::Add(plus), Some(a)) => Some(plus.call2(self.collation, a, v)),
                        // As the aggregates' own transition functions (`numeric_smaller`,
                        // `text_larger`, ...): of two equal values, the later one.
                        (Op::Compare(cmp, least), Some(a)) => {
                            let c = cmp.call2(self.collation, v, a).value() as i32;
                            (if *least { c <= 0 } else { c >= 0 }).then_some(v)
                        }
                        _ => None,
                    };
                    if let Some(next) = next {
                        let old = pg_sys::MemoryContextSwitchTo(group_cx);
                        let copied = self.storage.copy(next);
                        pg_sys::MemoryContextSwitchTo(old);
                        if let Some(a) = acc.replace(copied) {
                            self.storage.free(a);
                        }
                    }
                }
            }
            _ => unreachable!("an accumulator's state is of its kind"),
        }
    }

    /// The state columns of `state`, as (datum, is NULL), in the order of the state table: the
    /// accumulator, and for `avg` the count beside it.
    pub fn columns(&self, state: &State) -> Vec<(pg_sys::Datum, bool)> {
        match state {
            State::Count(n) => vec![(pg_sys::Datum::from(*n), false)],
            State::Value(acc, n) => {
                let mut out = vec![match acc {
                    Some(a) => (*a, false),
                    None => (pg_sys::Datum::from(0), true),
                }];
                if self.avg {
                    out.push((pg_sys::Datum::from(*n), false));
                }
                out
            }
        }
    }

    /// The types of [`Self::columns`].
    pub fn column_storage(&self) -> Vec<Storage> {
        match self.op {
            Op::CountStar | Op::Count => vec![Storage::of(pg_sys::INT8OID)],
            _ if self.avg => vec![self.storage, Storage::of(pg_sys::INT8OID)],
            _ => vec![self.storage],
        }
    }
}
