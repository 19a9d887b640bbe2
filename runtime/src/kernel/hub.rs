//! The rendezvous of a replicated native computation: each replica's thread meets the
//! others here for its collectives.

use super::data::{Data, DataMut, Storage};
use crate::{Error, Result};
use std::sync::{Condvar, Mutex, PoisonError, RwLock};

/// Where the replicas of one executable exchange data: a slot per replica and a barrier
/// that a failing replica can break, so the others return an error instead of waiting
/// forever.
pub(crate) struct Hub {
    replicas: usize,
    slots: Vec<RwLock<Storage>>,
    gate: Mutex<Gate>,
    cv: Condvar,
}

struct Gate {
    arrived: usize,
    generation: u64,
    aborted: bool,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Hub({} replicas)", self.replicas)
    }
}

/// The error replicas see when another replica failed first (that one reports the cause).
pub(crate) const ABORTED: &str = "another replica failed during this step";

impl Hub {
    pub(crate) fn new(replicas: usize) -> Hub {
        Hub {
            replicas,
            slots: (0..replicas)
                .map(|_| RwLock::new(Storage::F32(Vec::new())))
                .collect(),
            gate: Mutex::new(Gate {
                arrived: 0,
                generation: 0,
                aborted: false,
            }),
            cv: Condvar::new(),
        }
    }

    /// Waits until every replica has arrived; an error if a replica aborted instead.
    pub(crate) fn barrier(&self) -> Result<()> {
        let mut g = self.gate.lock().unwrap_or_else(PoisonError::into_inner);
        if g.aborted {
            return Err(aborted());
        }
        let generation = g.generation;
        g.arrived += 1;
        if g.arrived == self.replicas {
            g.arrived = 0;
            g.generation += 1;
            self.cv.notify_all();
            return Ok(());
        }
        // No spinning before sleeping: measured on a loaded 2-core machine, a spinning
        // waiter steals the core the replica it waits for needs (a 120 us spin ping-pong
        // against 12 us through the kernel).
        while g.generation == generation && !g.aborted {
            g = self.cv.wait(g).unwrap_or_else(PoisonError::into_inner);
        }
        if g.generation == generation {
            Err(aborted())
        } else {
            Ok(())
        }
    }

    /// Breaks the barrier for everyone: called by a replica that failed or panicked.
    pub(crate) fn abort(&self) {
        let mut g = self.gate.lock().unwrap_or_else(PoisonError::into_inner);
        g.aborted = true;
        self.cv.notify_all();
    }

    /// Re-arms the barrier before an execution (every replica is idle then).
    pub(crate) fn reset(&self) {
        let mut g = self.gate.lock().unwrap_or_else(PoisonError::into_inner);
        g.arrived = 0;
        g.aborted = false;
    }

    /// Replica `id`'s part of an all-reduce: publishes `x`, waits for every replica's,
    /// and writes their sum into `out`. Every replica adds the slots in replica order, so
    /// every replica's result is bit-identical (the replicas' parameters stay equal).
    pub fn all_reduce_sum(&self, id: usize, x: Data<'_>, out: DataMut<'_>) -> Result<()> {
        {
            let mut slot = self.slots[id]
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            store(&mut slot, x);
        }
        self.barrier()?;
        let summed = self.sum_slots(out);
        // Nobody may overwrite its slot (the next all-reduce) before all have read it.
        let passed = self.barrier();
        summed.and(passed)
    }

    fn sum_slots(&self, mut out: DataMut<'_>) -> Result<()> {
        for (r, slot) in self.slots.iter().enumerate() {
            let slot = slot.read().unwrap_or_else(PoisonError::into_inner);
            let first = r == 0;
            match (slot.data(), out.reborrow()) {
                (Data::F32(a), DataMut::F32(o)) => accumulate(o, a, first, |x, y| x + y)?,
                (Data::F64(a), DataMut::F64(o)) => accumulate(o, a, first, |x, y| x + y)?,
                (Data::I32(a), DataMut::I32(o)) => accumulate(o, a, first, i32::wrapping_add)?,
                (Data::I64(a), DataMut::I64(o)) => accumulate(o, a, first, i64::wrapping_add)?,
                (a, o) => {
                    return Err(Error::Backend {
                        backend: "native",
                        message: format!(
                            "all_reduce_sum of {} into {} (sums need f32, f64, i32 or i64 on every replica)",
                            a.dtype(),
                            o.dtype()
                        ),
                    })
                }
            }
        }
        Ok(())
    }
}

fn aborted() -> Error {
    Error::Backend {
        backend: "native",
        message: ABORTED.into(),
    }
}

/// `out = a` for the first replica's slot, `out = f(out, a)` for the others.
fn accumulate<T: Copy>(out: &mut [T], a: &[T], first: bool, f: impl Fn(T, T) -> T) -> Result<()> {
    if a.len() != out.len() {
        return Err(Error::Backend {
            backend: "native",
            message: format!(
                "all_reduce_sum: the replicas' operands differ in size ({} and {} elements)",
                a.len(),
                out.len()
            ),
        });
    }
    if first {
        out.copy_from_slice(a);
    } else {
        for (o, &v) in out.iter_mut().zip(a) {
            *o = f(*o, v);
        }
    }
    Ok(())
}

/// Copies `x` into a slot, reusing its memory when the element type is unchanged.
fn store(slot: &mut Storage, x: Data<'_>) {
    match (slot, x) {
        (Storage::F32(v), Data::F32(a)) => replace_with(v, a),
        (Storage::F64(v), Data::F64(a)) => replace_with(v, a),
        (Storage::I32(v), Data::I32(a)) => replace_with(v, a),
        (Storage::I64(v), Data::I64(a)) => replace_with(v, a),
        (slot, x) => *slot = x.to_storage(),
    }
}

fn replace_with<T: Copy>(v: &mut Vec<T>, a: &[T]) {
    v.clear();
    v.extend_from_slice(a);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn an_aborting_replica_releases_the_others() {
        let hub = Arc::new(Hub::new(2));
        let h = hub.clone();
        let waiting = std::thread::spawn(move || h.barrier());
        std::thread::sleep(Duration::from_millis(20));
        hub.abort();
        assert!(waiting.join().unwrap().is_err());
        // Re-armed, the barrier works again.
        hub.reset();
        let h = hub.clone();
        let other = std::thread::spawn(move || h.barrier());
        assert!(hub.barrier().is_ok());
        assert!(other.join().unwrap().is_ok());
    }

    #[test]
    fn sums_are_in_replica_order_on_every_replica() {
        let hub = Arc::new(Hub::new(3));
        // Values whose sum depends on the order of additions in f32.
        let xs = [1.0e8f32, 1.0, -1.0e8];
        let threads: Vec<_> = (0..3)
            .map(|id| {
                let h = hub.clone();
                std::thread::spawn(move || {
                    let mut out = [0f32];
                    h.all_reduce_sum(id, Data::F32(&[xs[id]]), DataMut::F32(&mut out))
                        .unwrap();
                    out[0]
                })
            })
            .collect();
        let sums: Vec<f32> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        let ordered = (xs[0] + xs[1]) + xs[2];
        assert!(
            sums.iter().all(|s| s.to_bits() == ordered.to_bits()),
            "{sums:?}"
        );
    }
}
