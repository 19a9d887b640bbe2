use strata::model;

fn main() {
    let m = model! {
        let x = Input(4);
        ()
    };
    println!("{}", m.summary());
}
