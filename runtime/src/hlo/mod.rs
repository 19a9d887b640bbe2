//! The StableHLO vocabulary: the textual forms (types, attributes, literals, regions) that
//! op lowerings are written in, and a writer that hands out fresh SSA names. It knows no
//! graph; `ops` binds it to one and `backend::pjrt` prints whole modules with it.

use crate::types::DType;
use crate::Tensor;
use std::fmt::Write;

/// A function body being written: instruction lines and fresh SSA names.
#[derive(Debug, Default)]
pub(crate) struct Writer {
    body: String,
    next: usize,
}

impl Writer {
    /// The instructions written so far.
    pub fn body(&self) -> &str {
        &self.body
    }

    /// A new SSA name, for results and region arguments.
    pub fn fresh(&mut self) -> String {
        let n = format!("%{}", self.next);
        self.next += 1;
        n
    }

    /// Writes `%new = <rhs>` and returns `%new`. `rhs` may span lines (regions).
    pub fn emit(&mut self, rhs: impl AsRef<str>) -> String {
        let name = self.fresh();
        let _ = writeln!(self.body, "    {name} = {}", rhs.as_ref());
        name
    }

    /// Writes `%new:n = <rhs>` (an op with `n` results, each then `%new#i`) and returns
    /// `%new`.
    pub fn emit_results(&mut self, n: usize, rhs: impl AsRef<str>) -> String {
        let name = self.fresh();
        let _ = writeln!(self.body, "    {name}:{n} = {}", rhs.as_ref());
        name
    }

    /// The number the next fresh name gets: a nested writer (a region's) continues from
    /// here, and this one from where it ended, so no name is defined twice.
    pub fn next_name(&self) -> usize {
        self.next
    }

    pub fn set_next_name(&mut self, next: usize) {
        self.next = next;
    }

    /// `stablehlo.<op> x : ty` for an elementwise function of one operand.
    pub fn unary(&mut self, op: &str, x: &str, ty: &str) -> String {
        self.emit(format!("stablehlo.{op} {x} : {ty}"))
    }

    /// `stablehlo.<op> a, b : ty` for an elementwise function of two operands.
    pub fn binary(&mut self, op: &str, a: &str, b: &str, ty: &str) -> String {
        self.emit(format!("stablehlo.{op} {a}, {b} : {ty}"))
    }

    /// A constant of type `ty` with every element `literal` (as [`scalar_literal`] spells it).
    pub fn splat(&mut self, literal: &str, ty: &str) -> String {
        self.emit(format!("stablehlo.constant dense<{literal}> : {ty}"))
    }

    /// `stablehlo.convert x : (from) -> to`.
    pub fn convert(&mut self, x: &str, from: &str, to: &str) -> String {
        self.emit(format!("stablehlo.convert {x} : ({from}) -> {to}"))
    }

    /// `stablehlo.reshape x : (from) -> to`.
    pub fn reshape(&mut self, x: &str, from: &str, to: &str) -> String {
        self.emit(format!("stablehlo.reshape {x} : ({from}) -> {to}"))
    }

    /// `maximum`/`minimum` whose result is NaN when either operand is (the first's NaN
    /// when both are), as the native kernels. XLA's CPU compiler otherwise lowers them to
    /// the processor's min/max instructions, which return the second operand when one is
    /// NaN (measured: `maximum(1, NaN)` gave 1).
    pub fn nan_min_max(&mut self, op: &str, a: &str, b: &str, ty: &str, bool_ty: &str) -> String {
        let lines = nan_min_max_lines(op, a, b, ty, bool_ty, || self.fresh());
        let (text, result) = lines;
        for line in text {
            let _ = writeln!(self.body, "    {line}");
        }
        result
    }

    /// A region `({ ^bb0(a, b): r = <op> a, b; return r })` combining two scalars of type
    /// `scalar_ty`, for reductions, scatters and collectives. With `nan_propagating`,
    /// `maximum`/`minimum` are the NaN-propagating ones of [`Emitter::nan_min_max`].
    pub fn combiner(&mut self, op: &str, scalar_ty: &str, nan_propagating: bool) -> String {
        let (a, b) = (self.fresh(), self.fresh());
        let (lines, r) = if nan_propagating && (op == "maximum" || op == "minimum") {
            nan_min_max_lines(op, &a, &b, scalar_ty, "tensor<i1>", || self.fresh())
        } else {
            let r = self.fresh();
            (
                vec![format!("{r} = stablehlo.{op} {a}, {b} : {scalar_ty}")],
                r,
            )
        };
        let mut s = format!("{{\n    ^bb0({a}: {scalar_ty}, {b}: {scalar_ty}):\n");
        for line in lines {
            let _ = writeln!(s, "      {line}");
        }
        let _ = write!(s, "      stablehlo.return {r} : {scalar_ty}\n    }}");
        s
    }

    /// A region returning `compare <dir>, a, b` over two scalars (select_and_scatter's).
    pub fn comparator(&mut self, dir: &str, cmp_type: &str, scalar_ty: &str) -> String {
        let (a, b, r) = (self.fresh(), self.fresh(), self.fresh());
        format!(
            "{{\n    ^bb0({a}: {scalar_ty}, {b}: {scalar_ty}):\n      {r} = stablehlo.compare {dir}, {a}, {b}, {cmp_type} : ({scalar_ty}, {scalar_ty}) -> tensor<i1>\n      stablehlo.return {r} : tensor<i1>\n    }}"
        )
    }
}

/// The instructions of a NaN-propagating `maximum`/`minimum`, and the result's name.
fn nan_min_max_lines(
    op: &str,
    a: &str,
    b: &str,
    ty: &str,
    bool_ty: &str,
    mut fresh: impl FnMut() -> String,
) -> (Vec<String>, String) {
    // Named in the order the lines define them, for a readable dump.
    let (m, nb, t, na, r) = (fresh(), fresh(), fresh(), fresh(), fresh());
    let lines = vec![
        format!("{m} = stablehlo.{op} {a}, {b} : {ty}"),
        format!("{nb} = stablehlo.compare NE, {b}, {b}, FLOAT : ({ty}, {ty}) -> {bool_ty}"),
        format!("{t} = stablehlo.select {nb}, {b}, {m} : ({bool_ty}, {ty}, {ty}) -> {ty}"),
        format!("{na} = stablehlo.compare NE, {a}, {a}, FLOAT : ({ty}, {ty}) -> {bool_ty}"),
        format!("{r} = stablehlo.select {na}, {a}, {t} : ({bool_ty}, {ty}, {ty}) -> {ty}"),
    ];
    (lines, r)
}

/// `tensor<AxBxT>` for an element type spelled `elem` (which may be one the IR lacks,
/// such as `ui32`).
pub(crate) fn tensor_type(elem: &str, dims: &[usize]) -> String {
    let mut s = String::from("tensor<");
    for d in dims {
        let _ = write!(s, "{d}x");
    }
    s.push_str(elem);
    s.push('>');
    s
}

/// `[a, b, c]`.
pub(crate) fn list<T: std::fmt::Display>(xs: &[T]) -> String {
    let items: Vec<String> = xs.iter().map(|x| x.to_string()).collect();
    format!("[{}]", items.join(", "))
}

/// `array<i64: a, b>` (an empty one is `array<i64>`).
pub(crate) fn i64_array<T: std::fmt::Display>(xs: &[T]) -> String {
    if xs.is_empty() {
        return "array<i64>".into();
    }
    let items: Vec<String> = xs.iter().map(|x| x.to_string()).collect();
    format!("array<i64: {}>", items.join(", "))
}

/// `dense<[[lo, hi], ...]> : tensor<Nx2xi64>`, the padding attribute of windowed ops.
pub(crate) fn padding_attr(pads: &[(i64, i64)]) -> String {
    let rows: Vec<String> = pads.iter().map(|(l, h)| format!("[{l}, {h}]")).collect();
    if pads.is_empty() {
        return "dense<> : tensor<0x2xi64>".into();
    }
    format!(
        "dense<[{}]> : tensor<{}x2xi64>",
        rows.join(", "),
        pads.len()
    )
}

/// The comparison type `stablehlo.compare` needs for an element type.
pub(crate) fn compare_type(d: DType) -> &'static str {
    match d {
        DType::F32 | DType::F64 | DType::BF16 => "FLOAT",
        DType::I32 | DType::I64 => "SIGNED",
        DType::Bool => "UNSIGNED",
    }
}

/// One element of type `d` as an MLIR literal: floats as their exact bit pattern in hex
/// (decimal text would round, and has no NaN), integers in decimal, bools as words.
pub(crate) fn scalar_literal(d: DType, v: f64) -> String {
    match d {
        DType::F32 => format!("0x{:08X}", (v as f32).to_bits()),
        DType::F64 => format!("0x{:016X}", v.to_bits()),
        DType::BF16 => format!("0x{:04X}", half::bf16::from_f64(v).to_bits()),
        DType::I32 | DType::I64 => format!("{}", v as i64),
        DType::Bool => (v != 0.0).to_string(),
    }
}

/// The `dense<...>` literal of a whole tensor: the raw little-endian bytes in hex for
/// numbers (exact, compact), nested lists for bools and for empty tensors.
pub(crate) fn tensor_literal(t: &Tensor) -> String {
    fn hex<T: Copy, const N: usize>(
        xs: impl Iterator<Item = T>,
        le: impl Fn(T) -> [u8; N],
    ) -> String {
        let mut s = String::from("dense<\"0x");
        for x in xs {
            for b in le(x) {
                let _ = write!(s, "{b:02X}");
            }
        }
        s.push_str("\">");
        s
    }
    if t.numel() == 0 {
        return format!("dense<{}>", nested(&[], t.dims()));
    }
    match t {
        Tensor::F32(a) => hex(a.iter().copied(), f32::to_le_bytes),
        Tensor::F64(a) => hex(a.iter().copied(), f64::to_le_bytes),
        Tensor::BF16(a) => hex(a.iter().copied(), |v| v.to_bits().to_le_bytes()),
        Tensor::I32(a) => hex(a.iter().copied(), i32::to_le_bytes),
        Tensor::I64(a) => hex(a.iter().copied(), i64::to_le_bytes),
        Tensor::Bool(a) => {
            let flat: Vec<String> = a.iter().map(|b| b.to_string()).collect();
            format!("dense<{}>", nested(&flat, a.shape()))
        }
    }
}

/// Row-major items as nested lists following `dims` (the single item for a scalar).
fn nested(flat: &[String], dims: &[usize]) -> String {
    match dims.split_first() {
        None => flat.first().cloned().unwrap_or_default(),
        Some((&n, rest)) => {
            let inner: usize = rest.iter().product();
            let parts: Vec<String> = (0..n)
                .map(|i| nested(flat.get(i * inner..(i + 1) * inner).unwrap_or(&[]), rest))
                .collect();
            format!("[{}]", parts.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_are_exact() {
        assert_eq!(scalar_literal(DType::F32, 1.0), "0x3F800000");
        assert_eq!(scalar_literal(DType::F32, f64::NEG_INFINITY), "0xFF800000");
        assert_eq!(scalar_literal(DType::I64, -3.0), "-3");
        let t = Tensor::from_vec(&[2], vec![1.5f32, -2.0]).unwrap();
        assert_eq!(tensor_literal(&t), "dense<\"0x0000C03F000000C0\">");
        let b = Tensor::from_vec(&[2, 2], vec![true, false, false, true]).unwrap();
        assert_eq!(tensor_literal(&b), "dense<[[true, false], [false, true]]>");
    }
}
