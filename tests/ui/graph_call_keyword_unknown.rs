use strata::model;

fn main() {
    let m = model! {
        let x = Input((4, 6));
        let m = Input((4, 4));
        let a = MultiHeadAttention(num_heads = 2, key_dim = 3)(x, x, attention_mak = m);
        let h = Dense(4)(x, mask = m);
        Add()([a, h])
    };
    println!("{}", m.summary());
}
