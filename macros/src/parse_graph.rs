//! The syntax of `model!`'s graph form, and nothing else: `let` bindings of layers and
//! layer calls, then the output expression. Which names are bound, and to what, is
//! `check_graph.rs`'s business; here a call is told from a layer by its shape alone
//! (`Dense(16)` is a layer, written CamelCase as the catalogue is; `enc(a)` calls the
//! binding `enc`; `Dense(16)(x)` makes a layer and calls it).

use crate::parse::{parse_layer, split_commas, split_statements, LayerSyntax};
use proc_macro2::{Delimiter, TokenStream, TokenTree};
use quote::ToTokens;
use syn::parse::Parse;
use syn::parse::{ParseStream, Parser};
use syn::{Attribute, Ident, Token};

pub struct GraphSyntax {
    pub bindings: Vec<Binding>,
    /// The last expression: the model's output (a tuple for several). `None` when it is
    /// missing (reported).
    pub output: Option<Expr>,
}

/// `let name = expr;` or `let (a, b) = expr;`, with any doc comments above it.
pub struct Binding {
    pub docs: Vec<Attribute>,
    pub pattern: Pattern,
    pub expr: Expr,
}

/// What a `let` binds: one name, or a tuple of names (a call's several outputs, as
/// Keras' `seq, h, c = LSTM(8, return_state=True)(x)`).
pub enum Pattern {
    Name(Ident),
    Tuple(Vec<Ident>, TokenStream),
}

impl Pattern {
    /// The names bound, in order.
    pub fn names(&self) -> Vec<&Ident> {
        match self {
            Pattern::Name(n) => vec![n],
            Pattern::Tuple(names, _) => names.iter().collect(),
        }
    }
}

pub enum Expr {
    /// `Dense(16, relu)` or `Input(32)`: a layer, not yet called.
    Layer(LayerSyntax),
    /// `x`: a bound value or layer.
    Name(Ident),
    /// `Dense(10)(x)`, `enc(a)`, `Add()([a, b])`, `MultiHeadAttention(...)(q, v)`.
    Call {
        callee: Box<Expr>,
        args: CallArgs,
        tokens: TokenStream,
    },
    /// `(a, b)`: several outputs.
    Tuple(Vec<Expr>, TokenStream),
}

/// `name = value` among a call's arguments.
pub struct Keyword {
    pub name: Ident,
    pub value: Expr,
    pub tokens: TokenStream,
}

/// What a layer is called on.
pub enum CallArgs {
    /// `(x)` or `(query, value)`: each argument an input; then any given by name,
    /// `(q, v, attention_mask = m)`.
    Positional(Vec<Expr>, Vec<Keyword>),
    /// `([a, b])`: one list, as Keras' merge layers take.
    List(Vec<Expr>, TokenStream),
}

impl Expr {
    /// The tokens, for errors about the expression as a whole.
    pub fn tokens(&self) -> TokenStream {
        match self {
            Expr::Layer(l) => l.tokens.clone(),
            Expr::Name(n) => quote::quote!(#n),
            Expr::Call { tokens, .. } | Expr::Tuple(_, tokens) => tokens.clone(),
        }
    }
}

/// Whether `body` is a graph: it starts with a `let` (after any doc comments).
pub fn is_graph(body: &TokenStream) -> bool {
    let skip_attrs = |s: ParseStream| -> syn::Result<bool> {
        s.call(Attribute::parse_outer)?;
        let is_let = s.peek(Token![let]);
        s.parse::<TokenStream>()?;
        Ok(is_let)
    };
    skip_attrs.parse2(body.clone()).unwrap_or(false)
}

/// Parses a graph body; every syntax error found comes back with what did parse.
pub fn parse_graph(body: TokenStream) -> (GraphSyntax, Vec<syn::Error>) {
    let mut errors = Vec::new();
    let mut bindings = Vec::new();
    let mut output = None;
    let (statements, last) = split_statements(body);
    for st in statements {
        match parse_binding.parse2(st) {
            Ok(b) => bindings.push(b),
            Err(e) => errors.push(e),
        }
    }
    match last {
        Some(tokens) if starts_with_let(&tokens) => {
            errors.push(syn::Error::new_spanned(
                &tokens,
                "a graph model ends with its output, without `let` or `;`: e.g. \
                 `Dense(10, softmax)(h)`",
            ));
            if let Ok(b) = parse_binding.parse2(tokens) {
                bindings.push(b);
            }
        }
        Some(tokens) => match parse_expr(tokens) {
            Ok(e) => output = Some(e),
            Err(e) => errors.push(e),
        },
        None => errors.push(syn::Error::new(
            proc_macro2::Span::call_site(),
            "a graph model ends with its output, without `let` or `;`: e.g. \
             `Dense(10, softmax)(h)`",
        )),
    }
    (GraphSyntax { bindings, output }, errors)
}

fn starts_with_let(tokens: &TokenStream) -> bool {
    matches!(tokens.clone().into_iter().next(), Some(TokenTree::Ident(i)) if i == "let")
}

fn parse_binding(s: ParseStream) -> syn::Result<Binding> {
    let docs = s.call(Attribute::parse_outer)?;
    s.parse::<Token![let]>()?;
    let pattern = if s.peek(syn::token::Paren) {
        let inner;
        let paren = syn::parenthesized!(inner in s);
        let names = inner.parse_terminated(Ident::parse, Token![,])?;
        let mut tokens = TokenStream::new();
        paren.surround(&mut tokens, |t| names.to_tokens(t));
        Pattern::Tuple(names.into_iter().collect(), tokens)
    } else {
        Pattern::Name(s.parse()?)
    };
    s.parse::<Token![=]>()?;
    let rest: TokenStream = s.parse()?;
    if rest.is_empty() {
        let (at, name): (TokenStream, String) = match &pattern {
            Pattern::Name(n) => (n.to_token_stream(), n.to_string()),
            Pattern::Tuple(_, t) => (t.clone(), quote::quote!(#t).to_string()),
        };
        return Err(syn::Error::new_spanned(
            at,
            format!("`{name}` is bound to nothing: write `let {name} = Dense(10)(x);`"),
        ));
    }
    Ok(Binding {
        docs,
        pattern,
        expr: parse_expr(rest)?,
    })
}

/// One expression: a name, a layer, calls of either, or a tuple of expressions.
pub fn parse_expr(tokens: TokenStream) -> syn::Result<Expr> {
    let trees: Vec<TokenTree> = tokens.clone().into_iter().collect();
    let expected = || {
        syn::Error::new_spanned(
            &tokens,
            "expected a layer call such as `Dense(10)(x)`, a bound name, or a tuple of outputs",
        )
    };
    let Some(first) = trees.first() else {
        return Err(expected());
    };
    let head = match first {
        TokenTree::Group(g) if g.delimiter() == Delimiter::Parenthesis && trees.len() == 1 => {
            let items = split_commas(g.stream())
                .into_iter()
                .map(parse_expr)
                .collect::<syn::Result<Vec<_>>>()?;
            return Ok(Expr::Tuple(items, tokens));
        }
        TokenTree::Group(g) if g.delimiter() == Delimiter::Brace => {
            // A layer of the user's own, `{ MyLayer::new(..) }`, possibly called.
            let (layer, _) = parse_layer.parse2(TokenStream::from(first.clone()))?;
            return calls(Expr::Layer(layer), &trees, 1);
        }
        TokenTree::Ident(head) => {
            let camel = head
                .to_string()
                .starts_with(|c: char| c.is_ascii_uppercase());
            if camel {
                // The layer and its arguments, parsed as a sequential model's layer is.
                let mut layer_tokens: TokenStream = TokenStream::from(first.clone());
                let mut used = 1;
                if let Some(TokenTree::Group(g)) = trees.get(1) {
                    if g.delimiter() == Delimiter::Parenthesis {
                        layer_tokens.extend([trees[1].clone()]);
                        used = 2;
                    }
                }
                let (layer, errs) = parse_layer.parse2(layer_tokens)?;
                if let Some(e) = errs.into_iter().reduce(|mut a, b| {
                    a.combine(b);
                    a
                }) {
                    return Err(e);
                }
                return calls(Expr::Layer(layer), &trees, used);
            }
            Expr::Name(head.clone())
        }
        _ => return Err(expected()),
    };
    calls(head, &trees, 1)
}

/// `callee` applied to each parenthesised group in `trees[from..]`, left to right.
fn calls(mut callee: Expr, trees: &[TokenTree], from: usize) -> syn::Result<Expr> {
    for (end, tree) in trees.iter().enumerate().skip(from) {
        let TokenTree::Group(g) = tree else {
            return Err(syn::Error::new_spanned(
                tree,
                "expected `(...)` calling the layer, or `;` after the binding",
            ));
        };
        if g.delimiter() != Delimiter::Parenthesis {
            return Err(syn::Error::new_spanned(
                tree,
                "a layer is called with parentheses: `Add()([a, b])`, `Dense(10)(x)`",
            ));
        }
        callee = Expr::Call {
            callee: Box::new(callee),
            args: call_args(g.stream())?,
            tokens: trees[..=end].iter().cloned().collect(),
        };
    }
    Ok(callee)
}

fn call_args(stream: TokenStream) -> syn::Result<CallArgs> {
    let trees: Vec<TokenTree> = stream.clone().into_iter().collect();
    if let [TokenTree::Group(g)] = trees.as_slice() {
        if g.delimiter() == Delimiter::Bracket {
            let items = split_commas(g.stream())
                .into_iter()
                .map(parse_expr)
                .collect::<syn::Result<Vec<_>>>()?;
            return Ok(CallArgs::List(items, stream));
        }
    }
    let mut items = Vec::new();
    let mut keywords = Vec::new();
    for part in split_commas(stream) {
        let trees: Vec<TokenTree> = part.clone().into_iter().collect();
        match trees.as_slice() {
            [TokenTree::Ident(name), TokenTree::Punct(eq), rest @ ..]
                if eq.as_char() == '=' && !rest.is_empty() =>
            {
                keywords.push(Keyword {
                    name: name.clone(),
                    value: parse_expr(rest.iter().cloned().collect())?,
                    tokens: part,
                });
            }
            _ if !keywords.is_empty() => {
                return Err(syn::Error::new_spanned(
                    part,
                    "an input by position after one by name: give the named ones last",
                ))
            }
            _ => items.push(parse_expr(part)?),
        }
    }
    Ok(CallArgs::Positional(items, keywords))
}
