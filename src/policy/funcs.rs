//! CEL's operators and functions for the subset: arithmetic (checked), comparisons, `in`, `size`,
//! the string tests and the conversions.

use super::value::{cmp, equal, parse_double, show_double, EvalError, Val};
use std::borrow::Cow;
use std::cmp::Ordering;

type R<'a> = Result<Val<'a>, EvalError>;

fn err<T>(msg: impl Into<String>) -> Result<T, EvalError> {
    Err(EvalError(msg.into()))
}

fn no_overload<'a>(op: &str, args: &[&Val<'_>]) -> R<'a> {
    let types: Vec<&str> = args.iter().map(|a| a.type_name()).collect();
    err(format!("no such overload: {op}({})", types.join(", ")))
}

/// A binary operator on evaluated operands.
pub fn binary<'a>(op: &str, a: &Val<'a>, b: &Val<'a>) -> R<'a> {
    match op {
        "==" => Ok(Val::Bool(equal(a, b))),
        "!=" => Ok(Val::Bool(!equal(a, b))),
        "<" | "<=" | ">" | ">=" => {
            let Some(o) = cmp(a, b) else {
                // NaN is unordered: every comparison with it is false.
                let nan = |v: &Val<'_>| matches!(v, Val::Double(d) if d.is_nan());
                let numeric = |v: &Val<'_>| matches!(v, Val::Int(_) | Val::Uint(_) | Val::Double(_));
                if (nan(a) || nan(b)) && numeric(a) && numeric(b) {
                    return Ok(Val::Bool(false));
                }
                return no_overload(op, &[a, b]);
            };
            Ok(Val::Bool(match op {
                "<" => o == Ordering::Less,
                "<=" => o != Ordering::Greater,
                ">" => o == Ordering::Greater,
                _ => o != Ordering::Less,
            }))
        }
        "in" => {
            if let Some(list) = b.items() {
                return Ok(Val::Bool(list.iter().any(|x| equal(a, x))));
            }
            match b.entries() {
                Some(map) => Ok(Val::Bool(map.iter().any(|(k, _)| equal(a, k)))),
                None => no_overload("@in", &[a, b]),
            }
        }
        _ => arithmetic(op, a, b),
    }
}

fn arithmetic<'a>(op: &str, a: &Val<'a>, b: &Val<'a>) -> R<'a> {
    let overflow = || EvalError(format!("{} overflow", a.type_name()));
    // The same checked operations on CEL's int and uint.
    macro_rules! checked {
        ($x:expr, $y:expr, $wrap:path) => {
            match op {
                "+" => $x.checked_add($y),
                "-" => $x.checked_sub($y),
                "*" => $x.checked_mul($y),
                "/" | "%" if $y == 0 => return err(if op == "/" { "division by zero" } else { "modulus by zero" }),
                "/" => $x.checked_div($y),
                _ => $x.checked_rem($y),
            }
            .map($wrap)
            .ok_or_else(overflow)
        };
    }
    match (a, b) {
        (Val::Int(x), Val::Int(y)) => checked!(x, *y, Val::Int),
        (Val::Uint(x), Val::Uint(y)) => checked!(x, *y, Val::Uint),
        (Val::Double(x), Val::Double(y)) => match op {
            "+" => Ok(Val::Double(x + y)),
            "-" => Ok(Val::Double(x - y)),
            "*" => Ok(Val::Double(x * y)),
            "/" => Ok(Val::Double(x / y)),
            _ => no_overload(op, &[a, b]),
        },
        (Val::Str(x), Val::Str(y)) if op == "+" => Ok(Val::Str(Cow::Owned(format!("{x}{y}")))),
        _ => match (op, a.items(), b.items()) {
            ("+", Some(mut x), Some(y)) => {
                x.extend(y);
                Ok(Val::List(x))
            }
            _ => no_overload(op, &[a, b]),
        },
    }
}

/// A function of the table (`parse::FUNCTIONS`), its receiver first.
pub fn call<'a>(name: &str, args: Vec<Val<'a>>) -> R<'a> {
    match (name, args.as_slice()) {
        ("size", [v]) => size(v),
        ("startsWith", [Val::Str(s), Val::Str(p)]) => Ok(Val::Bool(s.starts_with(p.as_ref()))),
        ("endsWith", [Val::Str(s), Val::Str(p)]) => Ok(Val::Bool(s.ends_with(p.as_ref()))),
        ("contains", [Val::Str(s), Val::Str(p)]) => Ok(Val::Bool(s.contains(p.as_ref()))),
        ("int", [v]) => to_int(v),
        ("uint", [v]) => to_uint(v),
        ("double", [v]) => to_double(v),
        ("string", [v]) => to_string(v),
        ("bool", [Val::Bool(b)]) => Ok(Val::Bool(*b)),
        ("bool", [Val::Str(s)]) => match s.as_ref() {
            "1" | "t" | "true" | "TRUE" | "True" => Ok(Val::Bool(true)),
            "0" | "f" | "false" | "FALSE" | "False" => Ok(Val::Bool(false)),
            _ => err("type conversion error from string to bool"),
        },
        _ => no_overload(name, &args.iter().collect::<Vec<_>>()),
    }
}

fn size<'a>(v: &Val<'a>) -> R<'a> {
    let n = match v {
        Val::Str(s) => s.chars().count(),
        v if v.is_map() => v.entries().map_or(0, |e| e.len()),
        v => match v.items() {
            Some(l) => l.len(),
            None => return no_overload("size", &[v]),
        },
    };
    Ok(Val::Int(n as i64))
}

fn range_err<'a>() -> R<'a> {
    err("range error")
}

fn to_int<'a>(v: &Val<'a>) -> R<'a> {
    match v {
        Val::Int(i) => Ok(Val::Int(*i)),
        Val::Uint(u) => i64::try_from(*u).map(Val::Int).or_else(|_| range_err()),
        // Doubles outside (-2^63, 2^63) have no int; truncated toward zero inside.
        Val::Double(d) if d.is_finite() && *d > -9.223372036854776e18 && *d < 9.223372036854776e18 => {
            Ok(Val::Int(*d as i64))
        }
        Val::Double(_) => range_err(),
        Val::Str(s) => s.parse::<i64>().map(Val::Int).or_else(|_| err("cannot convert the string to int")),
        v => no_overload("int", &[v]),
    }
}

fn to_uint<'a>(v: &Val<'a>) -> R<'a> {
    match v {
        Val::Uint(u) => Ok(Val::Uint(*u)),
        Val::Int(i) => u64::try_from(*i).map(Val::Uint).or_else(|_| range_err()),
        Val::Double(d) if d.is_finite() && *d > -1.0 && *d < 1.8446744073709552e19 => Ok(Val::Uint(*d as u64)),
        Val::Double(_) => range_err(),
        Val::Str(s) => s.parse::<u64>().map(Val::Uint).or_else(|_| err("cannot convert the string to uint")),
        v => no_overload("uint", &[v]),
    }
}

fn to_double<'a>(v: &Val<'a>) -> R<'a> {
    match v {
        Val::Double(d) => Ok(Val::Double(*d)),
        Val::Int(i) => Ok(Val::Double(*i as f64)),
        Val::Uint(u) => Ok(Val::Double(*u as f64)),
        Val::Str(s) => parse_double(s).map(Val::Double).map_or_else(|| err("cannot convert the string to double"), Ok),
        v => no_overload("double", &[v]),
    }
}

fn to_string<'a>(v: &Val<'a>) -> R<'a> {
    let s = match v {
        Val::Str(s) => return Ok(Val::Str(s.clone())),
        Val::Int(i) => i.to_string(),
        Val::Uint(u) => u.to_string(),
        Val::Double(d) => show_double(*d),
        Val::Bool(b) => b.to_string(),
        v => return no_overload("string", &[v]),
    };
    Ok(Val::Str(Cow::Owned(s)))
}
