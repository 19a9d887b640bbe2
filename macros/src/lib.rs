//! `model!`: a layer stack declared inline, checked at compile time.
//!
//! The macro runs in three passes: `parse` (syntax only), `check` (every layer against
//! its one entry in `strata_spec`, every shape worked out, all mistakes collected and
//! spanned on the user's tokens) and `expand` (which cannot fail). On mistakes, `fallback` emits them
//! with a stand-in so nothing else fails because of them. The user-facing documentation
//! is on the `strata::model` re-export.

mod check;
mod check_graph;
mod expand;
mod fallback;
mod parse;
mod parse_graph;
mod suggest;
mod value;

#[cfg(test)]
mod tests;

use proc_macro2::TokenStream;

/// Declares a model: see `strata::model` for the syntax.
#[proc_macro]
pub fn model(input: proc_macro::TokenStream) -> proc_macro::TokenStream {
    expand_model(input.into()).into()
}

fn expand_model(input: TokenStream) -> TokenStream {
    let (syntax, mut errors) = parse::parse(input);
    let Some(syntax) = syntax else {
        return fallback::stub(None, errors);
    };
    match check::check(&syntax) {
        Ok(model) if errors.is_empty() => expand::expand(&syntax.form, &model),
        Ok(_) => fallback::stub(Some(&syntax.form), errors),
        Err(e) => {
            errors.push(e);
            fallback::stub(Some(&syntax.form), errors)
        }
    }
}
