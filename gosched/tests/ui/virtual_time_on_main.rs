#[gosched::main(virtual_time)]
fn main() {}
