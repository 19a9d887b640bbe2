//! `examples/serve.rs` runs: a trained model shared by worker threads answers every request
//! as one `predict` over them all would, and the answers are as accurate as the tutorial's
//! model gets after one epoch on Fashion-MNIST (Debian's `dataset-fashion-mnist`, installed
//! by `scripts/test`; about 0.83–0.85).

#[path = "../examples/serve.rs"]
mod serve;

#[test]
fn a_model_shared_by_threads_answers_requests_from_a_channel() {
    let args = serve::Args {
        requests: 1000,
        ..serve::Args::default()
    };
    let accuracy = serve::run(&args).unwrap_or_else(|e| {
        panic!("the serve example failed ({e}); Fashion-MNIST comes from `apt-get install dataset-fashion-mnist` (scripts/test does)")
    });
    assert!(accuracy >= 0.78, "accuracy {accuracy}");
}
