//! The IR text form: what [`Graph`]'s `Display` prints, read back by [`Graph::parse`] into
//! an equal graph.
//!
//! ```text
//! graph mlp(%0: f32[32, 784], %1: f32[784, 128]) -> (%3) {
//!   %2 = dot_general(%0, %1) batch=[]/[] contract=[1]/[0] : f32[32, 128]
//!   %3 = reduce(%2) sum axes=[0] : f32[128]
//! }
//! ```
//!
//! A node is `%i = name(operands) attributes : type`. What each op prints comes from its
//! entry in the `primitives!` table (`op.rs`): its name, its operand fields, then its other
//! fields in declaration order, each written and read by its type's [`Field`] impl, so a
//! new primitive needs nothing here unless it brings a new field type.
//!
//! A loop (`while`) is the one node over several lines: its regions are whole graphs,
//! printed indented between `cond={` / `} body={` / `} : type`; its later siblings name
//! the first (`regions_of=%i`) instead of repeating them, and read back sharing them. A
//! loop that a scan built adds its step after the body: `} scan carries=N reverse=B
//! step={`, the step's graph, then `} : type`.
//!
//! Any integer may also be written in terms of a batch size `N` (`N`, `4*N`, `N+1`,
//! `2*N-3`): [`Graph::parse_with_batch`] reads such a text at a given batch size, which is
//! how an exported model's graph is stored once for every batch size.

use crate::ir::{
    BinaryOp, Comparison, ConvParams, DType, DotDims, Graph, Node, Op, ReduceOp, Region, ScanStep,
    Shape, TensorType, UnaryOp, Value, Window,
};
use crate::{Error, Result, Tensor};
use half::bf16;
use std::fmt::Write;
use std::ops::Range;

/// How a field of an op appears in its text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// One operand, in the parenthesised list.
    Operand,
    /// Any number of operands, in the parenthesised list.
    Operands,
    /// The op's printed name says its value (`negate` is `Unary { op: Neg, .. }`).
    Name,
    /// After the operands: `key=value`, or the value alone when `bare` (its text says what
    /// it is: `sum`, `batch=[]/[] contract=[1]/[0]`).
    Attribute { bare: bool },
}

/// A type that fields of ops have: how it is printed and read back.
pub(crate) trait Field: Sized {
    const ROLE: Role;

    /// The value's text (attributes only).
    fn write(&self, _out: &mut String) {}

    /// Reads the value's text (attributes only).
    fn read(r: &mut Reader<'_>) -> Result<Self> {
        Err(r.error("internal: this field is not an attribute"))
    }

    /// The value a printed op name stands for ([`Role::Name`] only).
    fn from_name(_name: &str) -> Option<Self> {
        None
    }

    /// The value of operand fields ([`Role::Operand`], [`Role::Operands`] only).
    fn from_operands(_values: &[Value]) -> Option<Self> {
        None
    }

    /// Whether the value is left out of the text (an optional attribute that is not set).
    fn absent(&self) -> bool {
        false
    }
}

/// Appends ` key=value` (or ` value` for a bare attribute); nothing for the other roles.
pub(crate) fn write_field<T: Field>(value: &T, key: &str, out: &mut String) {
    if value.absent() {
        return;
    }
    if let Role::Attribute { bare } = T::ROLE {
        out.push(' ');
        if !bare {
            out.push_str(key);
            out.push('=');
        }
        value.write(out);
    }
}

/// Reads field `key` of an op printed as `printed`.
pub(crate) fn read_field<T: Field>(
    r: &mut Reader<'_>,
    printed: &str,
    key: &str,
    slots: &OperandSlots<'_>,
) -> Result<T> {
    match T::ROLE {
        Role::Name => {
            T::from_name(printed).ok_or_else(|| r.error_at_start(format!("unknown op `{printed}`")))
        }
        Role::Operand | Role::Operands => T::from_operands(slots.get(key))
            .ok_or_else(|| r.error_at_start(format!("`{printed}`: bad operands for `{key}`"))),
        Role::Attribute { bare } => {
            r.skip_ws();
            if !bare {
                let at = r.pos;
                if r.word() != key {
                    r.pos = at;
                    return Err(r.error(format!("`{printed}` expects `{key}=` here")));
                }
                r.expect("=")?;
            }
            T::read(r)
        }
    }
}

/// Which of the printed operands belong to which operand field of an op.
pub(crate) struct OperandSlots<'a> {
    values: &'a [Value],
    ranges: Vec<(&'a str, Range<usize>)>,
}

impl<'a> OperandSlots<'a> {
    /// `fields` are the op's fields with their roles, `order` its operand fields in
    /// operand order, `values` the operands printed.
    pub(crate) fn new(
        fields: &[(&'a str, Role)],
        order: &[&'a str],
        values: &'a [Value],
        r: &Reader<'_>,
    ) -> Result<OperandSlots<'a>> {
        let role = |name: &str| {
            fields
                .iter()
                .find(|(f, _)| *f == name)
                .map_or(Role::Operand, |&(_, role)| role)
        };
        let singles = order.iter().filter(|n| role(n) == Role::Operand).count();
        let lists = order.len() - singles;
        let fits = match lists {
            0 => values.len() == singles,
            1 => values.len() >= singles,
            _ => false,
        };
        if !fits {
            return Err(r.error_at_start(format!(
                "the op takes {}{singles} operands, got {}",
                if lists > 0 { "at least " } else { "" },
                values.len()
            )));
        }
        let list_len = values.len() - singles;
        let mut start = 0;
        let ranges = order
            .iter()
            .map(|&n| {
                let len = if role(n) == Role::Operand {
                    1
                } else {
                    list_len
                };
                let range = start..start + len;
                start += len;
                (n, range)
            })
            .collect();
        Ok(OperandSlots { values, ranges })
    }

    fn get(&self, key: &str) -> &'a [Value] {
        self.ranges
            .iter()
            .find(|(n, _)| *n == key)
            .map_or(&[], |(_, r)| &self.values[r.clone()])
    }
}

// ---- the field types ------------------------------------------------------------------

impl Field for Value {
    const ROLE: Role = Role::Operand;
    fn from_operands(values: &[Value]) -> Option<Self> {
        match values {
            [v] => Some(*v),
            _ => None,
        }
    }
}

impl Field for Vec<Value> {
    const ROLE: Role = Role::Operands;
    fn from_operands(values: &[Value]) -> Option<Self> {
        Some(values.to_vec())
    }
}

impl Field for UnaryOp {
    const ROLE: Role = Role::Name;
    fn from_name(name: &str) -> Option<Self> {
        UnaryOp::ALL.into_iter().find(|f| f.name() == name)
    }
}

impl Field for BinaryOp {
    const ROLE: Role = Role::Name;
    fn from_name(name: &str) -> Option<Self> {
        BinaryOp::ALL.into_iter().find(|f| f.name() == name)
    }
}

impl Field for usize {
    const ROLE: Role = Role::Attribute { bare: false };
    fn write(&self, out: &mut String) {
        let _ = write!(out, "{self}");
    }
    fn read(r: &mut Reader<'_>) -> Result<Self> {
        r.uint()
    }
}

impl Field for Vec<usize> {
    const ROLE: Role = Role::Attribute { bare: false };
    fn write(&self, out: &mut String) {
        let _ = write!(out, "{self:?}");
    }
    fn read(r: &mut Reader<'_>) -> Result<Self> {
        r.list(Reader::uint)
    }
}

impl Field for Vec<i64> {
    const ROLE: Role = Role::Attribute { bare: false };
    fn write(&self, out: &mut String) {
        let _ = write!(out, "{self:?}");
    }
    fn read(r: &mut Reader<'_>) -> Result<Self> {
        r.list(Reader::int)
    }
}

impl Field for Shape {
    const ROLE: Role = Role::Attribute { bare: false };
    fn write(&self, out: &mut String) {
        let _ = write!(out, "{self}");
    }
    fn read(r: &mut Reader<'_>) -> Result<Self> {
        r.list(Reader::uint).map(Shape)
    }
}

impl Field for DType {
    const ROLE: Role = Role::Attribute { bare: false };
    fn write(&self, out: &mut String) {
        let _ = write!(out, "{self}");
    }
    fn read(r: &mut Reader<'_>) -> Result<Self> {
        r.dtype()
    }
}

/// Enums printed as their lower-case variant names.
macro_rules! keyword_field {
    ($ty:ident { $($variant:ident => $text:literal),* $(,)? }) => {
        impl Field for $ty {
            const ROLE: Role = Role::Attribute { bare: true };
            fn write(&self, out: &mut String) {
                out.push_str(match self {
                    $($ty::$variant => $text,)*
                });
            }
            fn read(r: &mut Reader<'_>) -> Result<Self> {
                let at = r.pos;
                match r.word() {
                    $($text => Ok($ty::$variant),)*
                    w => {
                        r.pos = at;
                        Err(r.error(format!(
                            "expected one of {}, found `{w}`",
                            [$($text),*].join(", ")
                        )))
                    }
                }
            }
        }
    };
}

keyword_field!(Comparison { Eq => "eq", Ne => "ne", Lt => "lt", Le => "le", Gt => "gt", Ge => "ge" });
keyword_field!(ReduceOp { Sum => "sum", Max => "max", Min => "min" });

impl Field for DotDims {
    const ROLE: Role = Role::Attribute { bare: true };
    fn write(&self, out: &mut String) {
        let _ = write!(
            out,
            "batch={:?}/{:?} contract={:?}/{:?}",
            self.lhs_batch, self.rhs_batch, self.lhs_contract, self.rhs_contract
        );
    }
    fn read(r: &mut Reader<'_>) -> Result<Self> {
        r.key("batch")?;
        let lhs_batch = r.list(Reader::uint)?;
        r.expect("/")?;
        let rhs_batch = r.list(Reader::uint)?;
        r.key("contract")?;
        let lhs_contract = r.list(Reader::uint)?;
        r.expect("/")?;
        let rhs_contract = r.list(Reader::uint)?;
        Ok(DotDims {
            lhs_batch,
            rhs_batch,
            lhs_contract,
            rhs_contract,
        })
    }
}

impl Field for Window {
    const ROLE: Role = Role::Attribute { bare: true };
    fn write(&self, out: &mut String) {
        let _ = write!(
            out,
            "window={:?} strides={:?} padding={:?}",
            self.dims, self.strides, self.padding
        );
    }
    fn read(r: &mut Reader<'_>) -> Result<Self> {
        r.key("window")?;
        let dims = r.list(Reader::uint)?;
        r.key("strides")?;
        let strides = r.list(Reader::uint)?;
        r.key("padding")?;
        let padding = r.list(|r| r.pair(Reader::uint))?;
        Ok(Window {
            dims,
            strides,
            padding,
        })
    }
}

impl Field for ConvParams {
    const ROLE: Role = Role::Attribute { bare: true };
    fn write(&self, out: &mut String) {
        let _ = write!(
            out,
            "strides={:?} padding={:?} lhs_dilation={:?} rhs_dilation={:?} groups={}",
            self.strides, self.padding, self.lhs_dilation, self.rhs_dilation, self.feature_groups
        );
    }
    fn read(r: &mut Reader<'_>) -> Result<Self> {
        r.key("strides")?;
        let strides = r.list(Reader::uint)?;
        r.key("padding")?;
        let padding = r.list(|r| r.pair(Reader::int))?;
        r.key("lhs_dilation")?;
        let lhs_dilation = r.list(Reader::uint)?;
        r.key("rhs_dilation")?;
        let rhs_dilation = r.list(Reader::uint)?;
        r.key("groups")?;
        let feature_groups = r.uint()?;
        Ok(ConvParams {
            strides,
            padding,
            lhs_dilation,
            rhs_dilation,
            feature_groups,
        })
    }
}

/// A region: its graph's own text, indented, between braces. The node then spans several
/// lines, which the reader takes apart before the node's own fields (`loop_node`).
impl Field for Region {
    const ROLE: Role = Role::Attribute { bare: false };
    fn write(&self, out: &mut String) {
        out.push_str("{\n");
        for line in self.graph().to_string().lines() {
            out.push_str("      ");
            out.push_str(line);
            out.push('\n');
        }
        out.push_str("    }");
    }
    fn read(r: &mut Reader<'_>) -> Result<Self> {
        Err(r.error(REGIONS_UNREADABLE))
    }
}

/// A scan's marker, after the body: `scan carries=N reverse=B step={`, the step's graph,
/// `}`; nothing on a plain loop.
impl Field for Option<ScanStep> {
    const ROLE: Role = Role::Attribute { bare: true };
    fn write(&self, out: &mut String) {
        if let Some(s) = self {
            let _ = write!(
                out,
                "scan carries={} reverse={} step=",
                s.carries, s.reverse
            );
            Field::write(&s.step, out);
        }
    }
    fn read(r: &mut Reader<'_>) -> Result<Self> {
        Err(r.error(REGIONS_UNREADABLE))
    }
    fn absent(&self) -> bool {
        self.is_none()
    }
}

const REGIONS_UNREADABLE: &str = "internal: a loop's regions are read with its node's lines";

/// A constant: every element, row-major, in a flat list (the node's type gives the shape).
/// Floats are written in the shortest form that reads back to the same value.
impl Field for Tensor {
    const ROLE: Role = Role::Attribute { bare: true };
    fn write(&self, out: &mut String) {
        out.push('[');
        crate::with_tensor!(self, a => {
            for (i, v) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                Element::write(v, out);
            }
        });
        out.push(']');
    }
    fn read(r: &mut Reader<'_>) -> Result<Self> {
        let ty =
            r.ty.clone()
                .ok_or_else(|| r.error("internal: a constant read without its type"))?;
        let at = r.pos;
        let numel = ty.shape.checked_numel().ok_or_else(|| {
            r.error(format!(
                "constant type {ty} has more elements than can exist"
            ))
        })?;
        let made = match ty.dtype {
            DType::F32 => Tensor::from_vec(ty.dims(), r.elements::<f32>(numel)?),
            DType::F64 => Tensor::from_vec(ty.dims(), r.elements::<f64>(numel)?),
            DType::BF16 => Tensor::from_vec(ty.dims(), r.elements::<bf16>(numel)?),
            DType::I32 => Tensor::from_vec(ty.dims(), r.elements::<i32>(numel)?),
            DType::I64 => Tensor::from_vec(ty.dims(), r.elements::<i64>(numel)?),
            DType::Bool => Tensor::from_vec(ty.dims(), r.elements::<bool>(numel)?),
        };
        made.map_err(|e| {
            r.pos = at;
            r.error(e.to_string())
        })
    }
}

/// An element of a constant's text.
trait Element: Sized {
    fn write(&self, out: &mut String);
    fn read(r: &mut Reader<'_>) -> Result<Self>;
}

/// `NaN` for the usual quiet NaN, `NaN(0x…)` with the bits of any other.
fn write_float(
    out: &mut String,
    v: f64,
    bits: u64,
    canonical_nan: u64,
    debug: &dyn std::fmt::Debug,
) {
    if v.is_nan() && bits != canonical_nan {
        let _ = write!(out, "NaN(0x{bits:x})");
    } else {
        let _ = write!(out, "{debug:?}");
    }
}

impl Element for f32 {
    fn write(&self, out: &mut String) {
        let canonical = f32::NAN.to_bits() as u64;
        write_float(out, *self as f64, self.to_bits() as u64, canonical, self);
    }
    fn read(r: &mut Reader<'_>) -> Result<Self> {
        r.float(
            |s| s.parse().ok(),
            |b| u32::try_from(b).ok().map(f32::from_bits),
        )
    }
}

impl Element for f64 {
    fn write(&self, out: &mut String) {
        write_float(out, *self, self.to_bits(), f64::NAN.to_bits(), self);
    }
    fn read(r: &mut Reader<'_>) -> Result<Self> {
        r.float(|s| s.parse().ok(), |b| Some(f64::from_bits(b)))
    }
}

impl Element for bf16 {
    fn write(&self, out: &mut String) {
        let canonical = bf16::NAN.to_bits() as u64;
        write_float(
            out,
            self.to_f64(),
            self.to_bits() as u64,
            canonical,
            &self.to_f32(),
        );
    }
    fn read(r: &mut Reader<'_>) -> Result<Self> {
        r.float(
            // Every bf16 is an f32, written as the shortest f32 text: it reads back exactly.
            |s| s.parse::<f32>().ok().map(bf16::from_f32),
            |b| u16::try_from(b).ok().map(bf16::from_bits),
        )
    }
}

impl Element for i32 {
    fn write(&self, out: &mut String) {
        let _ = write!(out, "{self}");
    }
    fn read(r: &mut Reader<'_>) -> Result<Self> {
        let at = r.pos;
        let v = r.int()?;
        i32::try_from(v).map_err(|_| {
            r.pos = at;
            r.error(format!("{v} does not fit in i32"))
        })
    }
}

impl Element for i64 {
    fn write(&self, out: &mut String) {
        let _ = write!(out, "{self}");
    }
    fn read(r: &mut Reader<'_>) -> Result<Self> {
        r.int()
    }
}

impl Element for bool {
    fn write(&self, out: &mut String) {
        let _ = write!(out, "{self}");
    }
    fn read(r: &mut Reader<'_>) -> Result<Self> {
        let at = r.pos;
        match r.word() {
            "true" => Ok(true),
            "false" => Ok(false),
            w => {
                r.pos = at;
                Err(r.error(format!("expected true or false, found `{w}`")))
            }
        }
    }
}

// ---- printing -----------------------------------------------------------------------

/// A graph's name as printed: bare when it is a plain identifier, else quoted.
pub(crate) fn write_name(out: &mut String, name: &str) {
    if !name.is_empty() && name.chars().all(is_name_char) {
        out.push_str(name);
    } else {
        let _ = write!(out, "{name:?}");
    }
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')
}

/// `name(operands) attributes`.
pub(crate) fn write_op(out: &mut String, op: &Op) {
    out.push_str(op.name());
    out.push('(');
    for (i, v) in op.operands().iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "{v}");
    }
    out.push(')');
    op.write_attributes(out);
}

// ---- reading ------------------------------------------------------------------------

/// A cursor over one line of IR text, reporting errors by line and column.
pub(crate) struct Reader<'a> {
    line: &'a str,
    line_no: usize,
    pos: usize,
    end: usize,
    /// Where the current op's name starts (errors about the op as a whole point there).
    start: usize,
    batch: Option<usize>,
    /// The type of the node being read (a constant's value needs it).
    ty: Option<TensorType>,
}

impl<'a> Reader<'a> {
    fn new(line: &'a str, line_no: usize, batch: Option<usize>) -> Reader<'a> {
        Reader {
            line,
            line_no,
            pos: 0,
            end: line.len(),
            start: 0,
            batch,
            ty: None,
        }
    }

    fn error_at(&self, pos: usize, message: impl Into<String>) -> Error {
        Error::IrText {
            line: self.line_no,
            column: self.line[..pos.min(self.line.len())].chars().count() + 1,
            message: message.into(),
        }
    }

    /// An error at the cursor.
    pub(crate) fn error(&self, message: impl Into<String>) -> Error {
        self.error_at(self.pos, message)
    }

    /// An error at the start of the current op.
    pub(crate) fn error_at_start(&self, message: impl Into<String>) -> Error {
        self.error_at(self.start, message)
    }

    fn rest(&self) -> &'a str {
        &self.line[self.pos..self.end]
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn skip_ws(&mut self) {
        let rest = self.rest();
        self.pos += rest.len() - rest.trim_start_matches([' ', '\t']).len();
    }

    fn at_end(&mut self) -> bool {
        self.skip_ws();
        self.pos == self.end
    }

    /// What the cursor is on, for error messages.
    fn found(&self) -> String {
        match self.rest().chars().next() {
            None => "the end of the line".to_string(),
            Some(_) => {
                let s: String = self.rest().chars().take(12).collect();
                format!("`{s}`")
            }
        }
    }

    fn eat(&mut self, s: &str) -> bool {
        self.skip_ws();
        if self.rest().starts_with(s) {
            self.pos += s.len();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, s: &str) -> Result<()> {
        if self.eat(s) {
            Ok(())
        } else {
            Err(self.error(format!("expected `{s}`, found {}", self.found())))
        }
    }

    /// `key=`.
    fn key(&mut self, key: &str) -> Result<()> {
        self.skip_ws();
        let at = self.pos;
        if self.word() != key {
            self.pos = at;
            return Err(self.error(format!("expected `{key}=`, found {}", self.found())));
        }
        self.expect("=")
    }

    /// A run of letters, digits and underscores (possibly empty).
    fn word(&mut self) -> &'a str {
        self.skip_ws();
        let rest = self.rest();
        let n = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        self.pos += n;
        &rest[..n]
    }

    fn digits(&mut self) -> Result<i128> {
        let rest = self.rest();
        let n = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if n == 0 {
            return Err(self.error(format!("expected a number, found {}", self.found())));
        }
        let v = rest[..n]
            .parse::<i128>()
            .ok()
            .filter(|&v| v <= i64::MAX as i128 * 2 + 1)
            .ok_or_else(|| self.error("number too large"))?;
        self.pos += n;
        Ok(v)
    }

    /// An integer: `[-]digits`, or one in terms of the batch size `N`:
    /// `[-][digits*]N[(+|-)digits]`.
    fn integer(&mut self) -> Result<i128> {
        self.skip_ws();
        let at = self.pos;
        let negative = self.eat("-");
        let mut factor = None;
        if self.peek().is_some_and(|c| c.is_ascii_digit()) {
            let v = self.digits()?;
            if !self.rest().starts_with("*N") {
                return Ok(if negative { -v } else { v });
            }
            self.pos += 1;
            factor = Some(v);
        }
        if !self.rest().starts_with('N') {
            return Err(self.error(format!("expected a number, found {}", self.found())));
        }
        self.pos += 1;
        let Some(batch) = self.batch else {
            return Err(self.error_at(
                at,
                "`N` (the batch size) in a graph read without one: read it with \
                 Graph::parse_with_batch",
            ));
        };
        let mut v = factor.unwrap_or(1) * batch as i128;
        if self.rest().starts_with(['+', '-']) {
            let minus = self.rest().starts_with('-');
            self.pos += 1;
            let c = self.digits()?;
            v = if minus { v - c } else { v + c };
        }
        Ok(if negative { -v } else { v })
    }

    fn uint(&mut self) -> Result<usize> {
        self.skip_ws();
        let at = self.pos;
        let v = self.integer()?;
        usize::try_from(v).map_err(|_| self.error_at(at, format!("{v} is not a size")))
    }

    fn int(&mut self) -> Result<i64> {
        self.skip_ws();
        let at = self.pos;
        let v = self.integer()?;
        i64::try_from(v).map_err(|_| self.error_at(at, format!("{v} does not fit in i64")))
    }

    /// `[item, item, ...]`.
    fn list<T>(&mut self, mut item: impl FnMut(&mut Self) -> Result<T>) -> Result<Vec<T>> {
        self.expect("[")?;
        let mut out = Vec::new();
        if self.eat("]") {
            return Ok(out);
        }
        loop {
            out.push(item(self)?);
            if self.eat("]") {
                return Ok(out);
            }
            self.expect(",")?;
        }
    }

    /// `(a, b)`.
    fn pair<T>(&mut self, mut item: impl FnMut(&mut Self) -> Result<T>) -> Result<(T, T)> {
        self.expect("(")?;
        let a = item(self)?;
        self.expect(",")?;
        let b = item(self)?;
        self.expect(")")?;
        Ok((a, b))
    }

    /// Exactly `numel` elements in a list; more is an error as soon as it is seen, so a
    /// text never makes more memory be taken than it has elements.
    fn elements<T: Element>(&mut self, numel: usize) -> Result<Vec<T>> {
        let at = self.pos;
        let mut count = 0;
        let v = self.list(|r| {
            count += 1;
            if count > numel {
                return Err(r.error(format!("more elements than the {numel} of the type")));
            }
            T::read(r)
        })?;
        if v.len() != numel {
            return Err(self.error_at(at, format!("{} elements for a type of {numel}", v.len())));
        }
        Ok(v)
    }

    /// A float: anything Rust's float parser takes (`1.5`, `-0.0`, `1e-7`, `inf`, `NaN`),
    /// or `NaN(0x…)` with its bits.
    fn float<T>(
        &mut self,
        parse: impl Fn(&str) -> Option<T>,
        from_bits: impl Fn(u64) -> Option<T>,
    ) -> Result<T> {
        self.skip_ws();
        let at = self.pos;
        let rest = self.rest();
        let n = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '+' | '-')))
            .unwrap_or(rest.len());
        let token = &rest[..n];
        self.pos += n;
        if token == "NaN" && self.rest().starts_with("(0x") {
            self.pos += 3;
            let rest = self.rest();
            let m = rest
                .find(|c: char| !c.is_ascii_hexdigit())
                .unwrap_or(rest.len());
            let bits = u64::from_str_radix(&rest[..m], 16).ok();
            self.pos += m;
            self.expect(")")?;
            return bits
                .and_then(from_bits)
                .ok_or_else(|| self.error_at(at, "bad NaN bits"));
        }
        parse(token).ok_or_else(|| self.error_at(at, format!("expected a number, found `{token}`")))
    }

    fn dtype(&mut self) -> Result<DType> {
        self.skip_ws();
        let at = self.pos;
        let w = self.word();
        DType::ALL
            .into_iter()
            .find(|d| d.to_string() == w)
            .ok_or_else(|| self.error_at(at, format!("expected an element type, found `{w}`")))
    }

    fn tensor_type(&mut self) -> Result<TensorType> {
        let dtype = self.dtype()?;
        let dims = self.list(Reader::uint)?;
        Ok(TensorType::new(dtype, dims))
    }

    /// `%i`.
    fn value(&mut self) -> Result<Value> {
        self.expect("%")?;
        let at = self.pos;
        let v = self.digits()?;
        u32::try_from(v)
            .map(|v| Value::from_index(v as usize))
            .map_err(|_| self.error_at(at, format!("value number {v} is too large")))
    }

    /// A graph name: bare, or quoted as Rust writes strings.
    fn name(&mut self) -> Result<String> {
        self.skip_ws();
        if !self.rest().starts_with('"') {
            let rest = self.rest();
            let n = rest.find(|c| !is_name_char(c)).unwrap_or(rest.len());
            if n == 0 {
                return Err(self.error(format!("expected a graph name, found {}", self.found())));
            }
            self.pos += n;
            return Ok(rest[..n].to_string());
        }
        self.pos += 1;
        let mut out = String::new();
        let mut chars = self.rest().char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => {
                    self.pos += i + 1;
                    return Ok(out);
                }
                '\\' => {
                    let Some((j, e)) = chars.next() else { break };
                    match e {
                        'n' => out.push('\n'),
                        'r' => out.push('\r'),
                        't' => out.push('\t'),
                        '0' => out.push('\0'),
                        '\\' | '"' | '\'' => out.push(e),
                        'u' => {
                            let rest = &self.rest()[j + 1..];
                            let c = rest
                                .strip_prefix('{')
                                .and_then(|r| r.split_once('}'))
                                .and_then(|(hex, _)| u32::from_str_radix(hex, 16).ok())
                                .and_then(char::from_u32);
                            let Some(c) = c else {
                                return Err(self.error_at(self.pos + j, "bad \\u escape"));
                            };
                            out.push(c);
                            for (_, c) in chars.by_ref() {
                                if c == '}' {
                                    break;
                                }
                            }
                        }
                        _ => return Err(self.error_at(self.pos + j, "unknown escape")),
                    }
                }
                c => out.push(c),
            }
        }
        Err(self.error_at(self.line.len(), "the quoted name is not closed"))
    }
}

/// `graph name(%p: type, ...) -> (%o, ...) {`: the name, the parameters (value number and
/// type) and the outputs.
type Header = (String, Vec<(Value, TensorType)>, Vec<Value>);

fn header(r: &mut Reader<'_>) -> Result<Header> {
    r.skip_ws();
    if r.word() != "graph" {
        r.pos = 0;
        return Err(r.error("expected `graph`: this is not Strata IR text"));
    }
    let name = r.name()?;
    r.expect("(")?;
    let mut params = Vec::new();
    if !r.eat(")") {
        loop {
            let v = r.value()?;
            r.expect(":")?;
            params.push((v, r.tensor_type()?));
            if r.eat(")") {
                break;
            }
            r.expect(",")?;
        }
    }
    r.expect("->")?;
    r.expect("(")?;
    let mut outputs = Vec::new();
    if !r.eat(")") {
        loop {
            outputs.push(r.value()?);
            if r.eat(")") {
                break;
            }
            r.expect(",")?;
        }
    }
    r.expect("{")?;
    if !r.at_end() {
        return Err(r.error(format!("unexpected {} after `{{`", r.found())));
    }
    Ok((name, params, outputs))
}

/// `%i = name(operands) attributes : type`.
fn node(r: &mut Reader<'_>) -> Result<(Value, Node)> {
    let v = r.value()?;
    r.expect("=")?;
    r.skip_ws();
    r.start = r.pos;
    let name = r.word();
    if name.is_empty() {
        return Err(r.error(format!("expected an op name, found {}", r.found())));
    }
    r.expect("(")?;
    let mut operands = Vec::new();
    if !r.eat(")") {
        loop {
            operands.push(r.value()?);
            if r.eat(")") {
                break;
            }
            r.expect(",")?;
        }
    }
    let after_operands = r.pos;
    // The type comes last but is read first: a constant's elements need it.
    let Some(colon) = r.line.rfind(" : ").filter(|&c| c >= r.pos) else {
        r.pos = r.end;
        return Err(r.error("expected ` : type` at the end of the node"));
    };
    let attrs_end = r.end;
    r.pos = colon + 3;
    let ty = r.tensor_type()?;
    if !r.at_end() {
        return Err(r.error(format!("unexpected {} after the type", r.found())));
    }
    r.pos = after_operands;
    r.end = colon;
    r.ty = Some(ty.clone());
    let op = Op::parse_text(name, &operands, r)?;
    if !r.at_end() {
        return Err(r.error(format!("unexpected {} in `{name}`", r.found())));
    }
    r.end = attrs_end;
    Ok((v, Node { op, ty }))
}

/// Reads a graph's text; `N` in it is `batch`. The graph is verified.
/// The lines of a text still to read, numbered from 1, blank ones skipped.
type Lines<'t, 'i> = &'i mut dyn Iterator<Item = (usize, &'t str)>;

fn eof(line_no: usize, message: &str) -> Error {
    Error::IrText {
        line: line_no,
        column: 1,
        message: message.into(),
    }
}

/// Reads a graph's text; `N` in it is `batch`. The graph is verified.
fn parse(text: &str, batch: Option<usize>) -> Result<Graph> {
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l))
        .filter(|(_, l)| !l.trim().is_empty());
    let last_line = text.lines().count() + 1;
    let Some(first) = lines.next() else {
        return Err(eof(1, "empty text: expected `graph name(...) -> (...) {`"));
    };
    let g = graph(&mut lines, first, batch, last_line, 0)?;
    if let Some((line_no, _)) = lines.next() {
        return Err(eof(line_no, "text after the graph's closing `}`"));
    }
    g.verify()?;
    Ok(g)
}

/// Whether a node's line starts a loop (`%i = while(`), which spans several lines.
fn is_loop(line: &str) -> bool {
    line.split_once(" = ")
        .is_some_and(|(_, rest)| rest.trim_start().starts_with("while("))
}

/// A loop's node: `%i = while(init) result=k cond={`, the condition's graph,
/// `} body={`, the body's graph, `} : type`; or, for a later sibling of a loop printed
/// before (`earlier`), `%i = while(init) result=k regions_of=%j : type`.
fn loop_node(
    lines: Lines<'_, '_>,
    (line_no, line): (usize, &str),
    batch: Option<usize>,
    last_line: usize,
    (earlier, depth): (&[(usize, Value, Node)], usize),
) -> Result<(Value, Node)> {
    let mut r = Reader::new(line, line_no, batch);
    let v = r.value()?;
    r.expect("=")?;
    r.expect("while")?;
    r.expect("(")?;
    let mut init = Vec::new();
    if !r.eat(")") {
        loop {
            init.push(r.value()?);
            if r.eat(")") {
                break;
            }
            r.expect(",")?;
        }
    }
    r.key("result")?;
    let result = r.uint()?;
    r.skip_ws();
    let at = r.pos;
    match r.word() {
        "regions_of" => {
            r.expect("=")?;
            let first = r.value()?;
            r.expect(":")?;
            let ty = r.tensor_type()?;
            if !r.at_end() {
                return Err(r.error(format!("unexpected {} after the type", r.found())));
            }
            let regions = earlier.iter().find_map(|(_, w, n)| match &n.op {
                Op::While {
                    cond, body, scan, ..
                } if *w == first => Some((cond, body, scan)),
                _ => None,
            });
            let Some((cond, body, scan)) = regions else {
                return Err(r.error(format!("{first} is not a loop printed before {v}")));
            };
            let op = Op::While {
                init,
                result,
                cond: cond.clone(),
                body: body.clone(),
                scan: scan.clone(),
            };
            Ok((v, Node { op, ty }))
        }
        "cond" => {
            r.expect("=")?;
            r.expect("{")?;
            if !r.at_end() {
                return Err(r.error(format!("unexpected {} after `cond={{`", r.found())));
            }
            let cond = region(lines, batch, last_line, depth + 1)?;
            let (line_no, line) = lines.next().ok_or_else(|| {
                eof(
                    last_line,
                    "the text ends inside a loop (expected `} body={`)",
                )
            })?;
            let mut r = Reader::new(line, line_no, batch);
            r.expect("}")?;
            r.key("body")?;
            r.expect("{")?;
            if !r.at_end() {
                return Err(r.error(format!("unexpected {} after `body={{`", r.found())));
            }
            let body = region(lines, batch, last_line, depth + 1)?;
            let (line_no, line) = lines.next().ok_or_else(|| {
                eof(
                    last_line,
                    "the text ends inside a loop (expected `} : type`)",
                )
            })?;
            let mut r = Reader::new(line, line_no, batch);
            r.expect("}")?;
            let mut scan = None;
            r.skip_ws();
            let at = r.pos;
            if r.word() == "scan" {
                r.key("carries")?;
                let carries = r.uint()?;
                r.key("reverse")?;
                let at = r.pos;
                let reverse = match r.word() {
                    "true" => true,
                    "false" => false,
                    _ => {
                        r.pos = at;
                        return Err(r.error(format!("expected true or false, found {}", r.found())));
                    }
                };
                r.key("step")?;
                r.expect("{")?;
                if !r.at_end() {
                    return Err(r.error(format!("unexpected {} after `step={{`", r.found())));
                }
                let step = region(lines, batch, last_line, depth + 1)?;
                scan = Some(ScanStep {
                    step: Region::new(step),
                    carries,
                    reverse,
                });
                let (line_no, line) = lines.next().ok_or_else(|| {
                    eof(
                        last_line,
                        "the text ends inside a loop (expected `} : type`)",
                    )
                })?;
                r = Reader::new(line, line_no, batch);
                r.expect("}")?;
            } else {
                r.pos = at;
            }
            r.expect(":")?;
            let ty = r.tensor_type()?;
            if !r.at_end() {
                return Err(r.error(format!("unexpected {} after the type", r.found())));
            }
            let op = Op::While {
                init,
                result,
                cond: Region::new(cond),
                body: Region::new(body),
                scan,
            };
            Ok((v, Node { op, ty }))
        }
        w => {
            r.pos = at;
            Err(r.error(format!(
                "expected `cond={{` or `regions_of=` after the loop's result, found `{w}`"
            )))
        }
    }
}

/// A region's graph, from the line after its `{`.
fn region(
    lines: Lines<'_, '_>,
    batch: Option<usize>,
    last_line: usize,
    depth: usize,
) -> Result<Graph> {
    let first = lines.next().ok_or_else(|| {
        eof(
            last_line,
            "the text ends inside a loop (expected a region's graph)",
        )
    })?;
    // Each level is a few frames of recursion: a text may not nest deeper than this.
    if depth > MAX_REGION_DEPTH {
        return Err(eof(
            first.0,
            &format!("loops nested more than {MAX_REGION_DEPTH} deep"),
        ));
    }
    graph(lines, first, batch, last_line, depth)
}

/// How deep loops may nest in a text that is read.
const MAX_REGION_DEPTH: usize = 64;

/// Reads one graph, from its header line to its closing `}` (a region's graph inside a
/// loop is read by the same function); not verified here.
fn graph(
    lines: Lines<'_, '_>,
    (line_no, first): (usize, &str),
    batch: Option<usize>,
    last_line: usize,
    depth: usize,
) -> Result<Graph> {
    let (name, params, outputs) = header(&mut Reader::new(first, line_no, batch))?;
    let mut body: Vec<(usize, Value, Node)> = Vec::new();
    let mut closed = false;
    while let Some((line_no, line)) = lines.next() {
        if line.trim() == "}" {
            closed = true;
            break;
        }
        let (v, n) = if is_loop(line) {
            loop_node(lines, (line_no, line), batch, last_line, (&body, depth))?
        } else {
            node(&mut Reader::new(line, line_no, batch))?
        };
        body.push((line_no, v, n));
    }
    if !closed {
        return Err(eof(
            last_line,
            "the text ends before the graph's closing `}` (truncated?)",
        ));
    }
    let total = params.len() + body.len();
    let mut nodes: Vec<Option<Node>> = vec![None; total];
    for (k, (v, ty)) in params.iter().enumerate() {
        let slot = nodes
            .get_mut(v.index())
            .filter(|s| s.is_none())
            .ok_or_else(|| {
                eof(
                    line_no,
                    &format!(
                        "parameter {k} is {v}: values must be numbered %0 to %{} once each",
                        total.saturating_sub(1)
                    ),
                )
            })?;
        *slot = Some(Node {
            op: Op::Parameter { index: k },
            ty: ty.clone(),
        });
    }
    let mut last: Option<Value> = None;
    for (line_no, v, n) in body {
        let bad = |m: String| Error::IrText {
            line: line_no,
            column: 1,
            message: m,
        };
        if last.is_some_and(|l| v <= l) {
            return Err(bad(format!(
                "{v} is out of order: nodes are numbered upwards"
            )));
        }
        last = Some(v);
        let slot = nodes
            .get_mut(v.index())
            .filter(|s| s.is_none())
            .ok_or_else(|| {
                bad(format!(
                    "{v} is numbered twice or out of range: the graph has {total} values"
                ))
            })?;
        *slot = Some(n);
    }
    // Every slot is filled: as many distinct numbers below `total` as there are slots.
    let nodes: Vec<Node> = nodes.into_iter().flatten().collect();
    let params = params.into_iter().map(|(v, _)| v).collect();
    Ok(Graph::from_parts(name, nodes, params, outputs))
}

impl Graph {
    /// Reads the text that `Display` prints back into the same graph, verified. Errors
    /// are [`Error::IrText`] (with the line and column) for text that is not IR text, and
    /// [`Error::Verify`] for a graph that is malformed.
    pub fn parse(text: &str) -> Result<Graph> {
        parse(text, None)
    }

    /// [`Graph::parse`] for a text written in terms of a batch size `N` (see the module
    /// docs), at batch size `batch`.
    pub fn parse_with_batch(text: &str, batch: usize) -> Result<Graph> {
        parse(text, Some(batch))
    }
}
