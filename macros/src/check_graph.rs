//! Meaning of the graph form: every binding resolved, every layer looked up and named as
//! Keras names them (in the order they appear), every call's shapes worked out from its
//! inputs'. All mistakes of an invocation are collected, each spanned on the user's
//! tokens; a value that could not be computed is unknown afterwards, so it causes no
//! further errors.

use crate::check::{
    names, resolve, CallNode, Errors, Graph, GraphInput, Layer, Model, Node, Resolved,
};
use crate::parse_graph::{Binding, CallArgs, Expr, GraphSyntax, Pattern};
use crate::suggest::did_you_mean;
use proc_macro2::TokenStream;
use quote::ToTokens;
use strata_spec::{CallError, LayerDef, MergeError, Shape, Val};

/// What a name is bound to.
#[derive(Clone, Copy)]
enum Bound {
    /// A value; `None` when it could not be computed (its mistake is reported).
    Value(Option<Node>),
    /// A layer not yet called (`let enc = Dense(16)`): an index into the layers.
    Layer(Option<usize>),
}

struct Scope<'s> {
    /// The layers in the order they appear, each resolved (`None`: unknown layer).
    resolved: Vec<Option<Resolved<'s>>>,
    names: Vec<String>,
    /// The next layer expression's index into `resolved` (the walk meets them in the order
    /// `collect_layers` listed them).
    next: usize,
    /// Each layer's first call's input shapes, once called.
    first_call: Vec<Option<Vec<Shape>>>,
    /// `(name, bound, used)`, the latest binding of a name last.
    bindings: Vec<(String, Bound, bool, TokenStream)>,
    calls: Vec<CallNode>,
    /// Each `Input`: its shape, its `name` when given, its tokens.
    inputs: Vec<(Shape, Option<String>, TokenStream)>,
    /// A name was not found: what the user meant to use is unknown, so nothing is
    /// reported as unused.
    unresolved: bool,
    /// The `///` lines above the binding that creates each layer.
    docs: Vec<Vec<syn::Attribute>>,
    errors: Errors,
}

pub fn check_graph(g: &GraphSyntax) -> Result<Model, syn::Error> {
    let mut layer_syntax = Vec::new();
    for b in &g.bindings {
        collect_layers(&b.expr, &mut layer_syntax);
    }
    if let Some(out) = &g.output {
        collect_layers(out, &mut layer_syntax);
    }
    let mut errors = Errors::default();
    let resolved: Vec<Option<Resolved>> = layer_syntax
        .iter()
        .map(|l| resolve(l, &mut errors))
        .collect();
    let refs: Vec<&Option<Resolved>> = resolved
        .iter()
        .filter(|r| !r.as_ref().is_some_and(|r| r.def.is_input()))
        .collect();
    let layer_names = names(&refs, &mut errors);
    // Names by position in `resolved` (inputs have none).
    let mut names_at = Vec::new();
    let mut k = 0;
    for r in &resolved {
        if r.as_ref().is_some_and(|r| r.def.is_input()) {
            names_at.push(String::new());
        } else {
            names_at.push(layer_names[k].clone());
            k += 1;
        }
    }
    let count = resolved.len();
    let mut s = Scope {
        resolved,
        names: names_at,
        next: 0,
        first_call: vec![None; count],
        bindings: Vec::new(),
        calls: Vec::new(),
        inputs: Vec::new(),
        unresolved: false,
        docs: vec![Vec::new(); count],
        errors,
    };
    for b in &g.bindings {
        s.bind(b);
    }
    // Several outputs are a tuple, as a Keras model's list of outputs.
    let outputs: Option<Vec<Node>> = match &g.output {
        Some(Expr::Tuple(items, tokens)) => {
            let values: Vec<Option<Node>> = items.iter().map(|i| s.value(i)).collect();
            if items.is_empty() {
                s.errors
                    .at(tokens, "a model needs at least one output: `(a, b)` or `a`");
            }
            values.into_iter().collect()
        }
        Some(e) => s.value(e).map(|n| vec![n]),
        None => None,
    };
    // Without an output (or after an unknown name) every binding would look unused.
    let no_outputs = matches!(&g.output, Some(Expr::Tuple(items, _)) if items.is_empty());
    if g.output.is_some() && !no_outputs && !s.unresolved {
        s.unused();
    }
    s.check_input_names(&layer_names);
    if s.inputs.is_empty() {
        s.errors.add(syn::Error::new(
            proc_macro2::Span::call_site(),
            "a graph model declares its input first: `let x = Input(784);`",
        ));
    }
    if let Some(e) = s.errors.0.take() {
        return Err(e);
    }
    // Without an output the parser has reported why, and its error keeps this model from
    // being expanded: the input stands in, so that error is not said twice.
    Ok(s.finish(outputs.unwrap_or_else(|| vec![Node::Input(0)])))
}

/// Every layer expression in `e`, in the order `Scope::value` meets them.
fn collect_layers<'s>(e: &'s Expr, out: &mut Vec<&'s crate::parse::LayerSyntax>) {
    match e {
        Expr::Layer(l) => out.push(l),
        Expr::Name(_) => {}
        Expr::Call { callee, args, .. } => {
            collect_layers(callee, out);
            match args {
                CallArgs::Positional(items, keywords) => {
                    for i in items {
                        collect_layers(i, out);
                    }
                    for k in keywords {
                        collect_layers(&k.value, out);
                    }
                }
                CallArgs::List(items, _) => {
                    for i in items {
                        collect_layers(i, out);
                    }
                }
            }
        }
        Expr::Tuple(items, _) => {
            for i in items {
                collect_layers(i, out);
            }
        }
    }
}

impl<'s> Scope<'s> {
    fn bind(&mut self, b: &Binding) {
        // The docs belong to the layer the binding creates (`let enc = Dense(16)` or
        // `let h = Dense(16)(x)`), the first one met.
        if head_is_layer(&b.expr) {
            if let Some(d) = self.docs.get_mut(self.next) {
                *d = b.docs.clone();
            }
        }
        if let Pattern::Tuple(names, tokens) = &b.pattern {
            let bound = self.bind_outputs(names, tokens, &b.expr);
            for (name, bound) in names.iter().zip(bound) {
                self.bindings
                    .push((name.to_string(), bound, false, name.to_token_stream()));
            }
            return;
        }
        let bound = match &b.expr {
            Expr::Layer(l) => {
                let i = self.next;
                self.next += 1;
                match &self.resolved[i] {
                    Some(r) if r.def.is_input() => Bound::Value(self.declare_input(i, l)),
                    Some(_) => Bound::Layer(Some(i)),
                    None => Bound::Layer(None),
                }
            }
            Expr::Name(n) => self.lookup(n),
            e => Bound::Value(self.value(e)),
        };
        for name in b.pattern.names() {
            self.bindings
                .push((name.to_string(), bound, false, name.to_token_stream()));
        }
    }

    /// `let (a, b, ...) = call;`: each name bound to one of the call's outputs, in order;
    /// all unknown after a mistake (reported: the count differs, or the expression is no
    /// call).
    fn bind_outputs(
        &mut self,
        names: &[syn::Ident],
        pattern: &TokenStream,
        e: &Expr,
    ) -> Vec<Bound> {
        let unknown = vec![Bound::Value(None); names.len()];
        let Expr::Call { .. } = e else {
            // Still walked, so its own mistakes are reported and its layers counted.
            if let Expr::Layer(_) = e {
                self.next += 1;
            } else if let Expr::Name(n) = e {
                self.lookup(n);
            } else {
                self.value(e);
            }
            self.errors.at(
                pattern,
                "a tuple of names binds the outputs of a layer call with several, e.g. \
                 `let (y, h, c) = LSTM(8, return_state = true)(x);`",
            );
            return unknown;
        };
        let Some((c, outputs)) = self.call_value(e) else {
            return unknown;
        };
        if outputs.len() == names.len() {
            return (0..outputs.len())
                .map(|k| Bound::Value(Some(Node::Call(c, k))))
                .collect();
        }
        let label = self.call_label(c);
        let gives = match outputs.len() {
            1 => format!("gives one output, {}: bind it to one name", outputs[0]),
            n => format!("gives {n} outputs: {}", listed(&outputs)),
        };
        self.errors.at(
            pattern,
            format!(
                "`{}` binds {} names, but {label} {gives}",
                written(pattern),
                names.len()
            ),
        );
        unknown
    }

    /// `` `lstm` (LSTM) ``: the layer of call `c`, for messages.
    fn call_label(&self, c: usize) -> String {
        let layer = self.calls[c].layer;
        let class = self.resolved[layer].as_ref().map_or("?", |r| r.def.class);
        format!("`{}` ({class})", self.names[layer])
    }

    /// A call's index among the calls and its outputs' shapes; `None` when unknown (a
    /// mistake, reported).
    fn call_value(&mut self, e: &Expr) -> Option<(usize, Vec<Shape>)> {
        match self.value_of(e)? {
            Node::Call(c, _) => Some((c, self.calls[c].outputs.clone())),
            Node::Input(_) => None,
        }
    }

    /// The one value `e` computes; `None` when unknown (a mistake, reported). A call of
    /// several outputs is one: each must be bound to a name of its own.
    fn value(&mut self, e: &Expr) -> Option<Node> {
        let node = self.value_of(e)?;
        let Node::Call(c, _) = node else {
            return Some(node);
        };
        let outputs = self.calls[c].outputs.clone();
        if outputs.len() == 1 || !matches!(e, Expr::Call { .. }) {
            return Some(node);
        }
        let label = self.call_label(c);
        let def = self.resolved[self.calls[c].layer].as_ref().map(|r| r.def)?;
        self.errors.at(
            e.tokens(),
            format!(
                "{label} gives {} outputs, its output then its states (`return_state`): \
                 {}; bind each to a name, `let ({}) = ...;`",
                outputs.len(),
                listed(&outputs),
                crate::check::tuple_names(def, outputs.len())
            ),
        );
        None
    }

    fn declare_input(&mut self, i: usize, l: &crate::parse::LayerSyntax) -> Option<Node> {
        let r = self.resolved[i].as_ref()?;
        let shape = r.args.shape("shape").filter(|_| r.ok)?;
        let name = match r.args.get("name") {
            Some(Val::Name(n)) => Some(n.clone()),
            _ => None,
        };
        self.inputs
            .push((Shape::known(shape), name, l.tokens.clone()));
        Some(Node::Input(self.inputs.len() - 1))
    }

    /// Data is passed to a model with several inputs by their names (as in Keras), and a
    /// summary names each: two inputs, or an input and a layer, cannot share one.
    fn check_input_names(&mut self, layer_names: &[String]) {
        let names = input_names(&self.inputs);
        let mut found = Vec::new();
        for (k, (_, _, tokens)) in self.inputs.iter().enumerate() {
            let name = &names[k];
            if names[..k].contains(name) {
                found.push((tokens.clone(), format!("two inputs are named `{name}`")));
            } else if layer_names.contains(name) {
                found.push((
                    tokens.clone(),
                    format!("the input `{name}` has the name of a layer; names must be unique"),
                ));
            }
        }
        for (tokens, message) in found {
            self.errors.at(tokens, message);
        }
    }

    /// The latest binding of `n`, marked used; an unknown name is reported.
    fn lookup(&mut self, n: &syn::Ident) -> Bound {
        let key = n.to_string();
        if let Some(b) = self.bindings.iter_mut().rev().find(|b| b.0 == key) {
            b.2 = true;
            return b.1;
        }
        let known: Vec<&str> = self.bindings.iter().map(|b| b.0.as_str()).collect();
        let hint = match did_you_mean(&key, &known) {
            Some(s) => format!("; did you mean `{s}`?"),
            None if known.is_empty() => String::new(),
            None => format!("; bound so far: {}", known.join(", ")),
        };
        self.errors
            .at(n, format!("`{key}` is not bound in this model{hint}"));
        self.unresolved = true;
        Bound::Value(None)
    }

    /// The value `e` computes (a call's first output); `None` when unknown (a mistake,
    /// reported).
    fn value_of(&mut self, e: &Expr) -> Option<Node> {
        match e {
            Expr::Name(n) => match self.lookup(n) {
                Bound::Value(v) => v,
                Bound::Layer(_) => {
                    self.errors.at(
                        n,
                        format!("`{n}` is a layer, not a value: call it on one, e.g. `{n}(x)`"),
                    );
                    None
                }
            },
            Expr::Layer(l) => {
                self.next += 1;
                self.errors.at(
                    &l.tokens,
                    format!(
                        "a layer is not a value: call it on its input, e.g. `{}(...)(x)`",
                        l.name
                    ),
                );
                None
            }
            Expr::Tuple(_, tokens) => {
                self.errors
                    .at(tokens, "a tuple of values can only be the model's output");
                None
            }
            Expr::Call {
                callee,
                args,
                tokens,
            } => {
                let layer = match &**callee {
                    Expr::Layer(_) => {
                        let i = self.next;
                        self.next += 1;
                        match &self.resolved[i] {
                            Some(r) if r.def.is_input() => {
                                self.errors.at(
                                    &r.syntax.tokens,
                                    "`Input` declares the model's input and is not called: \
                                     `let x = Input(784);`",
                                );
                                None
                            }
                            Some(_) => Some(i),
                            None => None,
                        }
                    }
                    Expr::Name(n) => match self.lookup(n) {
                        Bound::Layer(l) => l,
                        Bound::Value(_) => {
                            self.errors.at(
                                n,
                                format!(
                                    "`{n}` is a value, not a layer: call a layer on it, e.g. \
                                     `Dense(10)({n})`"
                                ),
                            );
                            None
                        }
                    },
                    other => {
                        // `Dense(8)(x)(y)`: the inner call's value is not a layer.
                        self.value(other);
                        self.errors.at(tokens, "a layer's output cannot be called");
                        None
                    }
                };
                let (items, list, keywords) = match args {
                    CallArgs::Positional(items, keywords) => (items, None, &keywords[..]),
                    CallArgs::List(items, list) => (items, Some(list), &[][..]),
                };
                let inputs: Vec<Option<Node>> = items.iter().map(|i| self.value(i)).collect();
                let named: Vec<Option<Node>> =
                    keywords.iter().map(|k| self.value(&k.value)).collect();
                let layer = layer?;
                let (items, inputs) = self.with_keywords(layer, items, inputs, keywords, named)?;
                self.call(layer, &items, &inputs, list, tokens)
            }
        }
    }

    /// The inputs of a call of layer `i` with its inputs given by name (`attention_mask =
    /// m`) placed after the positional ones, the optional positional ones between filled
    /// with their defaults (the key is the value, as in Keras); `None` after a mistake
    /// (reported).
    fn with_keywords(
        &mut self,
        i: usize,
        items: &[Expr],
        mut inputs: Vec<Option<Node>>,
        keywords: &[crate::parse_graph::Keyword],
        named: Vec<Option<Node>>,
    ) -> Option<(Vec<TokenStream>, Vec<Option<Node>>)> {
        let mut items: Vec<TokenStream> = items.iter().map(Expr::tokens).collect();
        if keywords.is_empty() {
            return Some((items, inputs));
        }
        let def = self.resolved[i].as_ref()?.def;
        let label = format!("`{}` ({})", self.names[i], def.class);
        let allowed = def.keyword_inputs();
        let mut slots: Vec<Option<(Option<Node>, TokenStream)>> = vec![None; allowed.len()];
        let mut ok = true;
        for (k, value) in keywords.iter().zip(named) {
            let name = k.name.to_string();
            match allowed.iter().position(|a| *a == name) {
                Some(at) if slots[at].is_some() => {
                    self.errors
                        .at(&k.tokens, format!("{label}: `{name}` is given twice"));
                    ok = false;
                }
                Some(at) => slots[at] = Some((value, k.value.tokens())),
                None => {
                    let takes = if allowed.is_empty() {
                        "takes no input by name".to_string()
                    } else {
                        format!("takes by name only {}", allowed.join(", "))
                    };
                    let hint = did_you_mean(&name, allowed)
                        .map_or(String::new(), |s| format!("; did you mean `{s}`?"));
                    self.errors
                        .at(&k.name, format!("{label} {takes}, not `{name}`{hint}"));
                    ok = false;
                }
            }
        }
        if !ok {
            return None;
        }
        // Positional inputs left out before the named ones: Keras' key defaults to the
        // value.
        while inputs.len() < def.positional_inputs() && inputs.len() >= 2 {
            inputs.push(inputs[1]);
            items.push(items[1].clone());
        }
        let last = slots.iter().rposition(Option::is_some).unwrap_or(0);
        for (at, slot) in slots.into_iter().enumerate().take(last + 1) {
            let Some((value, expr)) = slot else {
                self.errors.at(
                    &keywords[0].tokens,
                    format!("{label} needs `{}` before the inputs after it", allowed[at]),
                );
                return None;
            };
            inputs.push(value);
            items.push(expr);
        }
        Some((items, inputs))
    }

    /// Checks one call of layer `i` on `inputs` (written `items`) and records it.
    fn call(
        &mut self,
        i: usize,
        items: &[TokenStream],
        inputs: &[Option<Node>],
        list: Option<&TokenStream>,
        tokens: &TokenStream,
    ) -> Option<Node> {
        let r = self.resolved[i].as_ref()?;
        let label = format!("`{}` ({})", self.names[i], r.def.class);
        let def = r.def;
        let takes_list = def.takes_list();
        match (takes_list, list) {
            (false, Some(list)) if def.takes_many() => {
                self.errors.at(
                    list,
                    format!(
                        "{label} takes its inputs by position, not as a list: `(query, value)`"
                    ),
                );
                return None;
            }
            (true, None) => {
                let message = if items.len() == 1 {
                    format!("{label} merges a list of inputs: write `([a, b])`, as in Keras",)
                } else {
                    format!("{label} takes its inputs as one list: `([a, b])`")
                };
                self.errors.at(tokens, message);
                return None;
            }
            (false, Some(list)) => {
                self.errors.at(
                    list,
                    format!("{label} takes one input, not a list (only merge layers take lists)"),
                );
                return None;
            }
            (false, None) if items.len() != 1 && !def.takes_many() => {
                self.errors.at(
                    tokens,
                    format!("{label} takes one input, got {}", items.len()),
                );
                return None;
            }
            _ => {}
        }
        if !r.ok {
            return None;
        }
        for e in (def.validate)(&r.args) {
            self.errors
                .at(r.tokens(Some(e.arg)), format!("{label}: {}", e.message));
        }
        let known: Vec<Node> = inputs.iter().copied().collect::<Option<_>>()?;
        let shapes: Vec<Shape> = known.iter().map(|&n| self.shape(n)).collect();
        let outputs = match def.outputs(&r.args, &shapes) {
            Ok(s) => s,
            Err(e) => {
                let message = self.call_error(&label, def, items, &shapes, &e);
                let at = match &e {
                    CallError::Shape(s) => r.tokens(s.arg()),
                    CallError::Merge(m) if m.arg().is_some() => r.tokens(m.arg()),
                    CallError::Merge(_) => list.cloned().unwrap_or_else(|| tokens.clone()),
                };
                self.errors.at(at, message);
                return None;
            }
        };
        match &self.first_call[i] {
            Some(first) if *first != shapes => {
                let (a, b) = (shapes_text(first), shapes_text(&shapes));
                self.errors.at(
                    tokens,
                    format!(
                        "{label} is shared, so every call takes the shapes of its first: it \
                         was called on {a}, here on {b}"
                    ),
                );
                return None;
            }
            Some(_) => {}
            None => self.first_call[i] = Some(shapes),
        }
        self.calls.push(CallNode {
            layer: i,
            inputs: known,
            list: takes_list,
            many: def.takes_many(),
            outputs,
        });
        Some(Node::Call(self.calls.len() - 1, 0))
    }

    fn shape(&self, n: Node) -> Shape {
        match n {
            Node::Input(i) => self
                .inputs
                .get(i)
                .map_or_else(Shape::unknown, |i| i.0.clone()),
            Node::Call(c, k) => self.calls[c]
                .outputs
                .get(k)
                .cloned()
                .unwrap_or_else(Shape::unknown),
        }
    }

    /// The macro's wording of why a call cannot take its inputs, naming them as written.
    fn call_error(
        &self,
        label: &str,
        def: &LayerDef,
        items: &[TokenStream],
        shapes: &[Shape],
        e: &CallError,
    ) -> String {
        let operand = |i: usize| {
            let written = items.get(i).map(written).unwrap_or_default();
            format!(
                "`{written}` {}",
                shapes.get(i).map_or(String::new(), |s| s.to_string())
            )
        };
        match e {
            CallError::Shape(s) => {
                format!(
                    "{label} needs {}, but {} is its input",
                    s.need(),
                    operand(0)
                )
            }
            CallError::Merge(MergeError::Count { min, max, got }) => format!(
                "{label} takes {}{}, got {got}",
                MergeError::count_text(*min, *max),
                def.inputs_text()
            ),
            CallError::Merge(m @ MergeError::Incompatible { first, second, .. }) => format!(
                "{label} cannot merge {} and {}: it needs {}",
                operand(*first),
                operand(*second),
                m.need()
            ),
            CallError::Merge(m @ MergeError::Axis { .. }) => {
                format!(
                    "{label} needs {}, but {} is its input",
                    m.need(),
                    operand(0)
                )
            }
            CallError::Merge(m @ MergeError::DotAxes { .. }) => format!(
                "{label} cannot take {} and {}: it needs {}",
                operand(0),
                operand(1),
                m.need()
            ),
            CallError::Merge(m @ MergeError::Disagree { first, second, .. }) => format!(
                "{label} cannot take {} and {}: it needs {}",
                operand(*first),
                operand(*second),
                m.need()
            ),
            CallError::Merge(m @ MergeError::NotSequence { input }) => format!(
                "{label} needs {}, but {} is an input",
                m.need(),
                operand(*input)
            ),
        }
    }

    /// Inputs, values and layers bound but never used: in Keras they would silently not
    /// be part of the model, which is never what was meant.
    fn unused(&mut self) {
        let mut found = Vec::new();
        // A binding shadowed by a later one of the same name is checked as well.
        // A name starting with `_` is left unused on purpose, as in Rust: a state
        // not needed, `let (_seq, h, c) = LSTM(..)(x);`.
        for (name, bound, used, tokens) in &self.bindings {
            if *used || name.starts_with('_') {
                continue;
            }
            let message = match bound {
                Bound::Value(Some(Node::Input(_))) => {
                    format!("the input `{name}` is not used: the output must depend on it")
                }
                Bound::Value(Some(_)) => format!(
                    "`{name}` is computed but not used: the output must depend on every value \
                     bound (remove the binding, or use it)"
                ),
                Bound::Layer(Some(_)) => {
                    format!("the layer `{name}` is bound but never called")
                }
                // Unknown after a mistake: that mistake is reported.
                _ => continue,
            };
            found.push((tokens.clone(), message));
        }
        for (tokens, message) in found {
            self.errors.at(tokens, message);
        }
    }

    /// The model, once every check passed (an output exists, so an input does).
    fn finish(self, outputs: Vec<Node>) -> Model {
        let names = input_names(&self.inputs);
        let inputs: Vec<GraphInput> = self
            .inputs
            .into_iter()
            .zip(names)
            .map(|((shape, given, _), name)| GraphInput {
                name,
                named: given.is_some(),
                shape,
            })
            .collect();
        // The layers that are called, in the order they appear, and where each went.
        // The layers in the order of their first calls (Keras lists a functional model's
        // layers in the order they run); their names stay those of the order they appear.
        let mut index = vec![usize::MAX; self.resolved.len()];
        let mut layers = Vec::new();
        for first in &self.calls {
            let i = first.layer;
            if index[i] != usize::MAX {
                continue;
            }
            let Some(r) = &self.resolved[i] else { continue };
            let inputs = self.first_call[i].clone().unwrap_or_default();
            let input = inputs.first().cloned().unwrap_or_else(Shape::unknown);
            index[i] = layers.len();
            layers.push(Layer {
                def: r.def,
                name: self.names[i].clone(),
                args: r.args.clone(),
                written: r.written(),
                docs: self.docs[i].clone(),
                params: r.def.call_params(&r.args, &inputs),
                input,
                output: first
                    .outputs
                    .first()
                    .cloned()
                    .unwrap_or_else(Shape::unknown),
                states: first.outputs.get(1..).unwrap_or_default().to_vec(),
                frozen: r.frozen(),
                custom: r.syntax.custom.clone(),
            });
        }
        let calls = self
            .calls
            .into_iter()
            .map(|c| CallNode {
                layer: index[c.layer],
                ..c
            })
            .collect();
        let input = match inputs.as_slice() {
            [one] => one.shape.to_known(),
            _ => None,
        };
        Model {
            input,
            layers,
            graph: Some(Graph {
                inputs,
                calls,
                outputs,
            }),
        }
    }
}

/// Each input's name: the `name` given, else Keras' `input_layer`, `input_layer_1`, … in
/// order.
fn input_names(inputs: &[(Shape, Option<String>, TokenStream)]) -> Vec<String> {
    let mut unnamed = 0;
    inputs
        .iter()
        .map(|(_, name, _)| match name {
            Some(n) => n.clone(),
            None => {
                unnamed += 1;
                match unnamed {
                    1 => "input_layer".to_string(),
                    k => format!("input_layer_{}", k - 1),
                }
            }
        })
        .collect()
}

/// Whether the first layer `e` meets is the one it makes (`Dense(16)`, `Dense(16)(x)`).
fn head_is_layer(e: &Expr) -> bool {
    match e {
        Expr::Layer(_) => true,
        Expr::Call { callee, .. } => head_is_layer(callee),
        Expr::Name(_) | Expr::Tuple(..) => false,
    }
}

/// Tokens as a person writes them: `Dense(4)(x)`, not `Dense (4) (x)`.
fn written(tokens: &TokenStream) -> String {
    let mut s = tokens.to_string();
    for (from, to) in [
        (" (", "("),
        ("( ", "("),
        (" )", ")"),
        (" ,", ","),
        ("[ ", "["),
        (" ]", "]"),
    ] {
        s = s.replace(from, to);
    }
    s
}

fn shapes_text(shapes: &[Shape]) -> String {
    let parts: Vec<String> = shapes.iter().map(|s| s.to_string()).collect();
    parts.join(" and ")
}

/// `(None, 5, 8), (None, 8) and (None, 8)`: a call's outputs, for messages.
fn listed(shapes: &[Shape]) -> String {
    let all: Vec<String> = shapes.iter().map(|s| s.to_string()).collect();
    match all.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => all.join(""),
    }
}
