#[gosched::test]
fn takes_an_argument(n: u32) {
    let _ = n;
}

fn main() {}
