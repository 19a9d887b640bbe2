//! `examples/seed_tpu.rs`, the tutorial, runs to the end on a machine without a TPU: the
//! TPU steps fail fast and it continues on `Strategy::auto()`; and forced onto native
//! threads by `STRATA_STRATEGY`. Its own binary: it sets the environment.

#[allow(dead_code)]
#[path = "../examples/seed_tpu.rs"]
mod seed_tpu;

#[test]
fn the_tutorial_runs_without_a_tpu_and_under_a_forced_strategy() {
    std::env::remove_var("STRATA_STRATEGY");
    std::env::remove_var("STRATA_DEVICE");
    seed_tpu::main().unwrap();
    std::env::set_var("STRATA_STRATEGY", "mirrored:native:2");
    seed_tpu::main().unwrap();
    std::env::remove_var("STRATA_STRATEGY");
}
