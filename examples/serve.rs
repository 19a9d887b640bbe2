//! A model serving requests: trained once, then shared by worker threads (a `Model` is
//! `Send + Sync` and `predict` takes `&self`, so no mutex is needed) that answer requests
//! from a channel, each with the class and its probability for one Fashion-MNIST image.
//!
//!     cargo run --release --example serve [-- --data DIR --workers 4 --requests 2000]
//!
//! It trains the tutorial's model for one epoch on the training images, then sends the
//! test images as requests and checks every answer against one `predict` over all of them.

use ndarray::{Array2, ArrayD, Axis};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Instant;
use strata::data::{load_mnist, FASHION_MNIST_DIR};
use strata::prelude::*;

/// One request: an image and where to send its answer.
struct Request {
    id: usize,
    image: ArrayD<f32>,
    reply: mpsc::Sender<Answer>,
}

/// The class the model gives an image, and its probability.
struct Answer {
    id: usize,
    class: usize,
    probability: f32,
}

pub struct Args {
    pub data: String,
    pub workers: usize,
    pub requests: usize,
    pub epochs: usize,
}

impl Default for Args {
    fn default() -> Args {
        Args {
            data: FASHION_MNIST_DIR.into(),
            workers: 4,
            requests: 2000,
            epochs: 1,
        }
    }
}

fn args() -> std::result::Result<Args, String> {
    let mut a = Args::default();
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        let number = |v: String| v.parse::<usize>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--data" => a.data = value()?,
            "--workers" => a.workers = number(value()?)?.max(1),
            "--requests" => a.requests = number(value()?)?,
            "--epochs" => a.epochs = number(value()?)?,
            other => {
                return Err(format!(
                    "unknown flag {other} (use --data DIR, --workers N, --requests N, --epochs N)"
                ))
            }
        }
    }
    Ok(a)
}

/// The worker loop: takes requests off the shared queue until it closes.
fn serve(model: &Model<impl strata::nn::Architecture>, queue: &Mutex<mpsc::Receiver<Request>>) {
    loop {
        // The lock is held only to take the next request, never while predicting.
        let next = queue.lock().map(|q| q.recv());
        let Ok(Ok(req)) = next else { return };
        let answer = model
            .predict_one(&req.image)
            .and_then(|p| p.to_vec::<f32>());
        let Ok(p) = answer else { return };
        let (class, &probability) = p
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .unwrap_or((0, &0.0));
        let _ = req.reply.send(Answer {
            id: req.id,
            class,
            probability,
        });
    }
}

fn fail(message: impl Into<String>) -> Error {
    Error::InvalidArgument {
        what: "serve".into(),
        message: message.into(),
    }
}

/// Trains, serves `args.requests` test images and returns the accuracy of the answers.
pub fn run(args: &Args) -> Result<f64> {
    let data = load_mnist(&args.data).inspect_err(|_| {
        eprintln!(
            "serve: cannot read {}: install Debian's dataset-fashion-mnist or pass --data DIR",
            args.data
        );
    })?;
    let flat = |x: ArrayD<f32>| -> Result<Array2<f32>> {
        let n = x.shape()[0];
        x.into_shape_with_order((n, 784))
            .map_err(|e| fail(e.to_string()))
    };
    let (x_train, x_test) = (flat(data.x_train)?, flat(data.x_test)?);
    let requests = args.requests.min(x_test.nrows());

    let mut model = model![
        Dense(128, relu, input_shape = 784),
        Dense(64, relu),
        Dense(10, softmax)
    ];
    model.compile(
        Adam::default(),
        SparseCategoricalCrossentropy::default(),
        [Accuracy],
    )?;
    model.fit(&x_train, &data.y_train, Fit::epochs(args.epochs).verbose(0))?;
    let model = Arc::new(model);

    let (send, queue) = mpsc::channel::<Request>();
    let queue = Arc::new(Mutex::new(queue));
    let workers: Vec<_> = (0..args.workers)
        .map(|_| {
            let (model, queue) = (model.clone(), queue.clone());
            std::thread::spawn(move || serve(&model, &queue))
        })
        .collect();

    let start = Instant::now();
    let (reply, answers) = mpsc::channel();
    for (id, image) in x_test.axis_iter(Axis(0)).take(requests).enumerate() {
        let image = image.to_owned().into_dyn();
        let reply = reply.clone();
        send.send(Request { id, image, reply })
            .map_err(|_| fail("every worker stopped"))?;
    }
    drop((send, reply));
    let mut got: Vec<Option<Answer>> = (0..requests).map(|_| None).collect();
    for a in answers {
        let id = a.id;
        got[id] = Some(a);
    }
    let elapsed = start.elapsed();
    for w in workers {
        let _ = w.join();
    }

    // Every answer is what one predict over all the images gives.
    let all: Array2<f32> = model.predict_array(&x_test.slice(ndarray::s![..requests, ..]))?;
    let mut correct = 0;
    for (id, a) in got.iter().enumerate() {
        let a = a
            .as_ref()
            .ok_or_else(|| fail(format!("request {id} got no answer")))?;
        let row = all.row(id);
        let (class, &p) = row
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .unwrap_or((0, &0.0));
        if a.class != class || (a.probability - p).abs() > 1e-6 {
            return Err(fail(format!(
                "request {id}: a worker answered class {} ({}), one predict gives {class} ({p})",
                a.class, a.probability
            )));
        }
        correct += (a.class as i64 == data.y_test[id] as i64) as usize;
    }
    let accuracy = correct as f64 / requests.max(1) as f64;
    println!(
        "{requests} requests answered by {} workers in {:.3} s ({:.0} requests/s); accuracy {accuracy:.3}",
        args.workers,
        elapsed.as_secs_f64(),
        requests as f64 / elapsed.as_secs_f64().max(1e-9),
    );
    Ok(accuracy)
}

#[allow(dead_code)] // `tests/serve.rs` includes this file and calls `run`.
fn main() -> Result<()> {
    match args() {
        Ok(a) => run(&a).map(|_| ()),
        Err(e) => {
            eprintln!("serve: {e}");
            std::process::exit(2);
        }
    }
}
