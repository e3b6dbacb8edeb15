//! `cfg(vthread)`: the targets where goroutines get thread pointers of their
//! own (`src/vthread/`): Linux x86-64 with glibc, outside loom (its models run
//! no goroutines) and Miri (which has its own TLS destructor shim).

fn main() {
    println!("cargo::rustc-check-cfg=cfg(vthread)");
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    let supported = var("CARGO_CFG_TARGET_OS") == "linux"
        && var("CARGO_CFG_TARGET_ARCH") == "x86_64"
        && var("CARGO_CFG_TARGET_ENV") == "gnu"
        && std::env::var_os("CARGO_CFG_MIRI").is_none()
        && std::env::var_os("CARGO_CFG_LOOM").is_none();
    if supported {
        println!("cargo::rustc-cfg=vthread");
    }
}
