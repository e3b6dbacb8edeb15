//! `#[gosched::main]` and `#[gosched::test]`: the attribute macros of gosched
//! (use them through the `gosched` crate, which re-exports them).
//!
//! Both build a runtime from their options and run the function's body in it:
//! a plain `fn` as a goroutine (so its blocking calls park a goroutine, not a
//! thread), an `async fn` as a future driven by `Runtime::block_on`.
//!
//! Options, all optional, as `name = value` pairs separated by commas:
//! `procs = N` (the runtime's Ps), `stack_size = BYTES` (goroutine stacks),
//! `deadlock_detection = BOOL` (Go's "all goroutines are asleep"); and for
//! tests, `virtual_time` (the runtime's clock moves only when everything in
//! it is parked, straight to the next timer; one P unless `procs` says
//! otherwise; a stall fails the test: `gosched::testing`).

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{quote, quote_spanned};
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Expr, ItemFn, Meta, MetaNameValue, ReturnType, Token};

/// Run `main` as gosched's main goroutine (or, for an `async fn main`, as a
/// future on the runtime). Options: `procs = N`, `stack_size = BYTES`,
/// `deadlock_detection = BOOL`.
///
/// As in Go, the program ends when `main` returns: the runtime is not shut
/// down (goroutines still running are not waited for).
#[proc_macro_attribute]
pub fn main(args: TokenStream, item: TokenStream) -> TokenStream {
    expand_or_explain(args, item, Kind::Main)
}

/// A test that runs in a fresh gosched runtime: a plain `fn` as a goroutine,
/// an `async fn` as a future on the runtime. The runtime is shut down when
/// the test ends. Options: `procs = N`, `stack_size = BYTES`,
/// `deadlock_detection = BOOL`, `virtual_time` (see `gosched::testing`: a
/// one-hour timeout takes microseconds).
#[proc_macro_attribute]
pub fn test(args: TokenStream, item: TokenStream) -> TokenStream {
    expand_or_explain(args, item, Kind::Test)
}

/// On misuse: the error, and the item as it was (so that the only error is
/// ours, not a missing `main` besides it).
fn expand_or_explain(args: TokenStream, item: TokenStream, kind: Kind) -> TokenStream {
    match expand(args, item.clone(), kind) {
        Ok(out) => out,
        Err(e) => {
            let mut out = e.to_compile_error();
            out.extend(TokenStream2::from(item));
            out.into()
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Main,
    Test,
}

impl Kind {
    fn attr(self) -> &'static str {
        match self {
            Kind::Main => "#[gosched::main]",
            Kind::Test => "#[gosched::test]",
        }
    }
}

#[derive(Default)]
struct Options {
    procs: Option<Expr>,
    stack_size: Option<Expr>,
    deadlock_detection: Option<Expr>,
    /// `virtual_time` alone (true, and one P by default) or `= BOOL`.
    virtual_time: Option<Expr>,
    virtual_time_bare: bool,
}

fn parse_options(args: TokenStream, kind: Kind) -> syn::Result<Options> {
    const USAGE: &str = "options are `name = value` pairs: `procs = N`, `stack_size = BYTES`, \
         `deadlock_detection = BOOL`; and for tests `virtual_time`";
    let list = Punctuated::<Meta, Token![,]>::parse_terminated
        .parse(args)
        .map_err(|e| syn::Error::new(e.span(), format!("{}: {USAGE}", kind.attr())))?;
    let list = list
        .into_iter()
        .map(|m| match m {
            Meta::NameValue(nv) => Ok(nv),
            // `virtual_time` alone: `virtual_time = true`, one P by default.
            Meta::Path(path) if path.is_ident("virtual_time") => Ok(MetaNameValue {
                value: syn::parse_quote_spanned!(path.span()=> true),
                eq_token: Default::default(),
                path,
            }),
            other => Err(syn::Error::new(
                other.span(),
                format!("{}: {USAGE}", kind.attr()),
            )),
        })
        .collect::<syn::Result<Vec<MetaNameValue>>>()?;
    let mut opts = Options::default();
    for nv in list {
        let name = nv
            .path
            .get_ident()
            .map(|i| i.to_string())
            .unwrap_or_default();
        let slot = match name.as_str() {
            "procs" => &mut opts.procs,
            "stack_size" => &mut opts.stack_size,
            "deadlock_detection" => &mut opts.deadlock_detection,
            "virtual_time" if kind == Kind::Test => {
                // `virtual_time` or `= true`: one P unless `procs` says.
                opts.virtual_time_bare = matches!(
                    &nv.value,
                    Expr::Lit(l) if matches!(&l.lit, syn::Lit::Bool(b) if b.value)
                );
                &mut opts.virtual_time
            }
            "virtual_time" => {
                return Err(syn::Error::new(
                    nv.path.span(),
                    "#[gosched::main]: `virtual_time` is for tests (`#[gosched::test(virtual_time)]`)",
                ));
            }
            _ => {
                let path = &nv.path;
                let shown = quote!(#path).to_string().replace(' ', "");
                return Err(syn::Error::new(
                    nv.path.span(),
                    format!(
                        "{}: unknown option `{shown}`; the options are `procs = N`, \
                         `stack_size = BYTES`, `deadlock_detection = BOOL` and, for tests, \
                         `virtual_time`",
                        kind.attr(),
                    ),
                ));
            }
        };
        if slot.is_some() {
            return Err(syn::Error::new(
                nv.path.span(),
                format!("{}: option `{name}` is given twice", kind.attr()),
            ));
        }
        *slot = Some(nv.value);
    }
    Ok(opts)
}

fn expand(args: TokenStream, item: TokenStream, kind: Kind) -> syn::Result<TokenStream> {
    let opts = parse_options(args, kind)?;
    let func: ItemFn = syn::parse(item)
        .map_err(|e| syn::Error::new(e.span(), format!("{} goes on a function", kind.attr())))?;
    let sig = &func.sig;
    if !sig.inputs.is_empty() {
        return Err(syn::Error::new(
            sig.inputs.span(),
            format!("{}: the function must take no arguments", kind.attr()),
        ));
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        return Err(syn::Error::new(
            sig.generics.span(),
            format!("{}: the function cannot be generic", kind.attr()),
        ));
    }
    if let Some(c) = &sig.constness {
        return Err(syn::Error::new(
            c.span(),
            format!("{}: the function cannot be `const`", kind.attr()),
        ));
    }
    if kind == Kind::Test {
        if let Some(a) = func.attrs.iter().find(|a| a.path().is_ident("test")) {
            return Err(syn::Error::new(
                a.span(),
                "#[gosched::test] already makes this a test: remove the second `#[test]`",
            ));
        }
    }

    // Virtual time runs on one P unless the test asks for more: the order
    // in which goroutines run is then the same from run to run.
    let one: Expr = syn::parse_quote!(1);
    let procs = opts
        .procs
        .iter()
        .chain((opts.procs.is_none() && opts.virtual_time_bare).then_some(&one));
    let stack_size = opts.stack_size.iter();
    let deadlock = opts.deadlock_detection.iter();
    let virtual_time = opts.virtual_time.iter();
    let what = format!("{}: cannot build the gosched runtime", kind.attr());
    let builder = quote! {
        ::gosched::Builder::new()
            #(.virtual_time(#virtual_time))*
            #(.procs(#procs))*
            #(.stack_size(#stack_size))*
            #(.deadlock_detection(#deadlock))*
            .build()
            .expect(#what)
    };

    let attrs = &func.attrs;
    let vis = &func.vis;
    let name = &sig.ident;
    let body = &func.block;
    let (ret, out_ty): (TokenStream2, TokenStream2) = match &sig.output {
        ReturnType::Default => (quote!(), quote!(())),
        ReturnType::Type(arrow, ty) => (quote!(#arrow #ty), quote!(#ty)),
    };
    let span = Span::call_site();
    let run = match (sig.asyncness.is_some(), kind) {
        (false, Kind::Main) => quote_spanned! {span=>
            ::gosched::__private::main_goroutine(#builder, move || -> #out_ty #body)
        },
        (false, Kind::Test) => quote_spanned! {span=>
            ::gosched::__private::test_goroutine(#builder, move || -> #out_ty #body)
        },
        (true, kind) => {
            let runner = match kind {
                Kind::Main => quote!(main_future),
                Kind::Test => quote!(test_future),
            };
            quote_spanned! {span=>
                {
                    // Boxed as a `dyn Future` of the declared output so that
                    // `?` in the body knows its error type.
                    let body: ::core::pin::Pin<
                        ::std::boxed::Box<dyn ::core::future::Future<Output = #out_ty>>,
                    > = ::std::boxed::Box::pin(async move #body);
                    ::gosched::__private::#runner(#builder, body)
                }
            }
        }
    };
    let test_attr = match kind {
        Kind::Test => quote!(#[::core::prelude::v1::test]),
        Kind::Main => quote!(),
    };
    Ok(quote! {
        #test_attr
        #(#attrs)*
        #vis fn #name() #ret {
            #run
        }
    }
    .into())
}
