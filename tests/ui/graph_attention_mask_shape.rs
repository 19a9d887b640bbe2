use strata::model;

fn main() {
    let m = model! {
        let x = Input((4, 6));
        let mask = Input((3, 4));
        MultiHeadAttention(num_heads = 2, key_dim = 3)(x, x, attention_mask = mask)
    };
    println!("{}", m.summary());
}
