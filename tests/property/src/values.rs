//! Column values of generated events and the three ways they travel to the server: SQL literals
//! (multi-row INSERT), COPY text format and JSON (`eventtime.ingest`). Each encoding must carry
//! the same value, down to the scale of a numeric, or the checks would report it.

use chrono::{DateTime, NaiveDateTime};

pub const SECOND: i64 = 1_000_000;
pub const MINUTE: i64 = 60 * SECOND;
pub const HOUR: i64 = 60 * MINUTE;
pub const DAY: i64 = 24 * HOUR;

/// The watermark `'infinity'`, in the model's microseconds.
pub const INFINITY: i64 = i64::MAX;

#[derive(Clone, Debug, PartialEq)]
pub enum Val {
    Null,
    Text(String),
    Int(i64),
    /// A decimal literal exactly as written, so that its scale survives.
    Num(String),
    /// Microseconds since the Unix epoch, UTC.
    Ts(i64),
    Bool(bool),
}

impl Val {
    pub fn sql(&self) -> String {
        match self {
            Val::Null => "NULL".into(),
            Val::Text(s) => quote_literal(s),
            Val::Int(i) => i.to_string(),
            Val::Num(n) => format!("{n}::numeric"),
            Val::Ts(t) => format!("{}::timestamptz", quote_literal(&ts_text(*t))),
            Val::Bool(b) => b.to_string(),
        }
    }

    pub fn copy(&self) -> String {
        match self {
            Val::Null => "\\N".into(),
            Val::Text(s) => {
                let mut out = String::with_capacity(s.len());
                for c in s.chars() {
                    match c {
                        '\\' => out.push_str("\\\\"),
                        '\t' => out.push_str("\\t"),
                        '\n' => out.push_str("\\n"),
                        '\r' => out.push_str("\\r"),
                        c => out.push(c),
                    }
                }
                out
            }
            Val::Int(i) => i.to_string(),
            Val::Num(n) => n.clone(),
            Val::Ts(t) => ts_text(*t),
            Val::Bool(b) => if *b { "t" } else { "f" }.into(),
        }
    }

    pub fn json(&self) -> String {
        match self {
            Val::Null => "null".into(),
            Val::Text(s) => json_string(s),
            Val::Int(i) => i.to_string(),
            Val::Num(n) => n.clone(),
            Val::Ts(t) => json_string(&ts_text(*t)),
            Val::Bool(b) => b.to_string(),
        }
    }

    /// The value as PostgreSQL prints it with `::text`, for key columns and event ids.
    pub fn text(&self) -> Option<String> {
        match self {
            Val::Null => None,
            Val::Text(s) => Some(s.clone()),
            Val::Int(i) => Some(i.to_string()),
            Val::Num(n) => Some(n.clone()),
            Val::Ts(_) => panic!("timestamps are compared as microseconds, not as text"),
            Val::Bool(b) => Some(b.to_string()),
        }
    }
}

/// A timestamp as a literal the server parses the same in any session time zone.
pub fn ts_text(us: i64) -> String {
    if us == INFINITY {
        return "infinity".into();
    }
    let dt = DateTime::from_timestamp_micros(us).expect("timestamp within chrono's range");
    dt.format("%Y-%m-%d %H:%M:%S%.6f+00").to_string()
}

/// `ts_text`, or `NULL` for no timestamp (no watermark yet), for messages.
pub fn ts_or_null(us: Option<i64>) -> String {
    us.map(ts_text).unwrap_or_else(|| "NULL".into())
}

/// A timestamp the way the checks compare it: the text of the `us()` SQL function that the
/// test installs, microseconds since the Unix epoch or `infinity`.
pub fn ts_key(us: i64) -> String {
    if us == INFINITY {
        "infinity".into()
    } else {
        us.to_string()
    }
}

/// `"2026-10-29 18:02"`, read as UTC.
pub fn utc(s: &str) -> i64 {
    NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M")
        .unwrap_or_else(|e| panic!("bad timestamp constant {s:?}: {e}"))
        .and_utc()
        .timestamp_micros()
}

pub fn quote_ident(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

pub fn quote_literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `mantissa / 10^scale` written with exactly `scale` digits after the point, so `1250, 2` is
/// `12.50`: trailing zeros are kept on purpose, as they change numeric's text output.
pub fn decimal(mantissa: i64, scale: u32) -> String {
    if scale == 0 {
        return mantissa.to_string();
    }
    let p = 10i64.pow(scale);
    let sign = if mantissa < 0 { "-" } else { "" };
    let a = mantissa.abs();
    format!("{sign}{}.{:0width$}", a / p, a % p, width = scale as usize)
}

/// An exact decimal, for the sums of the lateness account (`refused_value`): a mantissa and a
/// scale, added exactly at the greater scale, as PostgreSQL adds numerics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dec {
    pub mantissa: i128,
    pub scale: u32,
}

impl Dec {
    /// The value of a generated numeric or integer column; `None` for NULL or another type.
    pub fn of(v: &Val) -> Option<Dec> {
        match v {
            Val::Int(i) => Some(Dec {
                mantissa: *i as i128,
                scale: 0,
            }),
            Val::Num(n) => Some(Dec::parse(n)),
            _ => None,
        }
    }

    pub fn parse(s: &str) -> Dec {
        let (neg, digits) = match s.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, s),
        };
        let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
        let m: i128 = format!("{int}{frac}")
            .parse()
            .unwrap_or_else(|_| panic!("not a decimal: {s:?}"));
        Dec {
            mantissa: if neg { -m } else { m },
            scale: frac.len() as u32,
        }
    }

    fn rescale(self, scale: u32) -> i128 {
        self.mantissa * 10i128.pow(scale - self.scale)
    }

    pub fn is_zero(self) -> bool {
        self.mantissa == 0
    }

    /// `self / other` as the nearest double, or near it: both mantissas are far below 2^53.
    pub fn ratio(self, other: Dec) -> f64 {
        let scale = self.scale.max(other.scale);
        self.rescale(scale) as f64 / other.rescale(scale) as f64
    }

    /// The value without trailing zeros after the point: numerics compared by value, not by
    /// the scale of their text.
    pub fn normalized(self) -> String {
        let mut d = self;
        while d.scale > 0 && d.mantissa % 10 == 0 {
            d.mantissa /= 10;
            d.scale -= 1;
        }
        let p = 10i128.pow(d.scale);
        let sign = if d.mantissa < 0 { "-" } else { "" };
        let a = d.mantissa.abs();
        if d.scale == 0 {
            format!("{sign}{a}")
        } else {
            format!(
                "{sign}{}.{:0width$}",
                a / p,
                a % p,
                width = d.scale as usize
            )
        }
    }
}

impl std::ops::Add for Dec {
    type Output = Dec;

    fn add(self, other: Dec) -> Dec {
        let scale = self.scale.max(other.scale);
        Dec {
            mantissa: self.rescale(scale) + other.rescale(scale),
            scale,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings() {
        assert_eq!(decimal(1250, 2), "12.50");
        assert_eq!(decimal(-5, 3), "-0.005");
        assert_eq!(decimal(-7, 0), "-7");
        assert_eq!(
            ts_text(utc("2026-10-29 18:02")),
            "2026-10-29 18:02:00.000000+00"
        );
        assert_eq!(ts_text(-1), "1969-12-31 23:59:59.999999+00");
        assert_eq!(Val::Text("a\tb\\N\n".into()).copy(), "a\\tb\\\\N\\n");
        assert_eq!(
            Val::Text("\"q\"\u{1}".into()).json(),
            "\"\\\"q\\\"\\u0001\""
        );
        assert_eq!(Val::Text("O'Brien".into()).sql(), "'O''Brien'");
    }

    #[test]
    fn decimals() {
        let a = Dec::parse("12.50");
        let b = Dec::parse("-0.005");
        assert_eq!(a + b, Dec::parse("12.495"));
        assert_eq!((a + Dec::parse("-12.5")).normalized(), "0");
        assert_eq!(Dec::parse("-3.10").normalized(), "-3.1");
        assert_eq!(Dec::parse("-0.050").normalized(), "-0.05");
        assert_eq!(Dec::of(&Val::Int(7)).unwrap().normalized(), "7");
        assert_eq!(Dec::parse("1").ratio(Dec::parse("4.0")), 0.25);
    }
}
