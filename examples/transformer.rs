//! A small transformer encoder on a synthetic task that needs attention: does a sequence
//! of 6 tokens (from 24) hold some token twice? About half the sequences do. Each token is
//! embedded, a learned position embedding (a layer of this file's own, used inside
//! `model!` in braces) is added, then one encoder block: multi-head self-attention and a
//! feed-forward network, each with a residual connection and layer normalisation; the
//! mean over positions is classified.
//!
//!     cargo run --release --example transformer [-- --epochs 10 --seed 0]

use strata::ir::Value;
use strata::loss::SparseCategoricalCrossentropy;
use strata::metrics::Accuracy;
use strata::nn::{Forward, Initializer, Layer, ParamSpec};
use strata::optim::Adam;
use strata::train::Fit;
use strata::{model, Result};

const LENGTH: usize = 6;
const VOCABULARY: usize = 24;

/// A learned embedding of each position, added to the input (`[steps, features]`).
#[derive(Debug)]
pub struct PositionEmbedding {
    name: String,
}

impl PositionEmbedding {
    pub fn new(name: &str) -> PositionEmbedding {
        PositionEmbedding { name: name.into() }
    }
}

impl Layer for PositionEmbedding {
    fn class(&self) -> &'static str {
        "PositionEmbedding"
    }
    fn name(&self) -> &str {
        &self.name
    }
    fn output_shape(&self, input: &[usize]) -> Result<Vec<usize>> {
        match input {
            [_, _] => Ok(input.to_vec()),
            _ => Err(strata::nn::layer::bad_input(
                self,
                input,
                "(steps, features)",
            )),
        }
    }
    fn params(&self, input: &[usize]) -> Result<Vec<ParamSpec>> {
        self.output_shape(input)?;
        Ok(vec![ParamSpec {
            name: format!("{}/embeddings", self.name),
            dims: input.to_vec(),
            init: Initializer::RandomUniform,
            fan_in: input[0],
            fan_out: input[1],
            trainable: true,
        }])
    }
    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        let [positions] = strata::nn::layer::expect_params::<1>(self, params)?;
        cx.g.add(x, positions)
    }
}

model! {
    /// One transformer encoder block over token ids, classifying the whole sequence.
    pub struct Encoder {
        let x = Input(6);
        let h = Embedding(24, 32)(x);
        let h = { PositionEmbedding::new("position_embedding") }(h);
        let a = MultiHeadAttention(num_heads = 4, key_dim = 8)(h, h);
        let h = LayerNormalization()(Add()([h, a]));
        let f = Dense(32)(Dense(64, relu)(h));
        let h = LayerNormalization()(Add()([h, f]));
        Dense(2, softmax)(GlobalAveragePooling1D()(h))
    }
}

/// `n` sequences and whether each holds a token twice, from `seed`.
pub fn repeats(n: usize, seed: u64) -> (ndarray::Array2<i32>, ndarray::Array1<i32>) {
    let x = strata::random::uniform_int(&[n, LENGTH], 0, VOCABULARY as i32, seed)
        .expect("sizes are fixed")
        .into_shape_with_order((n, LENGTH))
        .expect("n x LENGTH");
    let y = x
        .outer_iter()
        .map(|row| {
            let twice = (0..LENGTH).any(|i| (i + 1..LENGTH).any(|j| row[i] == row[j]));
            i32::from(twice)
        })
        .collect();
    (x, y)
}

fn main() -> Result<()> {
    let mut epochs = 10;
    let mut seed = 0;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().and_then(|v| v.parse::<u64>().ok());
        match (flag.as_str(), value) {
            ("--epochs", Some(v)) => epochs = v as usize,
            ("--seed", Some(v)) => seed = v,
            _ => {
                eprintln!("transformer: use --epochs N and --seed N");
                std::process::exit(2);
            }
        }
    }
    let (x, y) = repeats(20_000, seed);
    let (x_test, y_test) = repeats(4_000, seed + 1);
    let mut model = Encoder::model().with_seed(seed)?;
    print!("{}", model.summary());
    model.compile(
        Adam::new(0.003),
        SparseCategoricalCrossentropy::default(),
        [Accuracy],
    )?;
    model.fit(&x, &y, Fit::epochs(epochs).batch_size(64).seed(seed))?;
    let test = model.evaluate(&x_test, &y_test)?;
    println!(
        "test accuracy: {:.4} (half the sequences hold a token twice)",
        test.get("accuracy").unwrap_or(f64::NAN)
    );
    Ok(())
}
