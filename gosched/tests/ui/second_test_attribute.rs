#[gosched::test]
#[test]
fn twice_a_test() {}

fn main() {}
