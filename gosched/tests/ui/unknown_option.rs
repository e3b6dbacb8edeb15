#[gosched::main(threads = 4)]
fn main() {}
