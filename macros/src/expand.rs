//! Writes a checked model out as Rust: a struct with one field per layer, its `Default`,
//! and its `strata::nn::Architecture` impl with one `forward` statement per layer. Nothing
//! here can fail: every decision was made by `check.rs`.
//!
//! Paths are absolute (`::strata::...`), and the locals `forward` needs for itself are
//! mixed-site, so layer names (`name = "cx"`) cannot capture them.

use crate::check::{Graph, Layer, Model, Node};
use crate::parse::Form;
use proc_macro2::{Ident, Literal, Span, TokenStream};
use quote::{format_ident, quote, ToTokens};
use strata_spec::{dims_text, product, Args, LayerDef, Shape, Val};

pub fn expand(form: &Form, model: &Model) -> TokenStream {
    let (ty, attrs, vis, name) = match form {
        Form::Expr if model.graph.is_some() => (
            Ident::new("Functional", Span::call_site()),
            vec![quote!(#[doc = " The architecture declared by `model! { let ... }`."])],
            quote!(),
            None,
        ),
        Form::Expr => (
            Ident::new("Sequential", Span::call_site()),
            vec![quote!(#[doc = " The architecture declared by `model![...]`."])],
            quote!(),
            None,
        ),
        Form::Named { attrs, vis, ident } => (
            ident.clone(),
            attrs.iter().map(|a| quote!(#a)).collect(),
            quote!(#vis),
            Some(snake_case(&ident.to_string())),
        ),
    };
    let summary = format!(" Declared with `model!`: {}.", overview(model));
    let fields = model.layers.iter().map(|l| {
        let field = field(l);
        let ty = field_type(l);
        let doc = field_doc(l);
        // The user's own `///` lines above the layer come first, then what model! knows.
        let user = &l.docs;
        let separator = (!user.is_empty()).then(|| quote!(#[doc = ""]));
        quote! {
            #(#user)*
            #separator
            #[doc = #doc]
            pub #field: #ty
        }
    });
    let inits = model.layers.iter().map(init);
    // Keras names a functional model `functional`, a `Sequential` one `sequential`.
    let name = name.or_else(|| model.graph.as_ref().map(|_| "functional".to_string()));
    let name_fn = name.map(|n| {
        quote! {
            fn name(&self) -> &str {
                #n
            }
        }
    });
    let frozen: Vec<&str> = model
        .layers
        .iter()
        .filter(|l| l.frozen)
        .map(|l| l.name.as_str())
        .collect();
    let frozen_fn = (!frozen.is_empty()).then(|| {
        quote! {
            fn frozen(&self) -> ::strata::__private::Vec<&str> {
                ::strata::__private::Vec::from([#(#frozen),*])
            }
        }
    });
    let input_shape = option_dims(model.input.as_deref());
    let outputs = model.outputs();
    let output_shape = match outputs.as_slice() {
        [one] => option_dims(one.to_known().as_deref()),
        _ => option_dims(None),
    };
    let params = params_const(model);
    let layer_refs = model.layers.iter().map(layer_ref);
    let forward = match &model.graph {
        Some(g) => graph_forward(model, g),
        None => forward(model),
    };
    let count = Literal::usize_unsuffixed(model.layers.len());
    let constructor = match form {
        Form::Expr => quote! {
            ::strata::Model::new(<#ty as ::strata::__private::Default>::default())
        },
        Form::Named { .. } => quote! {
            impl #ty {
                /// A model of this architecture, its weights initialised from seed 0
                /// (`with_seed` picks another).
                #vis fn model() -> ::strata::Model<#ty> {
                    ::strata::Model::new(<#ty as ::strata::__private::Default>::default())
                }
            }
        },
    };
    let items = quote! {
        #(#attrs)*
        #[doc = ""]
        #[doc = #summary]
        #[derive(Clone, Debug)]
        #vis struct #ty {
            #(#fields,)*
        }

        impl ::strata::__private::Default for #ty {
            fn default() -> Self {
                #ty {
                    #(#inits,)*
                }
            }
        }

        impl ::strata::nn::Architecture for #ty {
            const INPUT_SHAPE: ::strata::__private::Option<&'static [usize]> = #input_shape;
            const OUTPUT_SHAPE: ::strata::__private::Option<&'static [usize]> = #output_shape;
            #params

            #name_fn

            #frozen_fn

            fn layers(&self) -> ::strata::__private::Vec<&dyn ::strata::nn::Layer> {
                let layers: [&dyn ::strata::nn::Layer; #count] = [#(#layer_refs),*];
                ::strata::__private::Vec::from(layers)
            }

            #forward
        }

        #constructor
    };
    match form {
        Form::Expr => quote!({ #items }),
        Form::Named { .. } => items,
    }
}

/// `MnistClassifier` → `mnist_classifier`, the model's name in summaries.
fn snake_case(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            out.push('_');
        }
        out.extend(c.to_lowercase());
    }
    out
}

/// A layer field's type: the catalogue layer's struct, or a shared pointer to a layer of
/// the user's own (whose type the macro does not know).
fn field_type(l: &Layer) -> TokenStream {
    match l.custom() {
        Some(_) => quote!(::strata::__private::Arc<dyn ::strata::nn::Layer>),
        None => {
            let runtime = format_ident!("{}", l.def.runtime);
            quote!(::strata::nn::#runtime)
        }
    }
}

/// `&self.dense` (or `&*self.custom`), as a `&dyn Layer`.
fn layer_ref(l: &Layer) -> TokenStream {
    let f = field(l);
    match l.custom() {
        Some(_) => quote!(&*self.#f),
        None => quote!(&self.#f),
    }
}

fn field(l: &Layer) -> Ident {
    ident(&l.name, Span::call_site())
}

/// `name` as an identifier, raw (`r#match`) where it is a keyword.
fn ident(name: &str, span: Span) -> Ident {
    match syn::parse_str::<Ident>(name) {
        Ok(_) => Ident::new(name, span),
        Err(_) => Ident::new_raw(name, span),
    }
}

/// `(None, 784) → (None, 10), 109,386 parameters`.
fn overview(model: &Model) -> String {
    let input = match &model.input {
        Some(dims) => Shape::known(dims).to_string(),
        None => "(taken from the first data)".to_string(),
    };
    let mut s = match (&model.graph, model.outputs().as_slice()) {
        (Some(g), outputs) if g.inputs.len() > 1 || outputs.len() > 1 => {
            let ins: Vec<String> = g
                .inputs
                .iter()
                .map(|i| format!("`{}` {}", i.name, i.shape))
                .collect();
            let outs: Vec<String> = outputs.iter().map(|s| s.to_string()).collect();
            format!("inputs {} → outputs {}", ins.join(", "), outs.join(", "))
        }
        (_, outputs) => {
            let out = outputs.first().cloned().unwrap_or_else(Shape::unknown);
            format!("input {input} → output {out}")
        }
    };
    let custom = model.layers.iter().any(|l| l.custom().is_some());
    if let Some(n) =
        total(model.layers.iter().flat_map(|l| &l.params).map(|p| &p.dims)).filter(|_| !custom)
    {
        s += &format!(", {} parameters", thousands(n));
    }
    s
}

/// The element count of all `dims`, when every size is known.
fn total<'a>(dims: impl Iterator<Item = &'a Vec<Option<usize>>>) -> Option<usize> {
    let mut n: usize = 0;
    for d in dims {
        let known: Vec<usize> = d.iter().copied().collect::<Option<_>>()?;
        n = n.saturating_add(product(&known));
    }
    Some(n)
}

fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `` `dense_1`: Dense(64, activation = relu), (None, 128) → (None, 64); kernel [128, 64],
/// bias [64]: 8,256 parameters.``
fn field_doc(l: &Layer) -> String {
    if let Some(expr) = l.custom() {
        return format!(
            " A layer of your own, `{{ {expr} }}`, on {}: its shapes and parameters are \
             checked when the model is built.",
            l.input
        );
    }
    let out = if l.states.is_empty() {
        l.output.to_string()
    } else {
        let all: Vec<Shape> = std::iter::once(l.output.clone())
            .chain(l.states.iter().cloned())
            .collect();
        format!("[{}]", shapes_text(&all))
    };
    let mut s = format!(" `{}`: {}, {} → {out}", l.name, l.written, l.input);
    if l.params.is_empty() {
        s += "; no parameters.";
    } else {
        let list: Vec<String> = l
            .params
            .iter()
            .map(|p| {
                let state = if p.trainable && !l.frozen {
                    ""
                } else {
                    " (non-trainable)"
                };
                format!("{} {}{state}", p.suffix, dims_text(&p.dims))
            })
            .collect();
        s += &format!("; {}", list.join(", "));
        if let Some(n) = total(l.params.iter().map(|p| &p.dims)) {
            s += &format!(": {} parameters.", thousands(n));
        }
    }
    s
}

/// `dense: ::strata::nn::Dense { name: ..., units: 128, ... }`: every argument written
/// out, defaults included, so the expansion shows the whole configuration.
fn init(l: &Layer) -> TokenStream {
    let f = field(l);
    if let Some(expr) = l.custom() {
        return quote! {
            #f: ::strata::__private::Arc::new({ #expr })
        };
    }
    let layer = construct(l.def, &l.name, &l.args);
    quote!(#f: #layer)
}

/// `::strata::nn::Dense { name: ..., units: 128, ... }`, a layer's struct.
fn construct(def: &LayerDef, name: &str, args: &Args) -> TokenStream {
    let runtime = format_ident!("{}", def.runtime);
    let fields = def.args.iter().filter(|a| a.field).filter_map(|a| {
        let v = value(args.get(a.name)?);
        let field = format_ident!("{}", a.name);
        Some(quote!(#field: #v))
    });
    quote! {
        ::strata::nn::#runtime {
            name: ::strata::__private::String::from(#name),
            #(#fields,)*
        }
    }
}

/// A checked value as the runtime field's Rust value.
fn value(v: &Val) -> TokenStream {
    let pair = |[a, b]: [usize; 2]| {
        let (a, b) = (Literal::usize_unsuffixed(a), Literal::usize_unsuffixed(b));
        quote!([#a, #b])
    };
    let int = |i: i64| {
        let abs = Literal::u64_unsuffixed(i.unsigned_abs());
        if i < 0 {
            quote!(-#abs)
        } else {
            quote!(#abs)
        }
    };
    match v {
        Val::Usize(n) => {
            let n = Literal::usize_unsuffixed(*n);
            quote!(#n)
        }
        Val::Pair(p) => pair(*p),
        Val::OptionalPair(Some(p)) => {
            let p = pair(*p);
            quote!(::strata::__private::Some(#p))
        }
        Val::OptionalUsize(Some(n)) => {
            let n = Literal::usize_unsuffixed(*n);
            quote!(::strata::__private::Some(#n))
        }
        Val::OptionalPair(None) | Val::OptionalUsize(None) => quote!(::strata::__private::None),
        Val::Float(f) => {
            let f = Literal::f64_unsuffixed(*f);
            quote!(#f)
        }
        Val::Bool(b) => quote!(#b),
        Val::Activation(c) => {
            let v = format_ident!("{}", c.variant);
            quote!(::strata::nn::Activation::#v)
        }
        Val::Initializer(c) => {
            let v = format_ident!("{}", c.variant);
            quote!(::strata::nn::Initializer::#v)
        }
        Val::Padding(c) => {
            let v = format_ident!("{}", c.variant);
            quote!(::strata::nn::Padding::#v)
        }
        Val::Axis(a) => int(*a),
        Val::OptionalFloat(Some(f)) => {
            let f = Literal::f64_unsuffixed(*f);
            quote!(::strata::__private::Some(#f))
        }
        Val::OptionalFloat(None) | Val::Axes(None) => quote!(::strata::__private::None),
        Val::Axes(Some(axes)) => {
            let axes = axes.iter().map(|&a| Literal::usize_unsuffixed(a));
            quote!(::strata::__private::Some(::strata::__private::Vec::from([#(#axes),*])))
        }
        Val::Dims(dims) => {
            let dims = dims.iter().map(|&a| Literal::usize_unsuffixed(a));
            quote!(::strata::__private::Vec::from([#(#dims),*]))
        }
        Val::Margins([h, w]) => {
            let (h, w) = (pair(*h), pair(*w));
            quote!([#h, #w])
        }
        Val::Interpolation(c) => {
            let v = format_ident!("{}", c.variant);
            quote!(::strata::nn::Interpolation::#v)
        }
        Val::ScoreMode(c) => {
            let v = format_ident!("{}", c.variant);
            quote!(::strata::nn::ScoreMode::#v)
        }
        Val::MergeMode(c) => {
            let v = format_ident!("{}", c.variant);
            quote!(::strata::nn::MergeMode::#v)
        }
        // The wrapper's field takes the wrapped layer's struct by `From`.
        Val::Layer(w) => {
            let layer = construct(w.def, w.name(), &w.args);
            quote!(::strata::__private::Into::into(#layer))
        }
        Val::AxisPair([a, b]) => {
            let (a, b) = (int(*a), int(*b));
            quote!([#a, #b])
        }
        Val::TargetShape(dims) => {
            let dims = dims.iter().map(|&d| int(d));
            quote!(::strata::__private::Vec::from([#(#dims),*]))
        }
        // Never runtime fields: `Input`'s and `input_shape`'s shapes, `data_format`, `name`.
        Val::Shape(_) | Val::DataFormat(_) | Val::Name(_) => quote!(),
    }
}

fn option_dims(dims: Option<&[usize]>) -> TokenStream {
    match dims {
        Some(dims) => {
            let dims = dims.iter().map(|&d| Literal::usize_unsuffixed(d));
            quote!(::strata::__private::Some(&[#(#dims),*]))
        }
        None => quote!(::strata::__private::None),
    }
}

/// `const PARAMS`: every parameter's name, dims, initializer and trainability, when all
/// dims are known (`Model::build` checks the runtime layers create exactly these).
fn params_const(model: &Model) -> TokenStream {
    // A layer of the user's own declares nothing the macro could list.
    if model.layers.iter().any(|l| l.custom().is_some()) {
        return quote!();
    }
    let mut decls = Vec::new();
    for l in &model.layers {
        for p in &l.params {
            let Some(dims) = p.dims.iter().copied().collect::<Option<Vec<usize>>>() else {
                return quote!();
            };
            let name = format!("{}/{}", l.name, p.suffix);
            let dims = dims.iter().map(|&d| Literal::usize_unsuffixed(d));
            let init = p
                .initializer(&l.args)
                .map(|c| value(&Val::Initializer(c)))
                .unwrap_or_default();
            let trainable = p.trainable && !l.frozen;
            decls.push(quote! {
                ::strata::nn::ParamDecl {
                    name: #name,
                    dims: &[#(#dims),*],
                    init: #init,
                    trainable: #trainable,
                }
            });
        }
    }
    quote! {
        const PARAMS: ::strata::__private::Option<&'static [::strata::nn::ParamDecl]> =
            ::strata::__private::Some(&[#(#decls),*]);
    }
}

/// One statement per layer, each under a doc line with its shapes:
/// `let dense_1 = Layer::forward(&self.dense_1, cx, dense, dense_1_params)?;`.
fn forward(model: &Model) -> TokenStream {
    let names = Locals::new(model);
    let (cx, input) = (&names.cx, &names.input);
    let mut previous = quote!(#input);
    let mut statements = Vec::new();
    for (l, group) in model.layers.iter().zip(&names.groups) {
        let f = field(l);
        let doc = format!(" {}: {} → {}", l.written, l.input, l.output);
        let layer = layer_ref(l);
        statements.push(quote! {
            #[doc = #doc]
            let #f = ::strata::nn::Layer::forward(#layer, #cx, #previous, #group)?;
        });
        previous = quote!(#f);
    }
    names.forward_fn(&statements, previous)
}

/// The locals of a generated `forward`, mixed-site so that no layer name (`name = "cx"`)
/// can capture them: the context, the input, the parameter groups and each layer's group.
struct Locals {
    cx: Ident,
    input: Ident,
    params: Ident,
    groups: Vec<Ident>,
}

impl Locals {
    fn new(model: &Model) -> Locals {
        let hygienic = |s: &str| Ident::new(s, Span::mixed_site());
        Locals {
            cx: hygienic("cx"),
            input: hygienic("input"),
            params: hygienic("params"),
            groups: model
                .layers
                .iter()
                .map(|l| hygienic(&format!("{}_params", l.name)))
                .collect(),
        }
    }

    /// `fn forward` around `statements`, returning `result`.
    fn forward_fn(&self, statements: &[TokenStream], result: TokenStream) -> TokenStream {
        let Locals {
            cx,
            input,
            params,
            groups,
        } = self;
        let count = Literal::usize_unsuffixed(groups.len());
        quote! {
            #[allow(unused_doc_comments)]
            fn forward(
                &self,
                #cx: &mut ::strata::nn::Forward<'_>,
                #input: ::strata::ir::Value,
                #params: &[&[::strata::ir::Value]],
            ) -> ::strata::Result<::strata::ir::Value> {
                let [#(#groups),*] = #params else {
                    return ::strata::__private::Err(::strata::__private::param_groups(#count, #params.len()));
                };
                #(#statements)*
                ::strata::__private::Ok(#result)
            }
        }
    }
    /// `fn forward_all` around `statements`: the inputs bound to `inputs`, in order, and
    /// `results` returned.
    fn forward_all_fn(
        &self,
        statements: &[TokenStream],
        inputs: &[Ident],
        results: &[Ident],
    ) -> TokenStream {
        let Locals {
            cx,
            input,
            params,
            groups,
        } = self;
        let count = Literal::usize_unsuffixed(groups.len());
        let n = Literal::usize_unsuffixed(inputs.len());
        quote! {
            #[allow(unused_doc_comments)]
            fn forward_all(
                &self,
                #cx: &mut ::strata::nn::Forward<'_>,
                #input: &[::strata::ir::Value],
                #params: &[&[::strata::ir::Value]],
            ) -> ::strata::Result<::strata::__private::Vec<::strata::ir::Value>> {
                let [#(#groups),*] = #params else {
                    return ::strata::__private::Err(::strata::__private::param_groups(#count, #params.len()));
                };
                let &[#(#inputs),*] = #input else {
                    return ::strata::__private::Err(::strata::__private::input_count(#n, #input.len()));
                };
                #(#statements)*
                ::strata::__private::Ok(::strata::__private::Vec::from([#(#results),*]))
            }
        }
    }
}

/// The graph form's `topology`, `input_names`, `input_shapes` and `forward` (or
/// `forward_all`, for several inputs or outputs): one statement per call, each
/// under a doc line with its shapes; a call's value is named after its layer
/// (`conv2d`; a shared layer's later calls `dense_call1`, …).
fn graph_forward(model: &Model, g: &Graph) -> TokenStream {
    let names = Locals::new(model);
    let (cx, groups) = (&names.cx, &names.groups);
    // The local each call's value is bound to, unique among the layers' names.
    let mut taken: Vec<String> = model.layers.iter().map(|l| l.name.clone()).collect();
    let mut calls_of = vec![0usize; model.layers.len()];
    let mut locals: Vec<String> = Vec::new();
    for c in &g.calls {
        let l = &model.layers[c.layer];
        let k = calls_of[c.layer];
        calls_of[c.layer] += 1;
        let mut local = if k == 0 {
            l.name.clone()
        } else {
            format!("{}_call{k}", l.name)
        };
        while k > 0 && taken.contains(&local) {
            local.push('_');
        }
        taken.push(local.clone());
        locals.push(local);
    }
    // One input and one output: `forward`; otherwise `forward_all`, its inputs bound to
    // mixed-site locals of their own.
    let single = g.inputs.len() == 1 && g.outputs.len() == 1;
    let input_locals: Vec<Ident> = (0..g.inputs.len())
        .map(|i| Ident::new(&format!("input_{i}"), Span::mixed_site()))
        .collect();
    // A call's outputs after its first (a recurrent layer's states): `lstm_state1`, ….
    let output_local = |c: usize, k: usize| match k {
        0 => locals[c].clone(),
        k => format!("{}_state{k}", locals[c]),
    };
    let node_local = |n: Node| match n {
        Node::Input(_) if single => "input".to_string(),
        Node::Input(i) => g.inputs[i].name.clone(),
        Node::Call(c, k) => output_local(c, k),
    };
    // A call's value is a call-site local, as the stack form's are, so a layer named
    // `input` or `cx` cannot shadow the mixed-site input and context.
    let node_ident = |n: Node| match n {
        Node::Input(_) if single => names.input.clone(),
        Node::Input(i) => input_locals[i].clone(),
        Node::Call(c, k) => ident(&output_local(c, k), Span::call_site()),
    };
    let mut statements = Vec::new();
    for (c, call) in g.calls.iter().enumerate() {
        let l = &model.layers[call.layer];
        let layer = layer_ref(l);
        let group = &groups[call.layer];
        let local = node_ident(Node::Call(c, 0));
        let names: Vec<String> = call.inputs.iter().map(|&n| node_local(n)).collect();
        let shapes: Vec<String> = call
            .inputs
            .iter()
            .map(|&n| g.shape(n).to_string())
            .collect();
        let (operands, shapes) = if call.list {
            (
                format!("[{}]", names.join(", ")),
                format!("[{}]", shapes.join(", ")),
            )
        } else {
            (names.join(", "), shapes.join(", "))
        };
        let out = match call.outputs.as_slice() {
            [one] => one.to_string(),
            all => format!("[{}]", shapes_text(all)),
        };
        let doc = format!(" {}({operands}): {shapes} → {out}", l.written);
        let inputs = call.inputs.iter().map(|&n| node_ident(n));
        statements.push(if call.outputs.len() > 1 {
            // Every output bound at once: the output, then the states.
            let all = (0..call.outputs.len()).map(|k| node_ident(Node::Call(c, k)));
            quote! {
                #[doc = #doc]
                let [#(#all),*] = ::strata::__private::outputs(
                    ::strata::nn::Layer::call_all(#layer, #cx, &[#(#inputs),*], #group)?,
                )?;
            }
        } else if call.many {
            quote! {
                #[doc = #doc]
                let #local = ::strata::nn::Layer::call(#layer, #cx, &[#(#inputs),*], #group)?;
            }
        } else {
            quote! {
                #[doc = #doc]
                let #local = ::strata::nn::Layer::forward(#layer, #cx, #(#inputs),*, #group)?;
            }
        });
    }
    let port = |n: Node| match n {
        Node::Input(i) => {
            let i = Literal::usize_unsuffixed(i);
            quote!(::strata::nn::Port::Input(#i))
        }
        Node::Call(c, 0) => {
            let c = Literal::usize_unsuffixed(c);
            quote!(::strata::nn::Port::call(#c))
        }
        Node::Call(c, k) => {
            let (c, k) = (Literal::usize_unsuffixed(c), Literal::usize_unsuffixed(k));
            quote!(::strata::nn::Port::Call { call: #c, output: #k })
        }
    };
    let calls = g.calls.iter().map(|c| {
        let layer = Literal::usize_unsuffixed(c.layer);
        let inputs = c.inputs.iter().map(|&n| port(n));
        quote! {
            ::strata::nn::Call {
                layer: #layer,
                inputs: ::strata::__private::Vec::from([#(#inputs),*]),
            }
        }
    });
    let outputs = g.outputs.iter().map(|&n| port(n));
    let forward = if single {
        names.forward_fn(&statements, node_ident(g.outputs[0]).into_token_stream())
    } else {
        let results: Vec<Ident> = g.outputs.iter().map(|&n| node_ident(n)).collect();
        names.forward_all_fn(&statements, &input_locals, &results)
    };
    // Keras names an input `input_layer` unless told otherwise; only other names, or
    // several inputs, are spelled out.
    let input_names = (!single || g.inputs.iter().any(|i| i.named)).then(|| {
        let names = g.inputs.iter().map(|i| &i.name);
        quote! {
            fn input_names(&self) -> ::strata::__private::Vec<&str> {
                ::strata::__private::Vec::from([#(#names),*])
            }
        }
    });
    let input_shapes = (g.inputs.len() > 1).then(|| {
        let shapes = g.inputs.iter().map(|i| {
            let dims = i.shape.to_known().unwrap_or_default();
            quote!(::strata::__private::Vec::from([#(#dims),*]))
        });
        quote! {
            fn input_shapes(&self) -> ::strata::__private::Option<::strata::__private::Vec<::strata::__private::Vec<usize>>> {
                ::strata::__private::Some(::strata::__private::Vec::from([#(#shapes),*]))
            }
        }
    });
    quote! {
        #input_names

        #input_shapes

        fn topology(&self) -> ::strata::nn::Topology {
            ::strata::nn::Topology {
                calls: ::strata::__private::Vec::from([#(#calls),*]),
                outputs: ::strata::__private::Vec::from([#(#outputs),*]),
            }
        }

        #forward
    }
}

/// `(5, 8), (8,) and (8,)`.
fn shapes_text(shapes: &[Shape]) -> String {
    let all: Vec<String> = shapes.iter().map(|s| s.to_string()).collect();
    all.join(", ")
}
