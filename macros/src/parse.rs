//! The syntax of `model!`, and nothing else: which layers, with which arguments, written
//! where. Whether `relu` is an activation or `128` is in range is `check.rs`'s business.
//!
//! Each layer and each argument is parsed on its own, so one malformed argument is
//! reported without hiding the mistakes in the others.

use crate::parse_graph::{is_graph, parse_graph, GraphSyntax};
use proc_macro2::{TokenStream, TokenTree};
use quote::ToTokens;
use syn::parse::{Parse, ParseStream, Parser};
use syn::{Attribute, Ident, LitBool, LitFloat, LitInt, LitStr, Token, Visibility};

/// The two forms of the macro.
pub enum Form {
    /// `model![Input(784), Dense(10, softmax)]`: an expression giving a model.
    Expr,
    /// `model! { /// docs  pub struct Name { Input(784), Dense(10, softmax) } }`: a
    /// reusable public type.
    Named {
        attrs: Vec<Attribute>,
        vis: Visibility,
        ident: Ident,
    },
}

pub struct ModelSyntax {
    pub form: Form,
    /// `None` where a layer could not be parsed at all (its error is already reported).
    pub layers: Vec<Option<LayerSyntax>>,
    /// The graph form's bindings and output (`layers` is then empty).
    pub graph: Option<GraphSyntax>,
}

/// `Dense(128, relu)`, `Flatten` or `Dropout(rate = 0.2)`, with any doc comments above it.
pub struct LayerSyntax {
    pub docs: Vec<Attribute>,
    pub name: Ident,
    pub args: Vec<ArgSyntax>,
    /// False when an argument could not be parsed (and was reported): the layer's other
    /// checks are then skipped, so the error causes no others.
    pub complete: bool,
    /// The whole call, for errors about the layer as a whole.
    pub tokens: TokenStream,
    /// A layer of the user's own: the expression inside `{ ... }` (its type implements
    /// `strata::nn::Layer`); `name` is then `custom`.
    pub custom: Option<TokenStream>,
}

/// `128` or `activation = relu`.
pub struct ArgSyntax {
    pub keyword: Option<Ident>,
    pub value: Value,
    pub tokens: TokenStream,
}

/// An argument's value as written.
pub struct Value {
    pub kind: ValueKind,
    pub tokens: TokenStream,
}

pub enum ValueKind {
    Int(i64),
    Float(f64),
    Bool(bool),
    /// `relu`, `"relu"`, `None`: a name, written bare or as a string as in Keras.
    Name(String),
    /// `(28, 28, 1)` or `[28, 28, 1]`.
    Tuple(Vec<Value>),
    /// `LSTM(8)`: a layer call, the argument of a wrapper (`Bidirectional(LSTM(8))`).
    Layer(Box<LayerSyntax>),
}

/// Parses a whole invocation; every syntax error found comes back, the layers that did
/// parse with them.
pub fn parse(input: TokenStream) -> (Option<ModelSyntax>, Vec<syn::Error>) {
    let mut errors = Vec::new();
    let (form, body) = match split_form(input) {
        Ok(parts) => parts,
        Err(e) => return (None, vec![e]),
    };
    if is_graph(&body) {
        let (graph, errs) = parse_graph(body);
        errors.extend(errs);
        let graph = Some(graph);
        let layers = Vec::new();
        return (
            Some(ModelSyntax {
                form,
                layers,
                graph,
            }),
            errors,
        );
    }
    let mut layers = Vec::new();
    for chunk in split_commas(body) {
        match parse_layer.parse2(chunk) {
            Ok((layer, errs)) => {
                errors.extend(errs);
                layers.push(Some(layer));
            }
            Err(e) => {
                errors.push(e);
                layers.push(None);
            }
        }
    }
    let graph = None;
    (
        Some(ModelSyntax {
            form,
            layers,
            graph,
        }),
        errors,
    )
}

/// Separates the named form's header (`/// docs pub struct Name`) from the layer list.
fn split_form(input: TokenStream) -> syn::Result<(Form, TokenStream)> {
    let named = |s: ParseStream| -> syn::Result<Option<(Form, TokenStream)>> {
        let fork = s.fork();
        let _ = fork.call(Attribute::parse_outer)?;
        let _: Visibility = fork.parse()?;
        if !fork.peek(Token![struct]) {
            // Not the named form: leave the tokens to the layer list.
            s.parse::<TokenStream>()?;
            return Ok(None);
        }
        let attrs = s.call(Attribute::parse_outer)?;
        let vis: Visibility = s.parse()?;
        s.parse::<Token![struct]>()?;
        let ident: Ident = s.parse()?;
        let body;
        syn::braced!(body in s);
        let layers: TokenStream = body.parse()?;
        if !s.is_empty() {
            return Err(s.error("unexpected tokens after the model's `{ ... }`"));
        }
        Ok(Some((Form::Named { attrs, vis, ident }, layers)))
    };
    match named.parse2(input.clone())? {
        Some(parts) => Ok(parts),
        None => Ok((Form::Expr, input)),
    }
}

/// Splits a graph body at the `;` outside any group: the statements, and the piece after
/// the last `;` when there is one (the output expression).
pub(crate) fn split_statements(tokens: TokenStream) -> (Vec<TokenStream>, Option<TokenStream>) {
    let mut statements = Vec::new();
    let mut piece = TokenStream::new();
    for tt in tokens {
        match &tt {
            TokenTree::Punct(p) if p.as_char() == ';' => {
                statements.push(std::mem::take(&mut piece))
            }
            _ => piece.extend([tt]),
        }
    }
    statements.retain(|p| !p.is_empty());
    (statements, (!piece.is_empty()).then_some(piece))
}

/// Splits at the commas outside any group, dropping empty pieces (a trailing comma).
pub(crate) fn split_commas(tokens: TokenStream) -> Vec<TokenStream> {
    let mut pieces = Vec::new();
    let mut piece = TokenStream::new();
    for tt in tokens {
        match &tt {
            TokenTree::Punct(p) if p.as_char() == ',' => pieces.push(std::mem::take(&mut piece)),
            _ => piece.extend([tt]),
        }
    }
    pieces.push(piece);
    pieces.retain(|p| !p.is_empty());
    pieces
}

pub(crate) fn parse_layer(s: ParseStream) -> syn::Result<(LayerSyntax, Vec<syn::Error>)> {
    let tokens: TokenStream = s.fork().parse()?;
    let docs = s.call(Attribute::parse_outer)?;
    if s.peek(syn::token::Brace) {
        let content;
        let brace = syn::braced!(content in s);
        let custom: TokenStream = content.parse()?;
        if !s.is_empty() {
            return Err(s.error("expected `,` between layers"));
        }
        let tokens = strip_attrs(tokens, docs.len());
        let layer = LayerSyntax {
            docs,
            name: Ident::new("custom", brace.span.join()),
            args: Vec::new(),
            complete: true,
            tokens,
            custom: Some(custom),
        };
        return Ok((layer, Vec::new()));
    }
    let name: Ident = s.parse().map_err(|e| {
        syn::Error::new(
            e.span(),
            "expected a layer, such as `Dense(10, relu)`, or one of your own in braces: \
                 `{ MyLayer::new(..) }`",
        )
    })?;
    let mut args = Vec::new();
    let mut errors = Vec::new();
    if s.peek(syn::token::Paren) {
        let content;
        syn::parenthesized!(content in s);
        let inner: TokenStream = content.parse()?;
        for piece in split_commas(inner) {
            match parse_arg.parse2(piece) {
                Ok(arg) => args.push(arg),
                Err(e) => errors.push(e),
            }
        }
    }
    if !s.is_empty() {
        return Err(s.error("expected `,` between layers"));
    }
    let tokens = strip_attrs(tokens, docs.len());
    Ok((
        LayerSyntax {
            docs,
            name,
            args,
            complete: errors.is_empty(),
            tokens,
            custom: None,
        },
        errors,
    ))
}

/// The layer's tokens without its doc comments, so errors underline only the call.
fn strip_attrs(tokens: TokenStream, attrs: usize) -> TokenStream {
    // Each outer attribute is two token trees: `#` and `[...]`.
    tokens.into_iter().skip(2 * attrs).collect()
}

fn parse_arg(s: ParseStream) -> syn::Result<ArgSyntax> {
    let tokens: TokenStream = s.fork().parse()?;
    let keyword = if s.peek(Ident) && s.peek2(Token![=]) {
        let k: Ident = s.parse()?;
        s.parse::<Token![=]>()?;
        Some(k)
    } else {
        None
    };
    let value: Value = s.parse()?;
    if !s.is_empty() {
        return Err(s.error("expected `,` between arguments"));
    }
    Ok(ArgSyntax {
        keyword,
        value,
        tokens,
    })
}

impl Parse for Value {
    fn parse(s: ParseStream) -> syn::Result<Value> {
        let tokens: TokenStream = s.fork().parse()?;
        // A negative number is two token trees, `-` and the literal; the rest are one.
        let mut trees = 1;
        let kind = if s.peek(LitBool) {
            ValueKind::Bool(s.parse::<LitBool>()?.value)
        } else if s.peek(Ident) && s.peek2(syn::token::Paren) {
            let name: Ident = s.parse()?;
            let call: TokenTree = s.parse()?;
            trees = 2;
            let (layer, errors) = parse_layer.parse2(quote::quote!(#name #call))?;
            // One error for the argument, covering each of the wrapped layer's.
            if let Some(e) = errors.into_iter().reduce(|mut all, e| {
                all.combine(e);
                all
            }) {
                return Err(e);
            }
            ValueKind::Layer(Box::new(layer))
        } else if s.peek(Ident) {
            ValueKind::Name(s.parse::<Ident>()?.to_string())
        } else if s.peek(LitStr) {
            ValueKind::Name(s.parse::<LitStr>()?.value())
        } else if s.peek(syn::token::Paren) || s.peek(syn::token::Bracket) {
            let Some(TokenTree::Group(g)) = s.parse::<Option<TokenTree>>()? else {
                return Err(s.error("expected a tuple"));
            };
            let items = split_commas(g.stream())
                .into_iter()
                .map(|piece| Value::parse.parse2(piece))
                .collect::<syn::Result<Vec<_>>>()?;
            ValueKind::Tuple(items)
        } else {
            let negative = s.peek(Token![-]);
            if negative {
                s.parse::<Token![-]>()?;
                trees = 2;
            }
            let sign = if negative { -1 } else { 1 };
            if s.peek(LitInt) {
                ValueKind::Int(sign * s.parse::<LitInt>()?.base10_parse::<i64>()?)
            } else if s.peek(LitFloat) {
                ValueKind::Float(sign as f64 * s.parse::<LitFloat>()?.base10_parse::<f64>()?)
            } else {
                return Err(s.error(
                    "expected a literal argument: a number, a name such as `relu`, `true`/`false`, or a tuple such as `(3, 3)`",
                ));
            }
        };
        let tokens = tokens.into_iter().take(trees).collect();
        Ok(Value { kind, tokens })
    }
}

impl ToTokens for Value {
    fn to_tokens(&self, out: &mut TokenStream) {
        self.tokens.to_tokens(out)
    }
}
