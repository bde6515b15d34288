//! Evaluation of bound expressions on rows, with SQL's three-valued logic:
//! a comparison with NULL is NULL, `AND`/`OR` follow Kleene's tables, and a
//! WHERE keeps a row only when its predicate is TRUE.
//!
//! Invariant: evaluation never panics on a well-typed expression. What SQL
//! would raise at runtime (division by zero, overflow, a text that does not
//! cast) yields NULL, as in SQLite, so that one bad row cannot stop a view.
use std::cmp::Ordering;

use crate::function;
use crate::plan::{BinaryOp, Expr, Function};
use crate::time;
use crate::value::{DECIMAL_ONE, Type, Value, cast, round_decimal};

pub(crate) fn eval(expr: &Expr, row: &[Value]) -> Value {
    match expr {
        Expr::Column(i) => row[*i].clone(),
        Expr::Literal(v) => v.clone(),
        Expr::Not(e) => match eval(e, row) {
            Value::Bool(b) => Value::Bool(!b),
            _ => Value::Null,
        },
        Expr::Negate(e) => match eval(e, row) {
            Value::Int(i) => i.checked_neg().map_or(Value::Null, Value::Int),
            Value::Double(d) => Value::double(-d.0),
            Value::Decimal(d) => Value::Decimal((-d.get()).into()),
            Value::Interval(i) => Value::Interval(-i),
            _ => Value::Null,
        },
        Expr::Binary(BinaryOp::And, l, r) => match eval(l, row) {
            Value::Bool(false) => Value::Bool(false),
            left => match (left, eval(r, row)) {
                (_, Value::Bool(false)) => Value::Bool(false),
                (Value::Bool(true), Value::Bool(true)) => Value::Bool(true),
                _ => Value::Null,
            },
        },
        Expr::Binary(BinaryOp::Or, l, r) => match eval(l, row) {
            Value::Bool(true) => Value::Bool(true),
            left => match (left, eval(r, row)) {
                (_, Value::Bool(true)) => Value::Bool(true),
                (Value::Bool(false), Value::Bool(false)) => Value::Bool(false),
                _ => Value::Null,
            },
        },
        Expr::Binary(op, l, r) => binary(*op, eval(l, row), eval(r, row)),
        Expr::IsNull(e) => Value::Bool(eval(e, row).is_null()),
        Expr::Case(whens, otherwise) => {
            for (condition, result) in whens {
                if eval(condition, row) == Value::Bool(true) {
                    return eval(result, row);
                }
            }
            eval(otherwise, row)
        }
        Expr::Cast(e, to) => cast(&eval(e, row), *to).unwrap_or(Value::Null),
        Expr::Call(function, args) => call(*function, args, row),
        Expr::InList { expr, list } => {
            let value = eval(expr, row);
            if value.is_null() {
                return Value::Null;
            }
            let mut saw_null = false;
            for item in list {
                match compare(&value, &eval(item, row)) {
                    Some(Ordering::Equal) => return Value::Bool(true),
                    None => saw_null = true,
                    Some(_) => {}
                }
            }
            if saw_null { Value::Null } else { Value::Bool(false) }
        }
        Expr::Like { expr, pattern, case_insensitive } => match (eval(expr, row), eval(pattern, row)) {
            (Value::Text(text), Value::Text(pattern)) => {
                if *case_insensitive {
                    Value::Bool(like(&text.to_lowercase(), &pattern.to_lowercase()))
                } else {
                    Value::Bool(like(&text, &pattern))
                }
            }
            _ => Value::Null,
        },
        Expr::Subquery { .. } | Expr::Outer { .. } => {
            // The interpreter puts values in their place before evaluating.
            debug_assert!(false, "a subquery or outer reference reached eval: {expr:?}");
            Value::Null
        }
    }
}

/// Whether a predicate holds (TRUE, not FALSE or NULL).
pub(crate) fn holds(predicate: &Expr, row: &[Value]) -> bool {
    eval(predicate, row) == Value::Bool(true)
}

/// SQL comparison of two values of one (bound) type: `None` when either is NULL.
pub(crate) fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Null, _) | (_, Value::Null) => None,
        (Value::Int(x), Value::Double(y)) => (*x as f64).partial_cmp(&y.0),
        (Value::Double(x), Value::Int(y)) => x.0.partial_cmp(&(*y as f64)),
        (Value::Double(x), Value::Double(y)) => x.0.partial_cmp(&y.0),
        (Value::Int(_) | Value::Decimal(_), Value::Int(_) | Value::Decimal(_)) => {
            Some(a.as_decimal_units()?.cmp(&b.as_decimal_units()?))
        }
        (Value::Decimal(_), Value::Double(_)) | (Value::Double(_), Value::Decimal(_)) => {
            a.as_f64()?.partial_cmp(&b.as_f64()?)
        }
        (Value::Timestamp(x), Value::Date(d)) => Some(x.cmp(&(*d as i64 * time::MICROS_PER_DAY))),
        (Value::Date(d), Value::Timestamp(x)) => Some((*d as i64 * time::MICROS_PER_DAY).cmp(x)),
        _ => Some(a.cmp(b)),
    }
}

fn binary(op: BinaryOp, a: Value, b: Value) -> Value {
    use BinaryOp::*;
    if op == NotDistinct {
        return Value::Bool(match (&a, &b) {
            (Value::Null, Value::Null) => true,
            (Value::Null, _) | (_, Value::Null) => false,
            _ => compare(&a, &b) == Some(Ordering::Equal),
        });
    }
    if a.is_null() || b.is_null() {
        return Value::Null;
    }
    let ordering = |f: fn(Ordering) -> bool| compare(&a, &b).map_or(Value::Null, |o| Value::Bool(f(o)));
    match op {
        Eq => ordering(|o| o == Ordering::Equal),
        NotEq => ordering(|o| o != Ordering::Equal),
        Lt => ordering(|o| o == Ordering::Less),
        LtEq => ordering(|o| o != Ordering::Greater),
        Gt => ordering(|o| o == Ordering::Greater),
        GtEq => ordering(|o| o != Ordering::Less),
        Concat => Value::Text(format!("{a}{b}").into()),
        Add | Subtract | Multiply | Divide | Modulo => arithmetic(op, &a, &b).unwrap_or(Value::Null),
        And | Or | NotDistinct => unreachable!("handled above"),
    }
}

fn arithmetic(op: BinaryOp, a: &Value, b: &Value) -> Option<Value> {
    use BinaryOp::*;
    use Value as V;
    Some(match (a, b) {
        (V::Int(x), V::Int(y)) => V::Int(match op {
            Add => x.checked_add(*y)?,
            Subtract => x.checked_sub(*y)?,
            Multiply => x.checked_mul(*y)?,
            Divide => x.checked_div(*y)?,
            Modulo => x.checked_rem(*y)?,
            _ => return None,
        }),
        (V::Double(_), _) | (_, V::Double(_)) if a.as_f64().is_some() && b.as_f64().is_some() => {
            let (x, y) = (a.as_f64()?, b.as_f64()?);
            if matches!(op, Divide | Modulo) && y == 0.0 {
                return None;
            }
            V::double(match op {
                Add => x + y,
                Subtract => x - y,
                Multiply => x * y,
                Divide => x / y,
                Modulo => x % y,
                _ => return None,
            })
        }
        (V::Decimal(_) | V::Int(_), V::Decimal(_) | V::Int(_)) => {
            let (x, y) = (a.as_decimal_units()?, b.as_decimal_units()?);
            let units = match op {
                Add => x.checked_add(y)?,
                Subtract => x.checked_sub(y)?,
                Multiply => round_decimal_division(x.checked_mul(y)?, DECIMAL_ONE)?,
                Divide => round_decimal_division(x.checked_mul(DECIMAL_ONE)?, y)?,
                Modulo => x.checked_rem(y)?,
                _ => return None,
            };
            V::Decimal(units.into())
        }
        (V::Timestamp(t), V::Interval(i)) => V::Timestamp(match op {
            Add => t.checked_add(*i)?,
            Subtract => t.checked_sub(*i)?,
            _ => return None,
        }),
        (V::Interval(i), V::Timestamp(t)) if op == Add => V::Timestamp(t.checked_add(*i)?),
        (V::Timestamp(x), V::Timestamp(y)) if op == Subtract => V::Interval(x.checked_sub(*y)?),
        (V::Date(d), V::Int(n)) => V::Date(match op {
            Add => d.checked_add(i32::try_from(*n).ok()?)?,
            Subtract => d.checked_sub(i32::try_from(*n).ok()?)?,
            _ => return None,
        }),
        (V::Date(x), V::Date(y)) if op == Subtract => V::Int(*x as i64 - *y as i64),
        (V::Date(d), V::Interval(i)) => {
            let t = *d as i64 * time::MICROS_PER_DAY;
            V::Timestamp(match op {
                Add => t.checked_add(*i)?,
                Subtract => t.checked_sub(*i)?,
                _ => return None,
            })
        }
        (V::Interval(x), V::Interval(y)) => V::Interval(match op {
            Add => x.checked_add(*y)?,
            Subtract => x.checked_sub(*y)?,
            _ => return None,
        }),
        (V::Interval(i), n) | (n, V::Interval(i)) if op == Multiply => {
            let product = *i as f64 * n.as_f64()?;
            (product.is_finite() && product.abs() < 9.2e18).then_some(V::Interval(product.round() as i64))?
        }
        (V::Interval(i), n) if op == Divide => {
            let n = n.as_f64()?;
            if n == 0.0 {
                return None;
            }
            V::Interval((*i as f64 / n).round() as i64)
        }
        _ => return None,
    })
}

/// `numerator / denominator`, rounded half away from zero.
pub(crate) fn round_decimal_division(numerator: i128, denominator: i128) -> Option<i128> {
    if denominator == 0 {
        return None;
    }
    let quotient = numerator / denominator;
    let remainder = numerator % denominator;
    let round_up = remainder.checked_abs()?.checked_mul(2)? >= denominator.checked_abs()?;
    Some(if round_up { quotient + numerator.signum() * denominator.signum() } else { quotient })
}

fn text(value: &Value) -> Option<String> {
    match value {
        Value::Null => None,
        Value::Text(s) => Some(s.to_string()),
        other => Some(other.to_string()),
    }
}

fn call(function: Function, args: &[Expr], row: &[Value]) -> Value {
    use Function::*;
    if function == Coalesce {
        return args.iter().map(|a| eval(a, row)).find(|v| !v.is_null()).unwrap_or(Value::Null);
    }
    let values: Vec<Value> = args.iter().map(|a| eval(a, row)).collect();
    if matches!(function, Greatest | Least) {
        let present = values.into_iter().filter(|v| !v.is_null());
        let pick = |a: Value, b: Value| {
            let a_wins = match compare(&a, &b) {
                Some(Ordering::Greater) => function == Greatest,
                Some(Ordering::Less) => function == Least,
                _ => true,
            };
            if a_wins { a } else { b }
        };
        return present.reduce(pick).unwrap_or(Value::Null);
    }
    if function == NullIf {
        return match compare(&values[0], &values[1]) {
            Some(Ordering::Equal) => Value::Null,
            _ => values[0].clone(),
        };
    }
    if function == Concat {
        // CONCAT skips NULLs (unlike ||).
        return Value::Text(values.iter().filter_map(text).collect());
    }
    if function == FormatType {
        // Not strict in its type modifier: format_type(oid, NULL) is the bare name.
        return match &values[0] {
            Value::Int(oid) => {
                let typmod = match values.get(1) {
                    Some(Value::Int(m)) => Some(*m),
                    _ => None,
                };
                Value::Text(crate::system::format_type(*oid, typmod).into())
            }
            _ => Value::Null,
        };
    }
    if function == ArrayCat {
        if values.iter().all(Value::is_null) {
            return Value::Null;
        }
        let mut elements = Vec::new();
        for value in values.iter().filter(|v| !v.is_null()) {
            let Some(more) = text(value).as_deref().and_then(array_elements) else { return Value::Null };
            elements.extend(more);
        }
        return Value::Text(array_text(elements.iter().map(Option::as_deref)).into());
    }
    if function == ArrayAggElement {
        let element = match &values[0] {
            Value::Null => None,
            Value::Bool(b) => Some(if *b { "t".to_owned() } else { "f".to_owned() }),
            other => Some(other.to_string()),
        };
        return Value::Text(array_element(element.as_deref()).into());
    }
    if function == OrderedValue {
        return crate::sort_key::ordered_value(&values);
    }
    if function == TupleKey {
        return crate::sort_key::tuple_text(&values);
    }
    if values.iter().take(2).any(Value::is_null) || (function != ArrayToString && values.iter().any(Value::is_null)) {
        return Value::Null;
    }
    call_strict(function, &values).unwrap_or(Value::Null)
}

/// Functions that return NULL when any argument is NULL.
fn call_strict(function: Function, values: &[Value]) -> Option<Value> {
    use Function::*;
    let text_arg = |i: usize| text(&values[i]);
    let int_arg = |i: usize| match &values[i] {
        Value::Int(n) => Some(*n),
        other => cast(other, Type::Int).and_then(|v| if let Value::Int(n) = v { Some(n) } else { None }),
    };
    Some(match function {
        Lower => Value::Text(text_arg(0)?.to_lowercase().into()),
        Upper => Value::Text(text_arg(0)?.to_uppercase().into()),
        Length => Value::Int(text_arg(0)?.chars().count() as i64),
        Substring => {
            let s: Vec<char> = text_arg(0)?.chars().collect();
            // SQL positions are 1-based; a start before 1 eats into the length.
            let start = int_arg(1)?;
            let end = match values.get(2) {
                Some(_) => start.checked_add(int_arg(2)?.max(0))?,
                None => i64::MAX,
            };
            let from = (start.max(1) - 1).min(s.len() as i64) as usize;
            let to = (end.max(1) - 1).min(s.len() as i64).max(from as i64) as usize;
            Value::Text(s[from..to].iter().collect())
        }
        Trim | LTrim | RTrim => {
            let s = text_arg(0)?;
            let chars: Vec<char> = match values.get(1) {
                Some(_) => text_arg(1)?.chars().collect(),
                None => vec![' '],
            };
            let matches = |c: char| chars.contains(&c);
            Value::Text(match function {
                Trim => s.trim_matches(matches).into(),
                LTrim => s.trim_start_matches(matches).into(),
                _ => s.trim_end_matches(matches).into(),
            })
        }
        Replace => {
            // Replacing '' changes nothing (as PostgreSQL and SQLite; str::replace would insert everywhere).
            let (s, from) = (text_arg(0)?, text_arg(1)?);
            Value::Text(if from.is_empty() { s } else { s.replace(&from, &text_arg(2)?) }.into())
        }
        Position => {
            // position(needle IN haystack): args are (needle, haystack).
            let (needle, haystack) = (text_arg(0)?, text_arg(1)?);
            Value::Int(haystack.find(&needle).map_or(0, |byte| haystack[..byte].chars().count() as i64 + 1))
        }
        SplitPart => {
            let (s, delimiter, n) = (text_arg(0)?, text_arg(1)?, int_arg(2)?);
            if n < 1 {
                return None;
            }
            let part = if delimiter.is_empty() {
                (n == 1).then_some(s.as_str())
            } else {
                s.split(delimiter.as_str()).nth(n as usize - 1)
            };
            Value::Text(part.unwrap_or("").into())
        }
        Abs => match &values[0] {
            Value::Int(i) => Value::Int(i.checked_abs()?),
            Value::Double(d) => Value::double(d.0.abs()),
            Value::Decimal(d) => Value::Decimal(d.get().abs().into()),
            Value::Interval(i) => Value::Interval(i.checked_abs()?),
            _ => return None,
        },
        Round | Floor | Ceil | Trunc => {
            let digits = match values.get(1) {
                Some(_) => int_arg(1)?.clamp(-18, 6),
                None => 0,
            };
            match &values[0] {
                Value::Int(i) if digits >= 0 => Value::Int(*i),
                Value::Int(_) | Value::Decimal(_) => {
                    let units = values[0].as_decimal_units()?;
                    let step = 10i128.checked_pow((6 - digits) as u32)?;
                    let floor = units.div_euclid(step) * step;
                    let rounded = match function {
                        Floor => floor,
                        Trunc => units / step * step,
                        Ceil if floor == units => floor,
                        Ceil => floor + step,
                        _ if digits >= 0 => round_decimal(units, digits as u8),
                        _ => round_decimal_division(units, step)? * step,
                    };
                    if matches!(values[0], Value::Int(_)) {
                        Value::Int(i64::try_from(rounded / DECIMAL_ONE).ok()?)
                    } else {
                        Value::Decimal(rounded.into())
                    }
                }
                Value::Double(d) => {
                    let scale = 10f64.powi(digits as i32);
                    let x = d.0 * scale;
                    Value::double(
                        match function {
                            Floor => x.floor(),
                            Trunc => x.trunc(),
                            Ceil => x.ceil(),
                            _ => x.round(),
                        } / scale,
                    )
                }
                _ => return None,
            }
        }
        DateTrunc => {
            let unit = text_arg(0)?;
            match &values[1] {
                Value::Timestamp(t) => Value::Timestamp(time::trunc_timestamp(&unit, *t)?),
                Value::Date(d) => Value::Timestamp(time::trunc_timestamp(&unit, *d as i64 * time::MICROS_PER_DAY)?),
                _ => return None,
            }
        }
        Extract => {
            let field = text_arg(0)?;
            let micros = match &values[1] {
                Value::Timestamp(t) => *t,
                Value::Date(d) => *d as i64 * time::MICROS_PER_DAY,
                Value::Interval(i) if field.eq_ignore_ascii_case("epoch") => *i,
                _ => return None,
            };
            let x = time::extract(&field, micros)?;
            if x.fract() == 0.0 && !field.eq_ignore_ascii_case("second") && !field.eq_ignore_ascii_case("epoch") {
                Value::Int(x as i64)
            } else {
                Value::double(x)
            }
        }
        RegexMatch | RegexIMatch => Value::Bool(regex_match(&text_arg(0)?, &text_arg(1)?, function == RegexIMatch)?),
        ArrayToString => {
            let null_text = values.get(2).and_then(text);
            let elements = array_elements(&text_arg(0)?)?;
            let kept = elements.into_iter().filter_map(|e| e.or_else(|| null_text.clone()));
            Value::Text(kept.collect::<Vec<_>>().join(&text_arg(1)?).into())
        }
        ArrayAny => {
            let wanted = text_arg(0)?;
            Value::Bool(array_elements(&text_arg(1)?)?.into_iter().flatten().any(|e| e == wanted))
        }
        QuoteIdent => {
            let s = text_arg(0)?;
            let plain = s.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c == '_')
                && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
            Value::Text(if plain { s } else { format!("\"{}\"", s.replace('"', "\"\"")) }.into())
        }
        ArrayUpper => {
            let length = array_elements(&text_arg(0)?)?.len() as i64;
            if int_arg(1)? != 1 || length == 0 {
                return None;
            }
            Value::Int(length)
        }
        ArrayElement => {
            let index = usize::try_from(int_arg(1)?).ok()?.checked_sub(1)?;
            Value::Text(array_elements(&text_arg(0)?)?.into_iter().nth(index)??.into())
        }
        QuoteLiteral => Value::Text(format!("'{}'", text_arg(0)?.replace('\'', "''")).into()),
        Power | Sqrt | Cbrt | Exp | Ln | Log10 | LogBase => {
            let x = values[0].as_f64()?;
            let y = || values[1].as_f64();
            Value::double(function::finite(match function {
                Power => x.powf(y()?),
                Sqrt if x >= 0.0 => x.sqrt(),
                Cbrt => x.cbrt(),
                Exp => x.exp(),
                Ln if x > 0.0 => x.ln(),
                Log10 if x > 0.0 => x.log10(),
                LogBase if x > 0.0 && x != 1.0 && y()? > 0.0 => y()?.ln() / x.ln(),
                _ => return None,
            })?)
        }
        Sign => match &values[0] {
            Value::Int(i) => Value::Int(i.signum()),
            Value::Double(d) if d.0.is_nan() => Value::double(f64::NAN),
            Value::Double(d) => Value::double(if d.0 == 0.0 { 0.0 } else { d.0.signum() }),
            Value::Decimal(d) => Value::Decimal((d.get().signum() * DECIMAL_ONE).into()),
            _ => return None,
        },
        LPad | RPad => {
            let fill = match values.get(2) {
                Some(_) => text_arg(2)?,
                None => " ".to_owned(),
            };
            Value::Text(function::pad(&text_arg(0)?, int_arg(1)?, &fill, function == LPad)?.into())
        }
        Left | Right => Value::Text(function::left_right(&text_arg(0)?, int_arg(1)?, function == Left).into()),
        Reverse => Value::Text(text_arg(0)?.chars().rev().collect()),
        Repeat => Value::Text(function::repeat(&text_arg(0)?, int_arg(1)?)?.into()),
        InitCap => Value::Text(function::initcap(&text_arg(0)?).into()),
        StartsWith => Value::Bool(text_arg(0)?.starts_with(text_arg(1)?.as_str())),
        Ascii => Value::Int(text_arg(0)?.chars().next().map_or(0, |c| c as i64)),
        Chr => Value::Text(function::chr(int_arg(0)?)?.into()),
        RegexpReplace => {
            let (global, case_insensitive) = function::regexp_flags(&text_arg(3)?)?;
            let (text, replacement) = (text_arg(0)?, function::replacement(&text_arg(2)?));
            let replaced = with_regex(&text_arg(1)?, case_insensitive, |re| match global {
                true => re.replace_all(&text, replacement.as_str()).into_owned(),
                false => re.replace(&text, replacement.as_str()).into_owned(),
            })?;
            Value::Text(replaced.into())
        }
        SimilarTo => {
            let escape = text_arg(2)?.chars().next();
            let pattern = function::similar_to_regex(&text_arg(1)?, escape);
            let text = text_arg(0)?;
            Value::Bool(with_regex(&pattern, false, |re| re.is_match(&text))?)
        }
        ToChar => {
            let micros = match &values[0] {
                Value::Timestamp(t) => *t,
                Value::Date(d) => *d as i64 * time::MICROS_PER_DAY,
                _ => return None,
            };
            Value::Text(function::to_char(micros, &text_arg(1)?).into())
        }
        Coalesce | NullIf | Concat | Greatest | Least | FormatType | ArrayCat | OrderedValue | TupleKey
        | ArrayAggElement => {
            unreachable!("handled by call")
        }
    })
}

/// Compiled patterns a thread keeps (cleared when full).
const REGEX_CACHE_MAX: usize = 64;
/// The largest compiled pattern, in bytes (the regex crate's size limit).
pub(crate) const REGEX_SIZE_MAX: usize = 1 << 20;

/// Compiles a pattern as `~` reads it.
pub(crate) fn compile_regex(pattern: &str, case_insensitive: bool) -> std::result::Result<regex::Regex, regex::Error> {
    regex::RegexBuilder::new(pattern).case_insensitive(case_insensitive).size_limit(REGEX_SIZE_MAX).build()
}

/// `text ~ pattern`: `None` when the pattern does not compile (the binder
/// refuses literal patterns that do not; a computed one yields NULL).
fn regex_match(text: &str, pattern: &str, case_insensitive: bool) -> Option<bool> {
    with_regex(pattern, case_insensitive, |re| re.is_match(text))
}

/// `f` of `pattern` compiled (kept in a per-thread cache); `None` when it
/// does not compile.
fn with_regex<T>(pattern: &str, case_insensitive: bool, f: impl FnOnce(&regex::Regex) -> T) -> Option<T> {
    thread_local! {
        static CACHE: std::cell::RefCell<std::collections::HashMap<(String, bool), regex::Regex>> =
            Default::default();
    }
    CACHE.with(|cache| {
        let mut cache = cache.borrow_mut();
        let key = (pattern.to_owned(), case_insensitive);
        if !cache.contains_key(&key) {
            if cache.len() >= REGEX_CACHE_MAX {
                cache.clear();
            }
            cache.insert(key.clone(), compile_regex(pattern, case_insensitive).ok()?);
        }
        Some(f(&cache[&key]))
    })
}

/// The elements of an array's text form (`{a,"b c",NULL}`): `None` when it
/// is not one; a NULL element is `None`.
pub(crate) fn array_elements(text: &str) -> Option<Vec<Option<String>>> {
    let inner = text.trim().strip_prefix('{')?.strip_suffix('}')?;
    let mut elements = Vec::new();
    let mut chars = inner.chars().peekable();
    while chars.peek().is_some() {
        let mut element = String::new();
        let quoted = chars.peek() == Some(&'"');
        if quoted {
            chars.next();
            loop {
                match chars.next()? {
                    '"' => break,
                    '\\' => element.push(chars.next()?),
                    c => element.push(c),
                }
            }
        } else {
            while let Some(c) = chars.peek().filter(|c| **c != ',') {
                element.push(*c);
                chars.next();
            }
        }
        match chars.next() {
            None | Some(',') => {}
            Some(_) => return None,
        }
        let null = !quoted && element.eq_ignore_ascii_case("NULL");
        elements.push((!null).then_some(element));
    }
    Some(elements)
}

/// Characters that make an array element quoted in the array's text form.
const ARRAY_SPECIAL: &[char] = &[',', '{', '}', '"', '\\', ' ', '\t', '\n'];

/// The text form of an array of `elements` (quoted where needed, as Postgres).
pub(crate) fn array_text<'e>(elements: impl Iterator<Item = Option<&'e str>>) -> String {
    let quoted: Vec<String> = elements.map(array_element).collect();
    format!("{{{}}}", quoted.join(","))
}

/// One element in an array's text form: quoted where needed, `NULL` for None.
pub(crate) fn array_element(element: Option<&str>) -> String {
    match element {
        None => "NULL".to_owned(),
        Some(e) if !e.is_empty() && !e.eq_ignore_ascii_case("NULL") && !e.contains(ARRAY_SPECIAL) => e.to_owned(),
        Some(e) => format!("\"{}\"", e.replace('\\', "\\\\").replace('"', "\\\"")),
    }
}

/// SQL LIKE: `%` any run, `_` one character, `\` escapes the next one.
pub(crate) fn like(text: &str, pattern: &str) -> bool {
    let text: Vec<char> = text.chars().collect();
    let pattern: Vec<char> = pattern.chars().collect();
    // Iterative matching with backtracking to the last `%`: linear in practice.
    let (mut t, mut p) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() {
            match pattern[p] {
                '%' => {
                    star = Some((p, t));
                    p += 1;
                    continue;
                }
                '\\' if p + 1 < pattern.len() && pattern[p + 1] == text[t] => {
                    p += 2;
                    t += 1;
                    continue;
                }
                '_' => {
                    p += 1;
                    t += 1;
                    continue;
                }
                c if c != '\\' && c == text[t] => {
                    p += 1;
                    t += 1;
                    continue;
                }
                _ => {}
            }
        }
        match star {
            Some((star_p, star_t)) => {
                p = star_p + 1;
                t = star_t + 1;
                star = Some((star_p, star_t + 1));
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|c| *c == '%')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_matches_sql() {
        assert!(like("hello", "h%o"));
        assert!(like("hello", "_ello"));
        assert!(like("", "%"));
        assert!(!like("hello", "h%x"));
        assert!(like("50%", "50\\%"));
        assert!(!like("500", "50\\%"));
        assert!(like("abcabc", "%abc"));
        assert!(like("aXbXc", "a%b%c"));
    }
}
