#[gosched::test(procs = 1, procs = 2)]
fn twice() {}

fn main() {}
