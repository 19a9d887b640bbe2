use strata::model;

fn main() {
    let model = model! {
        let x = Input((4, 6));
        MultiHeadAttention(num_heads = 2, key_dim = 3)(x)
    };
}
