#[gosched::main]
struct Main;

fn main() {}
