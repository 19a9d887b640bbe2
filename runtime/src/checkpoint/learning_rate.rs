//! The learning rate in a checkpoint's metadata. A constant one is recorded (a callback such
//! as `ReduceLROnPlateau` may have changed it since `compile`); a schedule is code, not
//! data, and its value follows from the restored step count.

use crate::optim::LearningRate;
use crate::train::TrainState;
use std::collections::HashMap;

const KEY: &str = "learning_rate";

/// Records `lr` when it is a constant. Rust prints an `f32` with the fewest digits that
/// read back to the same value, so the text round-trips exactly.
pub(super) fn record(meta: &mut HashMap<String, String>, lr: &LearningRate) {
    if let LearningRate::Constant(v) = lr {
        meta.insert(KEY.to_string(), v.to_string());
    }
}

/// The recorded constant, if any; an error message for one that is not a finite rate >= 0.
pub(super) fn recorded(meta: &HashMap<String, String>) -> Result<Option<f32>, String> {
    let Some(text) = meta.get(KEY) else {
        return Ok(None);
    };
    match text.parse::<f32>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(Some(v)),
        _ => Err(format!(
            "its learning_rate {text:?} is not a finite number >= 0"
        )),
    }
}

/// Sets the optimizer's constant learning rate to `lr` and returns it; a model compiled
/// with a schedule keeps the schedule (its value comes from the step count) and gets `None`.
pub(super) fn restore(t: &mut TrainState, lr: f32) -> Option<f32> {
    let config = t.optimizer.config_mut();
    match config.learning_rate {
        LearningRate::Constant(_) => {
            config.learning_rate = LearningRate::Constant(lr);
            Some(lr)
        }
        LearningRate::Schedule(_) => None,
    }
}
