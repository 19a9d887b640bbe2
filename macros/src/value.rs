//! Reading arguments as written: what each kind accepts, the value it gives, and the
//! error for anything else, spanned on the value. The kinds, their ranges and the values
//! are `strata_spec`'s; this is the part that needs tokens.

use crate::parse::{Value, ValueKind};
use crate::suggest::did_you_mean;
use std::fmt;
use strata_spec::{
    check_inferred, check_not_batch, check_size, check_sizes_item, Choice, Kind, Val, ACTIVATIONS,
    DATA_FORMATS, INITIALIZERS, INTERPOLATIONS, MERGE_MODES, PADDINGS, SCORE_MODES,
};

fn err(value: &Value, message: impl fmt::Display) -> syn::Error {
    syn::Error::new_spanned(value, message)
}

/// The written form of a value, for messages.
fn written(value: &Value) -> String {
    match &value.kind {
        ValueKind::Int(v) => v.to_string(),
        ValueKind::Float(v) => format!("{v:?}"),
        ValueKind::Bool(v) => v.to_string(),
        ValueKind::Name(n) => n.clone(),
        ValueKind::Tuple(items) => {
            let parts: Vec<String> = items.iter().map(written).collect();
            format!("({})", parts.join(", "))
        }
        ValueKind::Layer(l) => l.tokens.to_string(),
    }
}

/// Whether `name` is one of the names arguments take (`relu`, `same`, ...), as opposed to
/// what looks like a variable.
fn is_choice(name: &str) -> bool {
    [
        ACTIVATIONS,
        INITIALIZERS,
        PADDINGS,
        DATA_FORMATS,
        INTERPOLATIONS,
        SCORE_MODES,
        MERGE_MODES,
    ]
    .iter()
    .any(|t| t.iter().any(|c| c.name == name))
        || name == "None"
}

fn int(value: &Value, arg: &str, what: &str) -> syn::Result<i64> {
    match &value.kind {
        ValueKind::Int(v) => Ok(*v),
        ValueKind::Name(n) if !is_choice(n) => Err(err(
            value,
            format!(
                "`{arg}` must be {what} written as a literal, found `{n}`: model! checks sizes at compile time, so it cannot read variables or constants"
            ),
        )),
        _ => Err(err(
            value,
            format!("`{arg}` must be {what}, found `{}`", written(value)),
        )),
    }
}

fn count(value: &Value, arg: &str) -> syn::Result<usize> {
    let v = int(value, arg, "a whole number >= 1")?;
    check_size(arg, v).map_err(|m| err(value, m))?;
    usize::try_from(v).map_err(|_| err(value, format!("`{arg}` is too large")))
}

fn non_negative(value: &Value, arg: &str) -> syn::Result<usize> {
    let v = int(value, arg, "a whole number >= 0")?;
    usize::try_from(v).map_err(|_| err(value, format!("`{arg}` must be at least 0, got {v}")))
}

fn pair(value: &Value, arg: &str) -> syn::Result<[usize; 2]> {
    pair_of(value, arg, count)
}

/// One size for both axes, or a `(height, width)` pair, each read by `item`.
fn pair_of(
    value: &Value,
    arg: &str,
    item: fn(&Value, &str) -> syn::Result<usize>,
) -> syn::Result<[usize; 2]> {
    match &value.kind {
        ValueKind::Tuple(items) if items.len() == 2 => {
            Ok([item(&items[0], arg)?, item(&items[1], arg)?])
        }
        ValueKind::Tuple(items) => Err(err(
            value,
            format!(
                "`{arg}` must be one size or a (height, width) pair, found {} values",
                items.len()
            ),
        )),
        _ => {
            let n = item(value, arg)?;
            Ok([n, n])
        }
    }
}

/// A margin of ZeroPadding2D or Cropping2D: a whole number >= 0.
fn margin(value: &Value, arg: &str) -> syn::Result<usize> {
    let v = int(value, arg, "a whole number >= 0")?;
    usize::try_from(v).map_err(|_| err(value, format!("`{arg}` sizes must be >= 0, got {v}")))
}

/// `1` (every side), `(1, 2)` (height, width) or `((top, bottom), (left, right))`.
fn margins(value: &Value, arg: &str) -> syn::Result<[[usize; 2]; 2]> {
    let both = |v: &Value| -> syn::Result<[usize; 2]> {
        match &v.kind {
            ValueKind::Tuple(items) if items.len() == 2 => {
                Ok([margin(&items[0], arg)?, margin(&items[1], arg)?])
            }
            ValueKind::Tuple(_) => Err(err(
                v,
                format!(
                    "`{arg}` must give each axis as a (before, after) pair, found `{}`",
                    written(v)
                ),
            )),
            _ => {
                let n = margin(v, arg)?;
                Ok([n, n])
            }
        }
    };
    match &value.kind {
        ValueKind::Tuple(items) if items.len() == 2 => Ok([both(&items[0])?, both(&items[1])?]),
        ValueKind::Tuple(_) => Err(err(
            value,
            format!(
                "`{arg}` must be one size, a (height, width) pair or ((top, bottom), (left, right)), found `{}`",
                written(value)
            ),
        )),
        _ => {
            let n = margin(value, arg)?;
            Ok([[n, n], [n, n]])
        }
    }
}

/// Axes counted from 1 without the batch axis, as Keras writes them: one or a tuple.
fn axes(value: &Value, arg: &str) -> syn::Result<Vec<usize>> {
    let items: Vec<&Value> = match &value.kind {
        ValueKind::Tuple(items) => items.iter().collect(),
        _ => vec![value],
    };
    items
        .into_iter()
        .map(|item| {
            let v = int(item, arg, "axes >= 1")?;
            usize::try_from(v).ok().filter(|&v| v >= 1).ok_or_else(|| {
                err(
                    item,
                    format!(
                        "`{arg}` axes count from 1 (the batch axis is not one of them), got {v}"
                    ),
                )
            })
        })
        .collect()
}

/// One size, written `3` or `(3,)` (the one axis of a sequence).
fn single(value: &Value, arg: &str) -> syn::Result<usize> {
    match &value.kind {
        ValueKind::Tuple(items) if items.len() == 1 => count(&items[0], arg),
        ValueKind::Tuple(items) => Err(err(
            value,
            format!(
                "`{arg}` must be one size or a (size,) tuple, found {} values",
                items.len()
            ),
        )),
        _ => count(value, arg),
    }
}

fn float(value: &Value, arg: &str) -> syn::Result<f64> {
    match &value.kind {
        ValueKind::Float(v) => Ok(*v),
        ValueKind::Int(v) => Ok(*v as f64),
        _ => Err(err(
            value,
            format!("`{arg}` must be a number, found `{}`", written(value)),
        )),
    }
}

fn choice(
    value: &Value,
    arg: &str,
    what: &str,
    table: &'static [Choice],
) -> syn::Result<&'static Choice> {
    let ValueKind::Name(name) = &value.kind else {
        return Err(err(
            value,
            format!(
                "`{arg}` must be the name of {what}, found `{}`",
                written(value)
            ),
        ));
    };
    if let Some(c) = table.iter().find(|c| c.name == name) {
        return Ok(c);
    }
    let names: Vec<&str> = table.iter().map(|c| c.name).collect();
    let hint = match did_you_mean(name, &names) {
        Some(s) => format!("did you mean `{s}`?"),
        None => format!("expected one of: {}", names.join(", ")),
    };
    Err(err(value, format!("unknown {what} `{name}`; {hint}")))
}

fn sizes(value: &Value, arg: &str, allow_inferred: bool) -> syn::Result<Vec<i64>> {
    let items: Vec<&Value> = match &value.kind {
        ValueKind::Tuple(items) => items.iter().collect(),
        _ => vec![value],
    };
    let mut out = Vec::new();
    for item in items {
        let what = if allow_inferred { ">= 1 or -1" } else { ">= 1" };
        let v = int(item, arg, &format!("sizes {what}"))?;
        check_sizes_item(arg, v, allow_inferred).map_err(|m| err(item, m))?;
        out.push(v);
    }
    check_inferred(arg, &out).map_err(|m| err(value, m))?;
    Ok(out)
}

/// One axis for both inputs (`-1`) or a `(first, second)` pair, none of them the batch
/// axis (Dot's `axes`).
fn axis_pair(value: &Value, arg: &str) -> syn::Result<[i64; 2]> {
    let what = "an axis or a pair of axes";
    let one = |v: &Value| -> syn::Result<i64> {
        let a = int(v, arg, what)?;
        check_not_batch(arg, a).map_err(|m| err(v, m))?;
        Ok(a)
    };
    match &value.kind {
        ValueKind::Tuple(items) if items.len() == 2 => Ok([one(&items[0])?, one(&items[1])?]),
        ValueKind::Tuple(_) => Err(err(
            value,
            format!(
                "`{arg}` must be {what}, one for each of the two inputs, found `{}`",
                written(value)
            ),
        )),
        _ => {
            let a = one(value)?;
            Ok([a, a])
        }
    }
}

/// Reads `value` as an argument `arg` of `kind`.
pub fn accept(kind: Kind, value: &Value, arg: &str) -> syn::Result<Val> {
    let is_none = matches!(&value.kind, ValueKind::Name(n) if n == "None");
    Ok(match kind {
            Kind::Count => Val::Usize(count(value, arg)?),
            Kind::Pair => Val::Pair(pair(value, arg)?),
            Kind::OptionalPair if is_none => Val::OptionalPair(None),
            Kind::OptionalPair => Val::OptionalPair(Some(pair(value, arg)?)),
            Kind::OptionalNonNegative if is_none => Val::OptionalFloat(None),
            Kind::OptionalNonNegative => {
                let v = float(value, arg)?;
                kind.check_float(arg, v).map_err(|m| err(value, m))?;
                Val::OptionalFloat(Some(v))
            }
            Kind::OptionalAxes if is_none => Val::Axes(None),
            Kind::OptionalAxes => Val::Axes(Some(axes(value, arg)?)),
            Kind::Dims => Val::Dims(axes(value, arg)?),
            Kind::Margins => Val::Margins(margins(value, arg)?),
            Kind::Interpolation => {
                Val::Interpolation(choice(value, arg, "interpolation", INTERPOLATIONS)?)
            }
            Kind::OptionalPadding if is_none => Val::OptionalPair(None),
            Kind::OptionalPadding => Val::OptionalPair(Some(pair_of(value, arg, non_negative)?)),
            Kind::Size => Val::Usize(single(value, arg)?),
            Kind::OptionalSize if is_none => Val::OptionalUsize(None),
            Kind::OptionalSize => Val::OptionalUsize(Some(single(value, arg)?)),
            Kind::Rate | Kind::Fraction | Kind::Positive | Kind::NonNegative | Kind::Number => {
                let v = float(value, arg)?;
                kind.check_float(arg, v).map_err(|m| err(value, m))?;
                Val::Float(v)
            }
            Kind::Bool => match &value.kind {
                ValueKind::Bool(b) => Val::Bool(*b),
                _ => {
                    return Err(err(
                        value,
                        format!(
                            "`{arg}` must be `true` or `false`, found `{}`",
                            written(value)
                        ),
                    ))
                }
            },
            // Keras reads `activation=None` as no activation.
            Kind::Activation if is_none => Val::Activation(&ACTIVATIONS[0]),
            Kind::Activation => Val::Activation(choice(value, arg, "activation", ACTIVATIONS)?),
            Kind::Initializer => Val::Initializer(choice(value, arg, "initializer", INITIALIZERS)?),
            Kind::Padding => Val::Padding(choice(value, arg, "padding", PADDINGS)?),
            Kind::DataFormat => match &value.kind {
                ValueKind::Name(n) if n == "channels_first" => {
                    return Err(err(
                        value,
                        "`channels_first` is not supported: Strata's image layers take channels_last inputs (height, width, channels)",
                    ))
                }
                _ => Val::DataFormat(choice(value, arg, "data format", DATA_FORMATS)?),
            },
            Kind::Axis => Val::Axis(int(value, arg, "an axis")?),
            Kind::AxisPair => Val::AxisPair(axis_pair(value, arg)?),
            Kind::ScoreMode => Val::ScoreMode(choice(value, arg, "score mode", SCORE_MODES)?),
            Kind::MergeMode if is_none => {
                return Err(err(
                    value,
                    format!(
                        "`{arg} = None` (the two outputs apart) is not supported yet: a layer \
                         call has one output; choose concat, sum, mul or ave"
                    ),
                ))
            }
            Kind::MergeMode => Val::MergeMode(choice(value, arg, "merge mode", MERGE_MODES)?),
            // Read by `check.rs`, which resolves the wrapped layer against its own entry.
            Kind::Layer => {
                return Err(err(
                    value,
                    format!(
                        "`{arg}` must be a layer, such as `LSTM(8)`, found `{}`",
                        written(value)
                    ),
                ))
            }
            Kind::Shape => Val::Shape(
                sizes(value, arg, false)?
                    .into_iter()
                    .map(|d| d as usize)
                    .collect(),
            ),
            Kind::TargetShape => Val::TargetShape(sizes(value, arg, true)?),
            Kind::Name => {
                let ValueKind::Name(name) = &value.kind else {
                    return Err(err(
                        value,
                        format!("`{arg}` must be a name, such as \"hidden\""),
                    ));
                };
                let snake = name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
                    && name
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
                // A keyword (`"match"`) is a field through a raw identifier (`r#match`).
                let ident = syn::parse_str::<syn::Ident>(name).is_ok()
                    || syn::parse_str::<syn::Ident>(&format!("r#{name}")).is_ok();
                if !snake || !ident {
                    return Err(err(
                        value,
                        format!("layer name `{name}` must be a snake_case identifier (it names a field of the model)"),
                    ));
                }
                Val::Name(name.clone())
            }
        })
}
