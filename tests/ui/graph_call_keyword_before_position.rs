use strata::model;

fn main() {
    let m = model! {
        let x = Input((4, 6));
        let mask = Input((4, 4));
        MultiHeadAttention(num_heads = 2, key_dim = 3)(x, attention_mask = mask, x)
    };
    println!("{}", m.summary());
}
