#[gosched::main(procs)]
fn main() {}
