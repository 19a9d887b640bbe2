//! What the macro emits when the model has mistakes: the errors, plus a stand-in of the
//! same kind (an expression of a model type, or the named struct with the same
//! associated items) so the code around the invocation type-checks and rustc reports the
//! user's mistakes alone, not a cascade of errors they cause.

use crate::parse::Form;
use proc_macro2::TokenStream;
use quote::quote;

pub fn stub(form: Option<&Form>, errors: Vec<syn::Error>) -> TokenStream {
    let errors = errors.iter().map(syn::Error::to_compile_error);
    match form {
        None => quote!(#(#errors)*),
        Some(Form::Expr) => quote!({
            #(#errors)*
            ::strata::__private::stub_model()
        }),
        Some(Form::Named { attrs, vis, ident }) => quote! {
            #(#errors)*
            #(#attrs)*
            #[derive(Clone, Debug, Default)]
            #vis struct #ident {}

            impl ::strata::nn::Architecture for #ident {
                const INPUT_SHAPE: ::strata::__private::Option<&'static [usize]> = ::strata::__private::None;
                const OUTPUT_SHAPE: ::strata::__private::Option<&'static [usize]> = ::strata::__private::None;

                fn layers(&self) -> ::strata::__private::Vec<&dyn ::strata::nn::Layer> {
                    ::strata::__private::Vec::new()
                }
            }

            impl #ident {
                /// A stand-in: the model has errors.
                #vis fn model() -> ::strata::Model<#ident> {
                    ::strata::Model::new(<#ident as ::strata::__private::Default>::default())
                }
            }
        },
    }
}
