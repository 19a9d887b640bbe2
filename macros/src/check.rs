//! Meaning: every layer looked up in the catalogue (`strata_spec`), its arguments read
//! and checked, every layer's shape worked out from the one before. All mistakes of an
//! invocation are collected, each spanned on the user's token; a mistake makes the shapes
//! after it unknown rather than wrong, so it causes no further errors.

use crate::parse::{ArgSyntax, LayerSyntax, ModelSyntax, Value, ValueKind};
use crate::suggest::did_you_mean;
use crate::value::accept;
use proc_macro2::{Span, TokenStream};
use quote::ToTokens;
use std::collections::HashMap;
use strata_spec::{
    self as spec, ArgDef, ArgDefault, Args, Kind, LayerDef, Param, Shape, Val, COMMON,
};
use syn::spanned::Spanned;
use syn::{Attribute, Ident};

/// A model that passed every check: what `expand.rs` writes out.
pub struct Model {
    /// The declared input shape (`Input(...)` or `input_shape`); `None`: deferred.
    pub input: Option<Vec<usize>>,
    pub layers: Vec<Layer>,
    /// The graph form's calls (`None`: a stack, each layer called once in order).
    pub graph: Option<Graph>,
}

impl Model {
    /// Each output's shape (one for a stack).
    pub fn outputs(&self) -> Vec<Shape> {
        match &self.graph {
            Some(g) => g.outputs.iter().map(|&n| g.shape(n)).collect(),
            None => vec![self
                .layers
                .last()
                .map(|l| l.output.clone())
                .unwrap_or_else(Shape::unknown)],
        }
    }
}

/// A graph model's wiring, every shape known (it passed the checks).
pub struct Graph {
    pub inputs: Vec<GraphInput>,
    pub calls: Vec<CallNode>,
    pub outputs: Vec<Node>,
}

/// One `Input` of a graph model.
pub struct GraphInput {
    /// Its name in summaries and for data passed by name: the `name` given, else Keras'.
    pub name: String,
    /// Whether the name was given.
    pub named: bool,
    pub shape: Shape,
}

impl Graph {
    pub fn shape(&self, node: Node) -> Shape {
        match node {
            Node::Input(i) => self
                .inputs
                .get(i)
                .map_or_else(Shape::unknown, |i| i.shape.clone()),
            Node::Call(c, k) => self.calls[c]
                .outputs
                .get(k)
                .cloned()
                .unwrap_or_else(Shape::unknown),
        }
    }
}

/// A value of a graph model: one of its inputs, or output `k` of call `c` (`k` is 0 but
/// for a recurrent layer's states, `return_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Node {
    Input(usize),
    Call(usize, usize),
}

/// One call of a layer (`layer` indexes `Model::layers`).
pub struct CallNode {
    pub layer: usize,
    pub inputs: Vec<Node>,
    /// Called on a list (`Add()([a, b])`) rather than on one value.
    pub list: bool,
    /// Called through `Layer::call` on a slice of inputs (a list, or several by
    /// position), not through `Layer::forward` on one.
    pub many: bool,
    /// Every output's shape, in order: one for most layers, a recurrent layer's states
    /// after its output with `return_state` (the spec's `LayerDef::outputs`).
    pub outputs: Vec<Shape>,
}

pub struct Layer {
    pub def: &'static LayerDef,
    /// Keras' name: `dense`, `dense_1`, … or the `name` argument.
    pub name: String,
    pub args: Args,
    /// The call as written, normalised (`Dense(128, activation = relu)`), for docs.
    pub written: String,
    pub docs: Vec<Attribute>,
    pub input: Shape,
    pub output: Shape,
    /// The outputs after `output` (a recurrent layer's states, `return_state`): none
    /// for most layers, and in a stack.
    pub states: Vec<Shape>,
    pub params: Vec<Param>,
    /// `trainable = false`: frozen.
    pub frozen: bool,
    /// A layer of the user's own: its expression (`{ MyLayer::new(..) }`).
    pub custom: Option<TokenStream>,
}

/// A layer whose entry and arguments were read; `given` maps each argument the user
/// wrote to its tokens, so later errors can point at it.
pub(crate) struct Resolved<'s> {
    pub def: &'static LayerDef,
    pub syntax: &'s LayerSyntax,
    pub args: Args,
    pub given: Vec<(&'static str, &'s ArgSyntax)>,
    /// All arguments were read without error.
    pub ok: bool,
}

impl Resolved<'_> {
    /// Tokens of the argument `arg` if written, else of the whole layer.
    pub fn tokens(&self, arg: Option<&str>) -> TokenStream {
        arg.and_then(|a| self.given.iter().find(|(n, _)| *n == a))
            .map(|(_, s)| s.tokens.clone())
            .unwrap_or_else(|| self.syntax.tokens.clone())
    }

    /// Declared `trainable = false`.
    pub fn frozen(&self) -> bool {
        matches!(self.args.get("trainable"), Some(Val::Bool(false)))
    }

    pub fn written(&self) -> String {
        if let Some(expr) = &self.syntax.custom {
            return format!("{{ {expr} }}");
        }
        let parts: Vec<String> = self
            .given
            .iter()
            .map(|(name, a)| {
                let v = self
                    .args
                    .get(name)
                    .map(|v| v.to_string())
                    .unwrap_or_default();
                match a.keyword {
                    Some(_) => format!("{name} = {v}"),
                    None => v,
                }
            })
            .collect();
        format!("{}({})", self.def.class, parts.join(", "))
    }
}

#[derive(Default)]
pub(crate) struct Errors(pub Option<syn::Error>);

impl Errors {
    pub fn add(&mut self, e: syn::Error) {
        match &mut self.0 {
            Some(all) => all.combine(e),
            None => self.0 = Some(e),
        }
    }

    pub fn at(&mut self, tokens: impl ToTokens, message: impl std::fmt::Display) {
        self.add(syn::Error::new_spanned(tokens, message));
    }
}

/// Checks a parsed invocation; `Err` holds every mistake found, combined.
pub fn check(syntax: &ModelSyntax) -> Result<Model, syn::Error> {
    if let Some(graph) = &syntax.graph {
        return crate::check_graph::check_graph(graph);
    }
    let mut errors = Errors::default();
    let resolved: Vec<Option<Resolved>> = syntax
        .layers
        .iter()
        .map(|l| l.as_ref().and_then(|l| resolve(l, &mut errors)))
        .collect();
    let input = declared_input(&resolved, &mut errors);
    let layers: Vec<&Option<Resolved>> = resolved
        .iter()
        .filter(|r| !r.as_ref().is_some_and(|r| r.def.is_input()))
        .collect();
    if layers.is_empty() {
        let message =
            "a model needs at least one layer, e.g. `model![Input(784), Dense(10, softmax)]`";
        match syntax.layers.first().and_then(|l| l.as_ref()) {
            Some(first) => errors.at(&first.tokens, message),
            None if syntax.layers.is_empty() => {
                errors.add(syn::Error::new(Span::call_site(), message))
            }
            None => {}
        }
    }
    let names = names(&layers, &mut errors);

    let mut shape = match &input {
        Some(dims) => Shape::known(dims),
        None => Shape::unknown(),
    };
    // The layer that produced `shape`, for messages; `None`: the model's input.
    let mut previous: Option<String> = None;
    let mut out = Vec::new();
    for (i, (r, name)) in layers.iter().zip(&names).enumerate() {
        let Some(r) = r else {
            shape = Shape::unknown();
            continue;
        };
        let label = format!("`{name}` ({})", r.def.class);
        if r.def.takes_ids && i > 0 {
            let after = previous
                .as_ref()
                .map_or(String::new(), |p| format!("; here it follows {p}"));
            errors.at(
                &r.syntax.tokens,
                format!("{label} takes integer ids, so it must be the first layer{after}"),
            );
        }
        if !r.ok {
            shape = Shape::unknown();
            previous = Some(label);
            continue;
        }
        for e in (r.def.validate)(&r.args) {
            errors.at(r.tokens(Some(e.arg)), format!("{label}: {}", e.message));
        }
        let spec::Rule::One(rule) = r.def.shape else {
            // A layer of several inputs has none to take in a stack.
            errors.at(&r.syntax.tokens, in_a_stack(&label, r.def));
            shape = Shape::unknown();
            previous = Some(label);
            continue;
        };
        // Each layer of a stack feeds the next one value, as Keras' Sequential.
        let count = r.def.output_count(&r.args);
        if count > 1 {
            let at = match r.given.iter().any(|(n, _)| *n == "return_state") {
                true => r.tokens(Some("return_state")),
                false => r.tokens(Some("layer")),
            };
            errors.at(
                at,
                format!(
                    "{label} gives {count} outputs with `return_state` (its output and its \
                     states), and a stack passes one value from layer to layer: write a \
                     graph model, `let x = Input(..); let ({}) = {}(x); ...`",
                    tuple_names(r.def, count),
                    r.written()
                ),
            );
        }
        let output = match rule(&r.args, &shape) {
            Ok(s) => s,
            Err(e) => {
                let source = match &previous {
                    Some(p) => format!("{p} outputs {shape}"),
                    None => format!("the input is {shape}"),
                };
                errors.at(
                    r.tokens(e.arg()),
                    format!("{label} needs {}, but {source}", e.need()),
                );
                Shape::unknown()
            }
        };
        out.push(Layer {
            def: r.def,
            name: name.clone(),
            args: r.args.clone(),
            written: r.written(),
            docs: r.syntax.docs.clone(),
            params: (r.def.params)(&r.args, &shape),
            input: shape,
            output: output.clone(),
            states: Vec::new(),
            frozen: r.frozen(),
            custom: r.syntax.custom.clone(),
        });
        shape = output;
        previous = Some(label);
    }
    match errors.0 {
        Some(e) => Err(e),
        None => Ok(Model {
            input,
            layers: out,
            graph: None,
        }),
    }
}

/// A layer of the user's own (`{ MyLayer::new(..) }`): the macro knows nothing of its
/// shapes or parameters, so its output is unknown (the layers after it are checked
/// against their real input when the model is built) and it has no arguments.
pub(crate) static CUSTOM: LayerDef = LayerDef {
    class: "custom layer",
    aliases: &[],
    base_name: "custom",
    runtime: "Layer",
    args: &[],
    shape: spec::Rule::One(|_, _| Ok(Shape::unknown())),
    params: |_, _| Vec::new(),
    validate: |_| Vec::new(),
    takes_ids: false,
    states: |_| Vec::new(),
};

impl Layer {
    /// A layer of the user's own: its expression.
    pub fn custom(&self) -> Option<&TokenStream> {
        self.custom.as_ref()
    }
}

/// Names for a call's `count` outputs in Keras' order, for messages: `seq, h, c` for an
/// LSTM, `seq, h` for SimpleRNN and GRU, per direction for Bidirectional.
pub(crate) fn tuple_names(def: &LayerDef, count: usize) -> String {
    let names: &[&str] = match (def.class, count) {
        ("LSTM", 3) => &["y", "h", "c"],
        ("Bidirectional", 5) => &["y", "forward_h", "forward_c", "backward_h", "backward_c"],
        ("Bidirectional", 3) => &["y", "forward_h", "backward_h"],
        (_, 2) => &["y", "h"],
        _ => &[],
    };
    if names.is_empty() {
        let all: Vec<String> = (0..count).map(|k| format!("y{k}")).collect();
        return all.join(", ");
    }
    names.join(", ")
}

/// Why a layer of several inputs cannot be one of a stack's layers.
fn in_a_stack(label: &str, def: &LayerDef) -> String {
    match def.shape {
        spec::Rule::Positional { inputs, .. } => format!(
            "{label} takes several inputs ({}), so it belongs in a graph model: \
             `let y = {}(...)(x, x);`",
            inputs.join(", "),
            def.class
        ),
        _ => format!(
            "{label} merges a list of inputs, so it belongs in a graph model: \
             `let y = {}()([a, b]);`",
            def.class
        ),
    }
}

/// Looks the layer up and reads its arguments against its entry.
pub(crate) fn resolve<'s>(syntax: &'s LayerSyntax, errors: &mut Errors) -> Option<Resolved<'s>> {
    if syntax.custom.is_some() {
        return Some(Resolved {
            def: &CUSTOM,
            syntax,
            args: Args::default(),
            given: Vec::new(),
            ok: true,
        });
    }
    let written = syntax.name.to_string();
    let Some(def) = spec::layer(&written) else {
        let hint = match did_you_mean(&written, &spec::layer_names()) {
            Some(s) => format!("did you mean `{s}`?"),
            None => format!(
                "the layers model! knows are: {}; a layer of your own goes in braces: \
                 `{{ {written}::new(..) }}`",
                spec::LAYERS
                    .iter()
                    .map(|l| l.class)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        errors.at(&syntax.name, format!("unknown layer `{written}`; {hint}"));
        return None;
    };
    let all: Vec<&'static ArgDef> = if def.is_input() {
        // An input may be named (`Input(32, name = "left")`), as in Keras.
        def.args
            .iter()
            .chain(COMMON.iter().filter(|a| a.name == "name"))
            .collect()
    } else {
        def.args.iter().chain(COMMON).collect()
    };
    let positional: Vec<&'static ArgDef> = def.args.iter().filter(|a| a.positional).collect();
    let mut r = Resolved {
        def,
        syntax,
        args: Args::default(),
        given: Vec::new(),
        ok: syntax.complete,
    };
    let mut next_positional = 0;
    let mut keyword_seen = false;
    // Positional arguments beyond the entry's: one error covering all of them.
    let mut extra = TokenStream::new();
    for a in &syntax.args {
        let arg_def = match &a.keyword {
            None if keyword_seen => {
                errors.at(&a.tokens, "positional argument after keyword arguments");
                r.ok = false;
                continue;
            }
            None => {
                let Some(d) = positional.get(next_positional) else {
                    extra.extend(a.tokens.clone());
                    r.ok = false;
                    continue;
                };
                next_positional += 1;
                *d
            }
            Some(k) => {
                keyword_seen = true;
                let key = k.to_string();
                let Some(d) = all.iter().find(|d| d.name == key) else {
                    let names: Vec<&str> = all.iter().map(|d| d.name).collect();
                    let hint = match did_you_mean(&key, &names) {
                        Some(s) => format!("did you mean `{s}`?"),
                        None => format!("its arguments are: {}", names.join(", ")),
                    };
                    errors.at(
                        k,
                        format!("`{}` has no argument `{key}`; {hint}", def.class),
                    );
                    r.ok = false;
                    continue;
                };
                *d
            }
        };
        if r.given.iter().any(|(n, _)| *n == arg_def.name) {
            errors.at(&a.tokens, format!("`{}` is given twice", arg_def.name));
            r.ok = false;
            continue;
        }
        r.given.push((arg_def.name, a));
        if arg_def.kind == Kind::Layer {
            match wrapped(&a.value, arg_def.name, errors) {
                Some(v) => r.args.insert(arg_def.name, v),
                None => r.ok = false,
            }
            continue;
        }
        match accept(arg_def.kind, &a.value, arg_def.name) {
            Ok(v) => r.args.insert(arg_def.name, v),
            Err(e) if a.keyword.is_none() => {
                // Keras' positional order is not the one people remember
                // (`Conv2D(32, (3, 3), "relu")` gives `strides` "relu"): say which
                // parameter the position is, and the keyword the value fits.
                let fits = def.args.iter().find(|d| {
                    d.name != arg_def.name
                        && !syntax
                            .args
                            .iter()
                            .any(|b| b.keyword.as_ref().is_some_and(|k| k == d.name))
                        && accept(d.kind, &a.value, d.name).is_ok()
                });
                match fits {
                    Some(d) => errors.at(
                        &a.tokens,
                        format!(
                            "{e}; positional argument {} of `{}` is `{}`: did you mean `{} = {}`?",
                            next_positional, def.class, arg_def.name, d.name, a.value.tokens
                        ),
                    ),
                    None => errors.add(e),
                }
                r.ok = false;
            }
            Err(e) => {
                errors.add(e);
                r.ok = false;
            }
        }
    }
    if !extra.is_empty() {
        errors.at(extra, extra_message(def, &positional));
    }
    for d in all {
        if r.given.iter().any(|(n, _)| *n == d.name) {
            continue;
        }
        match d.default {
            ArgDefault::Required => {
                // An unparsable argument may have been the missing one: say nothing more.
                if syntax.complete {
                    let names: Vec<&str> = def.args.iter().map(|d| d.name).collect();
                    errors.at(
                        &syntax.tokens,
                        format!(
                            "`{}` is missing its argument `{}` (its arguments: {})",
                            def.class,
                            d.name,
                            names.join(", ")
                        ),
                    );
                }
                r.ok = false;
            }
            ArgDefault::Is(text) => match default_value(d, text) {
                Ok(v) => r.args.insert(d.name, v),
                Err(e) => {
                    errors.add(e);
                    r.ok = false;
                }
            },
            ArgDefault::Absent => {}
        }
    }
    Some(r)
}

/// A wrapper's layer (`Bidirectional(LSTM(8))`, or `TimeDistributed(Flatten)` without
/// arguments), resolved against its own entry and checked by its own rules, its mistakes
/// spanned on its own tokens; `None` when it has any (they are reported).
fn wrapped(value: &Value, arg: &str, errors: &mut Errors) -> Option<Val> {
    let bare;
    let syntax = match &value.kind {
        ValueKind::Layer(l) => &**l,
        ValueKind::Name(n) if spec::layer(n).is_some() => {
            bare = LayerSyntax {
                docs: Vec::new(),
                name: Ident::new(n, value.tokens.span()),
                args: Vec::new(),
                complete: true,
                tokens: value.tokens.clone(),
                custom: None,
            };
            &bare
        }
        _ => {
            // The catalogue's classes start with a capital; suggest one for a near miss.
            let written = value.tokens.to_string();
            let hint = match did_you_mean(&written, &spec::layer_names()) {
                Some(s) => format!("; did you mean `{s}`?"),
                None => String::new(),
            };
            errors.at(
                value,
                format!("`{arg}` must be a layer, such as `LSTM(8)`, found `{written}`{hint}"),
            );
            return None;
        }
    };
    let r = resolve(syntax, errors)?;
    let mut ok = r.ok;
    for (name, given) in &r.given {
        if matches!(*name, "input_shape" | "trainable") {
            errors.at(
                &given.tokens,
                format!("`{name}` belongs on the wrapper, not on the layer it wraps"),
            );
            ok = false;
        }
    }
    if !ok {
        return None;
    }
    let mut valid = true;
    for e in (r.def.validate)(&r.args) {
        errors.at(
            r.tokens(Some(e.arg)),
            format!("{} (in `{arg}`): {}", r.def.class, e.message),
        );
        valid = false;
    }
    valid.then(|| {
        Val::Layer(Box::new(spec::Wrapped {
            def: r.def,
            args: r.args,
        }))
    })
}

/// The default of `d`, read by the same code as a user's value.
fn default_value(d: &ArgDef, text: &str) -> syn::Result<Val> {
    let value = syn::parse_str::<Value>(text)?;
    accept(d.kind, &value, d.name)
}

fn extra_message(def: &LayerDef, positional: &[&ArgDef]) -> String {
    let names: Vec<&str> = positional.iter().map(|d| d.name).collect();
    let mut m = format!(
        "extra argument: `{}` takes at most {} positional argument{} ({})",
        def.class,
        names.len(),
        if names.len() == 1 { "" } else { "s" },
        names.join(", ")
    );
    if def.is_input() {
        m += "; write a shape of several axes as a tuple, e.g. `Input((28, 28, 1))`";
    }
    m
}

/// The input shape declared by a leading `Input(...)` or by `input_shape` on the first
/// layer, with the errors for either written anywhere else, or both.
fn declared_input(resolved: &[Option<Resolved>], errors: &mut Errors) -> Option<Vec<usize>> {
    let mut input: Option<(Vec<usize>, &str)> = None;
    let mut first_layer = true;
    for (i, r) in resolved.iter().enumerate() {
        let Some(r) = r else {
            first_layer = false;
            continue;
        };
        if r.def.is_input() {
            if i > 0 {
                errors.at(
                    &r.syntax.tokens,
                    "`Input` declares the model's input, so it must come first",
                );
            } else if let Some(shape) = r.args.shape("shape").filter(|_| r.ok) {
                // A malformed `Input` declares nothing: the shapes after it are unknown
                // rather than read from its first argument.
                input = Some((shape.to_vec(), "Input(...)"));
            }
            continue;
        }
        if let Some(shape) = r.args.shape("input_shape") {
            let tokens = r.tokens(Some("input_shape"));
            if !first_layer {
                errors.at(
                    tokens,
                    "`input_shape` declares the model's input, so it only belongs on the first layer",
                );
            } else if let Some((_, by)) = &input {
                errors.at(
                    tokens,
                    format!("the input shape is declared twice: by {by} and by `input_shape`"),
                );
            } else {
                input = Some((shape.to_vec(), "input_shape"));
            }
        }
        first_layer = false;
    }
    input.map(|(shape, _)| shape)
}

/// Keras' layer names: `name = "..."` where given (unique), else the class' base name
/// numbered per class (`dense`, `dense_1`, …), skipping names already taken.
pub(crate) fn names(layers: &[&Option<Resolved>], errors: &mut Errors) -> Vec<String> {
    let explicit = |r: &Resolved| match r.args.get("name") {
        Some(Val::Name(n)) => Some(n.clone()),
        _ => None,
    };
    let mut taken: Vec<String> = Vec::new();
    for r in layers.iter().filter_map(|r| r.as_ref()) {
        if let Some(n) = explicit(r) {
            if taken.contains(&n) {
                errors.at(
                    r.tokens(Some("name")),
                    format!("two layers are named `{n}`; layer names must be unique"),
                );
            }
            taken.push(n);
        }
    }
    let mut counters: HashMap<&str, usize> = HashMap::new();
    layers
        .iter()
        .map(|r| {
            let Some(r) = r else {
                return String::new();
            };
            if let Some(n) = explicit(r) {
                return n;
            }
            let base = r.def.base_name;
            let i = counters.entry(base).or_insert(0);
            loop {
                let candidate = if *i == 0 {
                    base.to_string()
                } else {
                    format!("{base}_{i}")
                };
                *i += 1;
                if !taken.contains(&candidate) {
                    taken.push(candidate.clone());
                    return candidate;
                }
            }
        })
        .collect()
}
